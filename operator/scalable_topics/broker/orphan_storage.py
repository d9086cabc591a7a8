"""Storage of segments that no longer exist, removed by the broker that holds it.

Deleting a topic, pruning a segment or rolling back a split does not wait for a broker that
is down (controller/lifecycle.py gives a silent broker up after a bounded wait), and a split's
or merge's child placed on a broker that died before the layout commit is placed on another
(controller/scaling.py), so a broker can come back holding storage that nothing points to any
more. When it registers, it asks the store about every segment it hosts and deletes the
storage of the ones that are gone, or that are served elsewhere.

The first rule (:func:`is_orphaned`): a hosted segment's storage is removed when

1. its Segment object ``<topic>-<descriptor>`` does not exist, and
2. its topic does not exist, or is being deleted, or holds the segment neither in its layout
   (``status.segments``: pruned, or never committed) nor in its pending split or merge (a
   child being made).

Why this never removes live storage: the controller creates a segment's Segment object before
its storage, and removes the object only after it deleted (or gave up deleting) the storage.
The storage is listed before the store is asked, so an object missing from the answer was not
being created for it: it was removed. Condition 2 keeps what the topic still names, so an
object deleted by hand (``kubectl delete seg``) never costs the data of a live segment. And
the decision is made again under the registry's lock just before deleting, reading the object
and the topic afresh, while the lock holds back a concurrent creation of the same segment.
Nothing is removed when the store has never seen this broker before (its heartbeat Lease did
not exist when it started): a broker started on a new or wrong store keeps its data.

The second rule (:func:`is_placed_elsewhere`): storage of a segment whose object exists is
removed when

1. the object's placement (``status.broker``) names a URL other than this broker's own,
2. that URL is another broker's: a heartbeat Lease other than this broker's carries it, and
3. nothing was ever written to this copy (its log never had an entry).

A segment never moves once written (its log is on its broker's disk), so a placement naming
another broker means this copy is a child that was made here and then placed elsewhere before
the layout commit, when nothing could have been written to it. (2) keeps the data when this
broker's own URL changed (its old URL is no other broker's), and (3) keeps any copy that
holds a message, whatever the store says.

Not covered: a topic deleted and created again under the same name while the broker was down.
The storage does not record which incarnation of the topic it belongs to, so a segment the new
topic names with the same descriptor is kept.
"""

from __future__ import annotations

import asyncio
import logging
from collections import defaultdict
from collections.abc import Collection
from typing import Any

from pydantic import ValidationError

from ..model.hash_range import HashRange
from ..model.placement import BROKER_LEASE_PREFIX, BROKER_URL_ANNOTATION, broker_lease_name
from ..model.resources import TOPIC_LABEL, ScalableTopic, Segment, segment_object_name
from ..store import NotFound, Store, StoreError
from ..store.kinds import LEASE
from .config import BrokerConfig
from .registry import SegmentRegistry
from .segment import HostedSegment

log = logging.getLogger(__name__)

RETRY_FIRST, RETRY_MAX = 1.0, 30.0


def is_orphaned(
    segment_id: int, hash_range: HashRange, has_object: bool, topic: ScalableTopic | None
) -> bool:
    """Whether storage of the segment ``segment_id`` over ``hash_range`` is orphaned, given
    whether its Segment object exists and its topic as stored (None when it does not exist)."""
    if has_object:
        return False
    if topic is None or topic.metadata.deletion_timestamp is not None:
        return True
    named = {(e.id, e.hash_range.start, e.hash_range.end) for e in topic.status.segments}
    pending = topic.status.pending_operation
    if pending is not None:
        named |= {(c.id, c.hash_range.start, c.hash_range.end) for c in pending.children}
    return (segment_id, hash_range.start, hash_range.end) not in named


def is_placed_elsewhere(
    placed_on: str | None, own_url: str, other_brokers: Collection[str], written: bool
) -> bool:
    """Whether a copy of a segment whose object exists is one left behind: the object places
    the segment on ``placed_on``, another broker's URL (one of ``other_brokers``, the URLs the
    other brokers' Leases carry), and nothing was ever ``written`` to the copy."""
    return (
        not written
        and placed_on is not None
        and placed_on != own_url
        and placed_on in other_brokers
    )


async def reclaim_orphaned_storage(
    store: Store, registry: SegmentRegistry, broker: BrokerConfig
) -> list[str]:
    """Delete the storage of every hosted segment that :func:`is_orphaned` or
    :func:`is_placed_elsewhere`; the descriptors, as ``namespace/topic/descriptor``, of what
    was deleted. ``broker``: this broker's configuration (its URL and identity)."""
    hosted: defaultdict[tuple[str, str], list[HostedSegment]] = defaultdict(list)
    for segment in registry:  # listed before the store is asked (see the module's notes)
        hosted[(segment.key.namespace, segment.key.topic)].append(segment)
    reclaimed = []
    others = await _other_brokers(store, broker) if hosted else frozenset[str]()
    for (namespace, name), segments in hosted.items():
        try:
            topic = await _topic(store, namespace, name)
        except ValidationError as error:
            log.warning(
                "topic %s/%s is unreadable, keeping its storage: %s", namespace, name, error
            )
            continue
        listing = await store.list(
            Segment.KIND, namespace=namespace, label_selector=f"{TOPIC_LABEL}={name}"
        )
        placements = {item["metadata"]["name"]: _placement(item) for item in listing.items}
        for segment in segments:
            descriptor = segment.meta.descriptor
            object_name = segment_object_name(name, descriptor)
            if object_name in placements:
                why = f"it is served by broker {placements[object_name]}"
                if not is_placed_elsewhere(
                    placements[object_name], broker.url, others, _written(segment)
                ):
                    continue
            else:
                why = "the segment no longer exists"
                if not is_orphaned(segment.key.segment_id, segment.meta.hash_range, False, topic):
                    continue

            async def still_orphaned(segment: HostedSegment = segment) -> bool:
                return await _orphaned_now(store, segment, broker)

            if await registry.delete_if(segment, still_orphaned):
                log.info(
                    "deleted the storage of segment %s of %s/%s: %s",
                    descriptor,
                    namespace,
                    name,
                    why,
                )
                reclaimed.append(f"{namespace}/{name}/{descriptor}")
    return reclaimed


async def store_knows_broker(
    store: Store, system_namespace: str, identity: str, hosted: int
) -> bool:
    """Whether this broker's heartbeat Lease is in the store before it registers: storage it
    hosts was placed through this store only then. A store that has never seen the broker (a
    new one, or the wrong one) proves nothing about that storage, so nothing is removed."""
    try:
        await store.get(LEASE.kind, system_namespace, broker_lease_name(identity))
        return True
    except NotFound:
        if hosted:
            log.warning(
                "the store has never seen broker %s: keeping all %d segments it hosts",
                identity,
                hosted,
            )
        return False
    except StoreError as error:
        log.warning("cannot tell whether the store knows broker %s: %s", identity, error)
        return False


async def reclaim_until_done(store: Store, registry: SegmentRegistry, broker: BrokerConfig) -> None:
    """Reclaim once, retrying with backoff while the store or a deletion fails."""
    delay = RETRY_FIRST
    while True:
        try:
            await reclaim_orphaned_storage(store, registry, broker)
            return
        except StoreError as error:  # the store is unreachable: one line, no traceback
            log.warning(
                "removing storage of deleted segments failed (%s); retrying in %.0fs",
                error,
                delay,
            )
        except Exception:
            log.warning(
                "removing storage of deleted segments failed; retrying in %.0fs",
                delay,
                exc_info=True,
            )
        await asyncio.sleep(delay)
        delay = min(delay * 2, RETRY_MAX)


async def _orphaned_now(store: Store, segment: HostedSegment, broker: BrokerConfig) -> bool:
    """The decision made again from fresh reads (under the registry's lock)."""
    namespace, name = segment.key.namespace, segment.key.topic
    descriptor = segment.meta.descriptor
    try:
        raw = await store.get(Segment.KIND, namespace, segment_object_name(name, descriptor))
    except NotFound:
        pass
    else:
        others = await _other_brokers(store, broker)
        return is_placed_elsewhere(_placement(raw), broker.url, others, _written(segment))
    try:
        topic = await _topic(store, namespace, name)
    except ValidationError:
        return False
    return is_orphaned(segment.key.segment_id, segment.meta.hash_range, False, topic)


async def _other_brokers(store: Store, broker: BrokerConfig) -> frozenset[str]:
    """The URLs that other brokers' heartbeat Leases carry (a released Lease carries none)."""
    own = broker_lease_name(broker.identity)
    listing = await store.list(LEASE.kind, namespace=broker.system_namespace)
    urls = set()
    for lease in listing.items:
        metadata = lease.get("metadata") or {}
        lease_name = str(metadata.get("name", ""))
        url = (metadata.get("annotations") or {}).get(BROKER_URL_ANNOTATION)
        if lease_name.startswith(BROKER_LEASE_PREFIX) and lease_name != own and url:
            urls.add(str(url))
    return frozenset(urls)


def _placement(raw: dict[str, Any]) -> str | None:
    broker = (raw.get("status") or {}).get("broker")
    return str(broker) if broker else None


def _written(segment: HostedSegment) -> bool:
    return segment.last_entry_id >= 0


async def _topic(store: Store, namespace: str, name: str) -> ScalableTopic | None:
    try:
        return ScalableTopic.model_validate(await store.get(ScalableTopic.KIND, namespace, name))
    except NotFound:
        return None
