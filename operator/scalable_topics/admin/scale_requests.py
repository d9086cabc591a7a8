"""Asking for a split or merge, and waiting for the answer: what ``stctl topics split/merge``
does. The request is the same annotation a kubectl user writes (model/scale_request.py), tagged
with a token so that the outcome in ``status.lastOperation`` can be told apart from others'."""

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
    ScaleRequest,
)
from ..store import Store

_POLL_SECONDS = 0.02


class RequestTimedOut(Exception):
    pass


class NoLayoutYet(LayoutError):
    """The topic has no segments yet: no controller has created it."""

    def __init__(self, namespace: str, name: str) -> None:
        super().__init__(f"topic {namespace}/{name} has no segments yet: is a controller running?")


async def request_scaling(
    store: Store,
    namespace: str,
    name: str,
    kind: ChangeKind,
    segment_ids: tuple[int, ...],
    wait_seconds: float,
) -> LastOperation:
    """Check the request against the live layout (raising the LayoutError that names why it is
    impossible, with nothing written), ask for it, and wait for its outcome."""
    topic = ScalableTopic.model_validate(await store.get(ScalableTopic.KIND, namespace, name))
    if not topic.status.segments:
        raise NoLayoutYet(namespace, name)
    annotation = SPLIT_ANNOTATION if kind is ChangeKind.SPLIT else MERGE_ANNOTATION
    ScaleRequest(kind, segment_ids, annotation).plan(
        SegmentLayout.from_status(topic.status.to_wire())
    )
    token = f"stctl@{socket.gethostname()}/{secrets.token_hex(6)}"
    await store.patch(
        ScalableTopic.KIND,
        namespace,
        name,
        {
            "metadata": {
                "annotations": {
                    annotation: ",".join(str(i) for i in segment_ids),
                    REQUESTER_ANNOTATION: token,
                }
            }
        },
    )
    try:
        async with asyncio.timeout(wait_seconds):
            while True:
                topic = ScalableTopic.model_validate(
                    await store.get(ScalableTopic.KIND, namespace, name)
                )
                last = topic.status.last_operation
                if last is not None and last.requested_by == token:
                    return last
                await asyncio.sleep(_POLL_SECONDS)
    except TimeoutError:
        raise RequestTimedOut(
            f"no controller answered within {wait_seconds:g} s; the request stays on the topic "
            f"({annotation}) and runs when a controller leads it: is one running?"
        ) from None
