"""Store objects a DAG watch reads (ScalableTopic, Segment, the shard Lease naming the
controller), written directly through the store port, with no controller."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from scalable_topics.model.layout import SegmentLayout
from scalable_topics.model.ownership import (
    SHARD_COUNT_ANNOTATION,
    announced_shard_count,
    shard_lease_name,
    shard_of,
)
from scalable_topics.model.resources import (
    API_VERSION,
    CONTROLLER_ENDPOINT_ANNOTATION,
    TOPIC_LABEL,
    ScalableTopic,
    Segment,
    segment_object_name,
)
from scalable_topics.model.segment import SegmentInfo
from scalable_topics.store import NotFound, Store
from scalable_topics.store.kinds import LEASE

AT = datetime(2024, 5, 1, 12, 0, tzinfo=UTC)


def topic_object(
    namespace: str, name: str, layout: SegmentLayout | None, uid: str = "uid-1"
) -> dict[str, Any]:
    status = layout.to_status() if layout is not None else {}
    return {
        "apiVersion": API_VERSION,
        "kind": ScalableTopic.KIND,
        "metadata": {"name": name, "namespace": namespace, "uid": uid},
        "spec": {"initialSegments": 1},
        "status": status,
    }


def segment_object(
    namespace: str, topic: str, info: SegmentInfo, broker: str | None
) -> dict[str, Any]:
    return {
        "apiVersion": API_VERSION,
        "kind": Segment.KIND,
        "metadata": {
            "name": segment_object_name(topic, info.descriptor),
            "namespace": namespace,
            "labels": {TOPIC_LABEL: topic},
        },
        "spec": {
            "topic": topic,
            "segmentId": info.segment_id,
            "hashRange": {"start": info.hash_range.start, "end": info.hash_range.end},
            "parents": list(info.parent_ids),
        },
        "status": {"broker": broker} if broker is not None else {},
    }


SYSTEM_NAMESPACE = "scalable-topics"


def lease_object(
    holder: str, endpoint: str | None, transitions: int = 0, shard: int = 0, count: int = 1
) -> dict[str, Any]:
    """A shard Lease; with the default single shard, every topic's leader."""
    annotations = {SHARD_COUNT_ANNOTATION: str(count)}
    if endpoint is not None:
        annotations[CONTROLLER_ENDPOINT_ANNOTATION] = endpoint
    return {
        "apiVersion": LEASE.api_version,
        "kind": LEASE.kind,
        "metadata": {
            "name": shard_lease_name(shard),
            "namespace": SYSTEM_NAMESPACE,
            "annotations": annotations,
        },
        "spec": {
            "holderIdentity": holder,
            "leaseDurationSeconds": 15,
            "leaseTransitions": transitions,
        },
    }


async def topic_lease(store: Store, namespace: str, topic: str) -> dict[str, Any]:
    """The Lease of the shard that leads ``topic``, as the controllers announce them."""
    leases = (await store.list(LEASE.kind, SYSTEM_NAMESPACE)).items
    count = announced_shard_count(leases)
    if count is None:  # no controller has announced its shards yet
        raise NotFound(LEASE.kind, SYSTEM_NAMESPACE, shard_lease_name(0))
    name = shard_lease_name(shard_of(namespace, topic, count))
    return await store.get(LEASE.kind, SYSTEM_NAMESPACE, name)


# -- writing them ---------------------------------------------------------------------------------


async def create_topic(
    store: Store, namespace: str, name: str, layout: SegmentLayout | None
) -> dict[str, Any]:
    created = await store.create(topic_object(namespace, name, None))
    if layout is None:
        return created
    return await store.patch_status(
        ScalableTopic.KIND, namespace, name, {"status": layout.to_status()}
    )


async def write_layout(store: Store, namespace: str, name: str, layout: SegmentLayout) -> None:
    await store.patch_status(ScalableTopic.KIND, namespace, name, {"status": layout.to_status()})


async def put_segment(
    store: Store, namespace: str, topic: str, info: SegmentInfo, broker: str | None
) -> None:
    """Create the Segment object, or set its broker if it exists."""
    obj = segment_object(namespace, topic, info, broker)
    name = obj["metadata"]["name"]
    try:
        await store.get(Segment.KIND, namespace, name)
    except NotFound:
        await store.create(obj)
    await store.patch_status(Segment.KIND, namespace, name, {"status": {"broker": broker}})


async def put_segments(
    store: Store,
    namespace: str,
    topic: str,
    layout: SegmentLayout,
    brokers: dict[int, str],
) -> None:
    for segment_id, broker in brokers.items():
        await put_segment(store, namespace, topic, layout.get(segment_id), broker)


async def put_lease(store: Store, holder: str, endpoint: str | None, transitions: int = 0) -> None:
    """Create the single shard Lease or overwrite its holder and endpoint."""
    wanted = lease_object(holder, endpoint, transitions)
    try:
        current = await store.get(LEASE.kind, SYSTEM_NAMESPACE, wanted["metadata"]["name"])
    except NotFound:
        await store.create(wanted)
        return
    wanted["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"]
    await store.replace(wanted)
