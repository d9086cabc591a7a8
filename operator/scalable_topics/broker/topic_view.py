"""What a DAG watch reports for one topic, and which store changes can alter it. Pure: no I/O.

A view is built from three objects: the ScalableTopic (its layout status), the topic's Segment
objects (where each segment is served) and the Lease of the topic's ownership shard (where its
controller takes registrations). The ``*_changes_view`` predicates tell the watch hub whether
an informer change can make the next view differ from the one it holds, so that the frequent
writes that cannot (load samples, drained markers, consumer registrations) cost no rebuild.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from ..model.layout import SegmentLayout
from ..model.ownership import lease_endpoint
from ..protocol import SegmentNode


@dataclass(frozen=True, slots=True)
class TopicView:
    """One topic's DAG as a watch reports it; ``uid`` tells a re-created topic apart."""

    uid: str
    epoch: int
    segments: tuple[SegmentNode, ...]
    controller_endpoint: str | None

    def broker_of(self, segment_id: int) -> str | None:
        for node in self.segments:
            if node.segment_id == segment_id:
                return node.broker_url
        return None

    def names(self, segment_id: int) -> bool:
        return any(node.segment_id == segment_id for node in self.segments)


LayoutKey = tuple[str, Any, Any]


def layout_key(topic: Mapping[str, Any]) -> LayoutKey:
    """The parts of a ScalableTopic a view depends on: identity and the layout status."""
    status = topic.get("status") or {}
    return (
        _uid(topic),
        (status.get("epoch"), status.get("nextSegmentId")),
        status.get("segments"),
    )


def build_view(
    topic: Mapping[str, Any], segments: Iterable[Mapping[str, Any]], lease: Mapping[str, Any] | None
) -> TopicView | None:
    """The view of ``topic``; None while its controller has not written a first layout.

    Raises CorruptLayout (a ValueError) when the layout status breaks an invariant.
    """
    status = topic.get("status") or {}
    if status.get("epoch") is None:
        return None
    layout = SegmentLayout.from_status(status)
    name = str((topic.get("metadata") or {}).get("name", ""))
    brokers: dict[int, str | None] = {}
    for obj in segments:
        placed = segment_placement(obj)
        if placed is not None and placed[0] == name:
            brokers[placed[1]] = placed[2]
    nodes = tuple(
        SegmentNode(
            info.segment_id,
            info.hash_range,
            info.state,
            info.parent_ids,
            info.child_ids,
            brokers.get(info.segment_id),
        )
        for info in layout.segments.values()
    )
    return TopicView(_uid(topic), layout.epoch, nodes, lease_endpoint(lease))


def segment_placement(obj: Mapping[str, Any]) -> tuple[str, int, str | None] | None:
    """(topic name, segment id, broker URL) of a Segment object; None when it is malformed."""
    spec = obj.get("spec")
    if not isinstance(spec, Mapping):
        return None
    topic, segment_id = spec.get("topic"), spec.get("segmentId")
    if not isinstance(topic, str) or not isinstance(segment_id, int) or segment_id < 0:
        return None
    status = obj.get("status")
    broker = status.get("broker") if isinstance(status, Mapping) else None
    return topic, segment_id, broker if isinstance(broker, str) and broker else None


# -- which events matter ---------------------------------------------------------------------


def topic_changes_view(seen: LayoutKey | None, topic: Mapping[str, Any] | None) -> bool:
    """Whether a ScalableTopic event (None: deleted) can change the view read at ``seen``."""
    return topic is None or seen is None or layout_key(topic) != seen


def segment_changes_view(
    view: TopicView | None, segment_id: int, broker: str | None, deleted: bool
) -> bool:
    """Whether a Segment event can change ``view``. Segments outside the layout cannot: a
    layout that adds them is a ScalableTopic change, which triggers a fresh read."""
    if view is None or not view.names(segment_id):
        return False
    return (None if deleted else broker) != view.broker_of(segment_id)


def _uid(topic: Mapping[str, Any]) -> str:
    return str((topic.get("metadata") or {}).get("uid") or "")
