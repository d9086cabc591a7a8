"""What an administrator sees of a topic: a one-line summary and a full description. Pure.

Both are read from the ScalableTopic (spec and status) and, for the description, its Segment
objects (which broker serves each segment, and the object's own state). They render as JSON in
camelCase, the form the admin API answers with.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from ..model.layout import SegmentLayout
from ..model.resources import ScalableTopic
from ..model.segment import SegmentInfo


@dataclass(frozen=True, slots=True)
class TopicSummary:
    namespace: str
    name: str
    phase: str | None
    epoch: int | None
    active_segments: int
    sealed_segments: int
    subscriptions: tuple[str, ...]
    controller: str | None
    deleting: bool

    def to_dict(self) -> dict[str, Any]:
        return {
            "namespace": self.namespace,
            "name": self.name,
            "phase": self.phase,
            "epoch": self.epoch,
            "activeSegments": self.active_segments,
            "sealedSegments": self.sealed_segments,
            "subscriptions": list(self.subscriptions),
            "controller": self.controller,
            "deleting": self.deleting,
        }


def summarize_stored(raw: Mapping[str, Any]) -> TopicSummary:
    """The summary of a stored topic, read field by field when the model refuses it (a topic
    stored by an older release or written to the store directly): listing and deleting never
    fail on one topic's content."""
    try:
        return summarize(ScalableTopic.model_validate(raw))
    except ValidationError:
        pass
    metadata, status = _mapping(raw.get("metadata")), _mapping(raw.get("status"))
    segments = [_mapping(s) for s in _list(status.get("segments"))]
    phase, epoch = status.get("phase"), status.get("epoch")
    return TopicSummary(
        namespace=str(metadata.get("namespace") or "default"),
        name=str(metadata.get("name") or ""),
        phase=phase if isinstance(phase, str) else None,
        epoch=epoch if isinstance(epoch, int) else None,
        active_segments=sum(1 for s in segments if s.get("state") == "Active"),
        sealed_segments=sum(1 for s in segments if s.get("state") == "Sealed"),
        subscriptions=tuple(
            str(_mapping(s).get("name"))
            for s in _list(_mapping(raw.get("spec")).get("subscriptions"))
        ),
        controller=_mapping(status.get("controller")).get("identity"),
        deleting=metadata.get("deletionTimestamp") is not None,
    )


def _mapping(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _list(value: object) -> list[Any]:
    return value if isinstance(value, list) else []


@dataclass(frozen=True, slots=True)
class SegmentPlacement:
    """What a Segment object says about its segment, read without the model: an object whose
    spec the model refuses (made by an older release, or by hand) still shows where it is."""

    segment_id: int
    state: str | None
    broker: str | None

    @classmethod
    def of(cls, raw: Mapping[str, Any]) -> SegmentPlacement | None:
        """None when the object names no segment id."""
        segment_id = _mapping(raw.get("spec")).get("segmentId")
        if not isinstance(segment_id, int):
            return None
        status = _mapping(raw.get("status"))
        state, broker = status.get("state"), status.get("broker")
        return cls(
            segment_id,
            state if isinstance(state, str) else None,
            broker if isinstance(broker, str) else None,
        )


def summarize(topic: ScalableTopic) -> TopicSummary:
    status = topic.status
    return TopicSummary(
        namespace=topic.metadata.namespace or "default",
        name=topic.metadata.name,
        phase=status.phase.value if status.phase is not None else None,
        epoch=status.epoch,
        active_segments=sum(1 for s in status.segments if s.state == "Active"),
        sealed_segments=sum(1 for s in status.segments if s.state == "Sealed"),
        subscriptions=tuple(s.name for s in topic.spec.subscriptions),
        controller=status.controller.identity if status.controller is not None else None,
        deleting=topic.metadata.deletion_timestamp is not None,
    )


@dataclass(frozen=True, slots=True)
class SegmentView:
    """One node of the DAG with what its Segment object says about it."""

    info: SegmentInfo
    object_state: str | None  # Pending, Active, Terminated, Deleting; None without an object
    broker: str | None

    def to_dict(self) -> dict[str, Any]:
        info = self.info
        return {
            "id": info.segment_id,
            "descriptor": info.descriptor,
            "range": f"{info.hash_range.start:04x}-{info.hash_range.end:04x}",
            "state": info.state.value,
            "objectState": self.object_state,
            "parents": list(info.parent_ids),
            "children": list(info.child_ids),
            "broker": self.broker,
            "createdAtEpoch": info.created_at_epoch,
            "sealedAtEpoch": info.sealed_at_epoch or None,
        }


@dataclass(slots=True)
class OnBrokers:
    """One subscription as the segments' brokers report it, over the segments that answered."""

    segments: list[int] = field(default_factory=list)  # ids of the segments that have it
    attached: int = 0  # consumers attached to it, summed over segments
    types: set[str] = field(default_factory=set)  # segment subscription types seen


# What queue consumers (the only ones that need no declaration) subscribe segments as.
_QUEUE_TYPES = frozenset({"Shared", "Key_Shared"})


def subscription_rows(
    topic: ScalableTopic, on_brokers: Mapping[str, OnBrokers] | None = None
) -> list[dict[str, Any]]:
    """Declared subscriptions, the ones consumers created (recorded in status by the
    controller, or, with ``on_brokers``, found on the segments' brokers), with their state,
    consumers, and where the brokers have them. A subscription not declared is a *runtime*
    one: ``declared`` is false."""
    declared = {spec.name: spec.type.value for spec in topic.spec.subscriptions}
    recorded = {entry.name: entry for entry in topic.status.subscriptions}
    rows = []
    for name in sorted(set(declared) | set(recorded) | set(on_brokers or ())):
        entry = recorded.get(name)
        seen = on_brokers.get(name) if on_brokers is not None else None
        kind = declared.get(name) or (entry.type.value if entry else None)
        if kind is None and seen is not None and seen.types and seen.types <= _QUEUE_TYPES:
            kind = "Queue"
        rows.append(
            {
                "name": name,
                "type": kind,
                "declared": name in declared,
                "state": entry.state.value if entry is not None and entry.state else None,
                "consumers": [
                    {"name": c.name, "assignedSegments": list(c.assigned_segments)}
                    for c in (entry.consumers if entry is not None else ())
                ],
                # None: the brokers were not asked (what the store alone says).
                "segments": (None if on_brokers is None else sorted(seen.segments) if seen else []),
                "attachedConsumers": (None if on_brokers is None else seen.attached if seen else 0),
            }
        )
    return rows


@dataclass(frozen=True, slots=True)
class TopicDescription:
    topic: ScalableTopic
    layout: SegmentLayout | None  # None until a controller has created the topic
    segments: tuple[SegmentView, ...]
    on_brokers: Mapping[str, OnBrokers] | None = None  # None: the brokers were not asked

    def to_dict(self) -> dict[str, Any]:
        topic, status = self.topic, self.topic.status

        def wire(value: Any) -> Any:
            return value.to_wire() if value is not None else None

        return {
            "namespace": topic.metadata.namespace or "default",
            "name": topic.metadata.name,
            "deleting": topic.metadata.deletion_timestamp is not None,
            "spec": topic.spec.to_wire(),
            "phase": status.phase.value if status.phase is not None else None,
            "epoch": self.layout.epoch if self.layout is not None else None,
            "nextSegmentId": self.layout.next_segment_id if self.layout is not None else None,
            "segments": [segment.to_dict() for segment in self.segments],
            "controller": wire(status.controller),
            "pendingOperation": wire(status.pending_operation),
            "lastOperation": wire(status.last_operation),
            "producer": wire(status.producer),
            "subscriptions": subscription_rows(topic, self.on_brokers),
            "conditions": [
                c.model_dump(mode="json", by_alias=True, exclude_none=True)
                for c in status.conditions
            ],
        }


def describe(
    topic: ScalableTopic,
    segment_objects: Iterable[Mapping[str, Any]],
    on_brokers: Mapping[str, OnBrokers] | None = None,
) -> TopicDescription:
    """Raise the model's CorruptLayout (a ValueError) when the stored layout is inconsistent."""
    layout = SegmentLayout.from_status(topic.status.to_wire()) if topic.status.segments else None
    by_id = {
        placement.segment_id: placement
        for placement in map(SegmentPlacement.of, segment_objects)
        if placement is not None
    }
    views = []
    for info in layout.segments.values() if layout is not None else ():
        placement = by_id.get(info.segment_id)
        views.append(
            SegmentView(
                info,
                placement.state if placement is not None else None,
                placement.broker if placement is not None else None,
            )
        )
    return TopicDescription(topic, layout, tuple(views), on_brokers)
