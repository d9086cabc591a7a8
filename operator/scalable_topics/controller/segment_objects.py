"""Segment objects: one per segment, named ``<topic>-<descriptor>``, owned by their topic.

A segment's object is created before its storage, so that whatever storage exists is always
findable (deletion lists objects by label) and a child's broker finds its parents' objects.
It is removed after its storage, in state ``Deleting`` meanwhile (:func:`mark_deleting`).
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..model.hash_range import HashRange
from ..model.resources import (
    API_VERSION,
    TOPIC_LABEL,
    ScalableTopic,
    Segment,
    SegmentPhase,
    segment_object_name,
)
from ..model.segment import descriptor
from ..store import AlreadyExists, NotFound, Store
from ..store.informers import Informers


def segment_manifest(
    topic: ScalableTopic,
    segment_id: int,
    hash_range: HashRange,
    parents: Sequence[int],
    subscriptions: Sequence[str],
) -> dict[str, Any]:
    namespace, name = topic.metadata.namespace or "default", topic.metadata.name
    return {
        "apiVersion": API_VERSION,
        "kind": Segment.KIND,
        "metadata": {
            "name": segment_object_name(name, descriptor(segment_id, hash_range)),
            "namespace": namespace,
            "labels": {TOPIC_LABEL: name},
            "ownerReferences": [
                {
                    "apiVersion": API_VERSION,
                    "kind": ScalableTopic.KIND,
                    "name": name,
                    "uid": topic.metadata.uid,
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        },
        "spec": {
            "topic": name,
            "segmentId": segment_id,
            "hashRange": {"start": hash_range.start, "end": hash_range.end},
            "parents": list(parents),
            "subscriptions": list(subscriptions),
        },
    }


async def ensure_segment_object(
    store: Store,
    informers: Informers,
    topic: ScalableTopic,
    segment_id: int,
    hash_range: HashRange,
    parents: Sequence[int],
    subscriptions: Sequence[str],
) -> dict[str, Any]:
    """The segment's object, created if missing (its spec is immutable once made)."""
    manifest = segment_manifest(topic, segment_id, hash_range, parents, subscriptions)
    namespace, name = manifest["metadata"]["namespace"], manifest["metadata"]["name"]
    cached = informers.segments.get(namespace, name)
    if cached is not None:
        return cached
    try:
        return await store.create(manifest)
    except AlreadyExists:  # the cache is behind: the store has it
        return await store.get(Segment.KIND, namespace, name)


@dataclass(frozen=True, slots=True)
class SegmentObject:
    """What deleting a topic needs of a Segment object, read from its metadata and status
    only: an object whose spec the model refuses (a topic left half created) still goes."""

    namespace: str
    name: str
    broker: str | None
    state: str | None

    @classmethod
    def of(cls, raw: dict[str, Any]) -> SegmentObject:
        metadata, status = raw.get("metadata") or {}, raw.get("status") or {}
        broker, state = status.get("broker"), status.get("state")
        return cls(
            metadata.get("namespace") or "default",
            metadata["name"],
            broker if isinstance(broker, str) else None,
            state if isinstance(state, str) else None,
        )


async def mark_deleting(store: Store, segment: Segment | SegmentObject) -> None:
    """Record that the segment's storage is being removed (garbage collection, topic deletion,
    a rolled-back child): state ``Deleting`` until the object goes. An object gone is fine."""
    if isinstance(segment, Segment):
        segment = SegmentObject(
            segment.metadata.namespace or "default",
            segment.metadata.name,
            segment.status.broker,
            segment.status.state.value if segment.status.state is not None else None,
        )
    if segment.state == SegmentPhase.DELETING.value:
        return
    with contextlib.suppress(NotFound):
        await store.patch_status(
            Segment.KIND,
            segment.namespace,
            segment.name,
            {"status": {"state": SegmentPhase.DELETING.value}},
        )
