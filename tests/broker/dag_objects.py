"""Store objects a DAG watch reads (ScalableTopic, Segment, the shard Lease naming the
controller), written directly through the store port, with no controller."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from scalable_topics.model.layout import SegmentLayout
from scalable_topics.model.resources import (
    API_VERSION,
    TOPIC_LABEL,
    ScalableTopic,
    Segment,
    segment_object_name,
)
from scalable_topics.model.segment import SegmentInfo
from scalable_topics.store import NotFound, Store

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
