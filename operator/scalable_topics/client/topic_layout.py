"""What a client knows of a topic's DAG: the latest TopicUpdate, with the lookups producers
and consumers make on it. Pure: no I/O."""

from __future__ import annotations

import bisect
from collections.abc import Iterable
from dataclasses import dataclass, field

from ..model.hashing import hash_key
from ..model.segment import SegmentState
from ..protocol import SegmentNode, TopicUpdate

DEFAULT_NAMESPACE = "default"


def qualified_topic(topic: str) -> str:
    """``namespace/name``, with ``default`` for a bare name; ValueError for anything else."""
    namespace, slash, name = topic.rpartition("/")
    if not slash:
        namespace = DEFAULT_NAMESPACE
    if not name or (slash and not namespace) or "/" in namespace:
        raise ValueError(f"a topic is named NAME or NAMESPACE/NAME, not {topic!r}")
    return f"{namespace}/{name}"


@dataclass(frozen=True)
class TopicLayout:
    epoch: int
    segments: dict[int, SegmentNode]
    controller_endpoint: str | None = None
    # Active segments sorted by range start, and their starts, for key lookups.
    _active: tuple[SegmentNode, ...] = field(init=False, repr=False, compare=False)
    _starts: tuple[int, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        active = sorted(
            (s for s in self.segments.values() if s.state is SegmentState.ACTIVE),
            key=lambda s: s.hash_range.start,
        )
        object.__setattr__(self, "_active", tuple(active))
        object.__setattr__(self, "_starts", tuple(s.hash_range.start for s in active))

    @classmethod
    def from_update(cls, update: TopicUpdate) -> TopicLayout:
        return cls(
            update.epoch, {s.segment_id: s for s in update.segments}, update.controller_endpoint
        )

    @property
    def active(self) -> tuple[SegmentNode, ...]:
        """The Active segments in hash-range order."""
        return self._active

    def segment_for_hash(self, hash_value: int) -> SegmentNode:
        """The Active segment whose range holds ``hash_value`` (the ranges cover the space)."""
        index = bisect.bisect_right(self._starts, hash_value) - 1
        segment = self._active[index]
        assert segment.hash_range.contains(hash_value), "Active ranges must cover the hash space"
        return segment

    def segment_for_key(self, key: str) -> SegmentNode:
        return self.segment_for_hash(hash_key(key))

    def is_active(self, segment_id: int) -> bool:
        segment = self.segments.get(segment_id)
        return segment is not None and segment.state is SegmentState.ACTIVE

    def descendants(self, segment_ids: Iterable[int]) -> set[int]:
        """Every segment reachable from ``segment_ids`` through child links."""
        found: set[int] = set()
        frontier = list(segment_ids)
        while frontier:
            segment = self.segments.get(frontier.pop())
            if segment is None:
                continue
            for child in segment.child_ids:
                if child not in found:
                    found.add(child)
                    frontier.append(child)
        return found
