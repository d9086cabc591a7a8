"""What an administrator sees of a topic: a one-line summary and a full description. Pure.

Both are read from the ScalableTopic (spec and status) and, for the description, its Segment
objects (which broker serves each segment, and the object's own state). They render as JSON in
camelCase, the form the admin API answers with.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from ..model.layout import SegmentLayout
from ..model.resources import ScalableTopic, Segment
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


def subscription_rows(topic: ScalableTopic) -> list[dict[str, Any]]:
    """Declared subscriptions and the ones consumers created, with their state and consumers."""
    declared = {spec.name: spec.type.value for spec in topic.spec.subscriptions}
    recorded = {entry.name: entry for entry in topic.status.subscriptions}
    rows = []
    for name in sorted(set(declared) | set(recorded)):
        entry = recorded.get(name)
        rows.append(
            {
                "name": name,
                "type": declared.get(name) or (entry.type.value if entry else None),
                "declared": name in declared,
                "state": entry.state.value if entry is not None and entry.state else None,
                "consumers": [
                    {"name": c.name, "assignedSegments": list(c.assigned_segments)}
                    for c in (entry.consumers if entry is not None else ())
                ],
            }
        )
    return rows


@dataclass(frozen=True, slots=True)
class TopicDescription:
    topic: ScalableTopic
    layout: SegmentLayout | None  # None until a controller has created the topic
    segments: tuple[SegmentView, ...]

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
            "subscriptions": subscription_rows(topic),
            "conditions": [
                c.model_dump(mode="json", by_alias=True, exclude_none=True)
                for c in status.conditions
            ],
        }


def describe(topic: ScalableTopic, segment_objects: Iterable[Segment]) -> TopicDescription:
    """Raise the model's CorruptLayout (a ValueError) when the stored layout is inconsistent."""
    layout = SegmentLayout.from_status(topic.status.to_wire()) if topic.status.segments else None
    by_id: Mapping[int, Segment] = {s.spec.segment_id: s for s in segment_objects}
    views = []
    for info in layout.segments.values() if layout is not None else ():
        segment = by_id.get(info.segment_id)
        views.append(
            SegmentView(
                info,
                segment.status.state.value
                if segment is not None and segment.status.state is not None
                else None,
                segment.status.broker if segment is not None else None,
            )
        )
    return TopicDescription(topic, layout, tuple(views))
