"""Asking for a split or merge, and waiting for the answer: what ``stctl topics split/merge``
does. The request is the same annotation a kubectl user writes (model/scale_request.py), tagged
with a token so that the outcome in ``status.lastOperation`` can be told apart from others'.

1. Check: the topic's operation slot must be free (else :class:`OperationInProgress`, naming
   the running operation or the request no controller has answered yet) and the request
   possible on the live layout (else the LayoutError that says why). Nothing is written.
2. Ask: write the request with a compare-and-swap on the version checked. When the topic moved
   in between (another request, a status write), check again from 1: of two concurrent
   requests one is written and the other refused, never one overwriting the other.
3. Wait: follow every version of the topic from that write until ``lastOperation`` carries
   this request's token: through the process's topic informer when there is one (a broker's:
   its changes of this topic, one handler, no watch of its own), else a store watch. Either
   way every version is seen, so an answer that a later operation replaced at once is still
   found. The request leaving the topic unanswered (removed or replaced by hand, the topic
   deleted) ends the wait with :class:`RequestAbandoned`.
"""

from __future__ import annotations

import asyncio
import secrets
import socket

from ..model.errors import LayoutError
from ..model.layout import ChangeKind, SegmentLayout
from ..model.resources import LastOperation, ScalableTopic
from ..model.scale_request import (
    MERGE_ANNOTATION,
    REQUESTER_ANNOTATION,
    SPLIT_ANNOTATION,
    Occupant,
    ScaleRequest,
    occupying,
    request_annotations,
)
from ..store import Conflict, EventType, Expired, Object, Store
from ..store.informer import Informer


class RequestTimedOut(Exception):
    pass


class NoLayoutYet(LayoutError):
    """The topic has no segments yet: no controller has created it."""

    def __init__(self, namespace: str, name: str) -> None:
        super().__init__(f"topic {namespace}/{name} has no segments yet: is a controller running?")


class OperationInProgress(Exception):
    """The topic's operation slot is taken; nothing was written. ``occupant`` says by what."""

    def __init__(self, namespace: str, name: str, occupant: Occupant) -> None:
        super().__init__(
            f"an operation is in progress on topic {namespace}/{name}: {occupant.describe()}; "
            "ask again when it is over"
        )
        self.occupant = occupant


class RequestAbandoned(Exception):
    """The request left the topic, or will never run, without an answer to its requester."""


async def request_scaling(
    store: Store,
    namespace: str,
    name: str,
    kind: ChangeKind,
    segment_ids: tuple[int, ...],
    wait_seconds: float,
    topics: Informer | None = None,
) -> LastOperation:
    """Check the request (raising OperationInProgress, or the LayoutError naming why it is
    impossible, with nothing written), ask for it, and wait for its own outcome (following
    ``topics``, a running ScalableTopic informer, when given)."""
    token = f"stctl@{socket.gethostname()}/{secrets.token_hex(6)}"
    asked = await _ask(store, namespace, name, kind, segment_ids, token)
    try:
        async with asyncio.timeout(wait_seconds):
            if topics is not None:
                return await _outcome_from_cache(topics, asked, token)
            return await _outcome(store, asked, token)
    except TimeoutError:
        annotation = SPLIT_ANNOTATION if kind is ChangeKind.SPLIT else MERGE_ANNOTATION
        raise RequestTimedOut(
            f"no controller answered within {wait_seconds:g} s; the request stays on the topic "
            f"({annotation}) and runs when a controller leads it: is one running?"
        ) from None


async def _ask(
    store: Store,
    namespace: str,
    name: str,
    kind: ChangeKind,
    segment_ids: tuple[int, ...],
    token: str,
) -> ScalableTopic:
    """Write the request into the free slot; the topic as written."""
    annotation = SPLIT_ANNOTATION if kind is ChangeKind.SPLIT else MERGE_ANNOTATION
    patch = {"metadata": {"annotations": request_annotations(kind, segment_ids, token)}}
    while True:
        topic = ScalableTopic.model_validate(await store.get(ScalableTopic.KIND, namespace, name))
        if topic.metadata.deletion_timestamp is not None:
            raise RequestAbandoned(f"topic {namespace}/{name} is being deleted")
        if not topic.status.segments:
            raise NoLayoutYet(namespace, name)
        status = topic.status
        occupant = occupying(
            topic.metadata.annotations, status.pending_operation, status.last_operation
        )
        if occupant is not None:
            raise OperationInProgress(namespace, name, occupant)
        ScaleRequest(kind, segment_ids, annotation).plan(
            SegmentLayout.from_status(status.to_wire())
        )
        try:
            written = await store.patch(
                ScalableTopic.KIND,
                namespace,
                name,
                patch,
                resource_version=topic.metadata.resource_version,
            )
        except Conflict:
            continue  # it moved since the check: check again
        return ScalableTopic.model_validate(written)


async def _outcome(store: Store, asked: ScalableTopic, token: str) -> LastOperation:
    """Follow the topic from the version that asked until the request is answered."""
    namespace, name = asked.metadata.namespace or "default", asked.metadata.name
    version = asked.metadata.resource_version
    while True:
        try:
            async with store.watch(
                ScalableTopic.KIND, namespace=namespace, resource_version=version
            ) as events:
                async for event in events:
                    if event.object["metadata"]["name"] != name:
                        continue
                    if event.type is EventType.DELETED:
                        raise RequestAbandoned(
                            f"topic {namespace}/{name} was deleted before a controller "
                            "answered the request"
                        )
                    answer = _answer(ScalableTopic.model_validate(event.object), token)
                    if answer is not None:
                        return answer
                    version = event.resource_version
        except Expired:
            # The history since ``version`` is gone: go on from the topic as it is now.
            topic = ScalableTopic.model_validate(
                await store.get(ScalableTopic.KIND, namespace, name)
            )
            try:
                answer = _answer(topic, token)
            except RequestAbandoned as abandoned:
                raise RequestAbandoned(
                    f"{abandoned}, or a later operation's answer replaced this one's before "
                    "it could be read"
                ) from None
            if answer is not None:
                return answer
            version = topic.metadata.resource_version


async def _outcome_from_cache(topics: Informer, asked: ScalableTopic, token: str) -> LastOperation:
    """As _outcome, from the informer's changes of the topic, each version in order. The cache
    may still be behind the write that asked: versions that carry no trace of this request's
    token come before it, and are skipped until the write itself (or a later version that
    carries the token) has been seen."""
    namespace, name = asked.metadata.namespace or "default", asked.metadata.name
    versions: asyncio.Queue[Object | None] = asyncio.Queue()
    unsubscribe = topics.subscribe_key(
        (namespace, name), lambda change: versions.put_nowait(change.new)
    )
    try:
        versions.put_nowait(topics.get(namespace, name))
        caught_up = False
        while True:
            version = await versions.get()
            if version is None:
                if caught_up:
                    raise RequestAbandoned(
                        f"topic {namespace}/{name} was deleted before a controller answered "
                        "the request"
                    )
                continue  # not in the cache yet
            topic = ScalableTopic.model_validate(version)
            caught_up = caught_up or (
                topic.metadata.resource_version == asked.metadata.resource_version
                or _mentions(topic, token)
            )
            if caught_up and (answer := _answer(topic, token)) is not None:
                return answer
    finally:
        unsubscribe()


def _mentions(topic: ScalableTopic, token: str) -> bool:
    """Whether this version of the topic knows the request: written at or after it."""
    status = topic.status
    return token in (
        topic.metadata.annotations.get(REQUESTER_ANNOTATION),
        status.pending_operation.requested_by if status.pending_operation else None,
        status.last_operation.requested_by if status.last_operation else None,
    )


def _answer(topic: ScalableTopic, token: str) -> LastOperation | None:
    """The request's outcome, None while it waits or runs; RequestAbandoned when it left the
    topic unanswered (the leader answers before it removes a request)."""
    last = topic.status.last_operation
    if last is not None and last.requested_by == token:
        return last
    namespace, name = topic.metadata.namespace or "default", topic.metadata.name
    if topic.metadata.deletion_timestamp is not None:
        raise RequestAbandoned(
            f"topic {namespace}/{name} is being deleted: the request will not run"
        )
    pending = topic.status.pending_operation
    running = pending is not None and pending.requested_by == token
    if not running and topic.metadata.annotations.get(REQUESTER_ANNOTATION) != token:
        raise RequestAbandoned(
            f"the request was removed from topic {namespace}/{name}, or replaced, before a "
            "controller answered it (see the topic's lastOperation and Events)"
        )
    return None
