"""Which consumer of an ordered (Stream or Checkpoint) subscription reads which segments.

The seed's round-robin: the segments to read, sorted by the start of their hash range (then
id), are dealt to the consumers sorted by name. The segments to read are the Active ones *and
the sealed ones that still hold a backlog for the subscription*: leaving those out orphans the
messages written before a split (Pulsar bug #25642). A child is not dispatched before its
parents are drained (the broker enforces that), so handing parent and child to different
consumers keeps per-key order.

Every assignment carries the layout epoch it was computed from and the controller term that
computed it; a consumer or broker ignores one older than what it has (Pulsar issue #26273).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from .layout import SegmentLayout


@dataclass(frozen=True, slots=True)
class Assignment:
    layout_epoch: int
    term: int
    segments_by_consumer: Mapping[str, tuple[int, ...]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(
            self, "segments_by_consumer", MappingProxyType(dict(self.segments_by_consumer))
        )

    def of(self, consumer: str) -> tuple[int, ...]:
        return self.segments_by_consumer.get(consumer, ())

    def supersedes(self, other: Assignment) -> bool:
        """Whether this assignment is newer than ``other``: a higher term wins, then a higher
        layout epoch. Anything else is stale and must be ignored."""
        return (self.term, self.layout_epoch) > (other.term, other.layout_epoch)

    def changed_for(self, previous: Assignment) -> list[str]:
        """Consumers whose segments differ from ``previous`` (the ones to notify)."""
        names = set(self.segments_by_consumer) | set(previous.segments_by_consumer)
        return sorted(name for name in names if self.of(name) != previous.of(name))


def segments_to_read(layout: SegmentLayout, drained: Iterable[int]) -> list[int]:
    """Active segments plus sealed ones not yet drained for the subscription, in range order."""
    done = set(drained)
    readable = [s for s in layout.segments.values() if s.is_active or s.segment_id not in done]
    readable.sort(key=lambda s: (s.hash_range.start, s.segment_id))
    return [s.segment_id for s in readable]


def assign(
    layout: SegmentLayout, consumers: Iterable[str], drained: Iterable[int], term: int
) -> Assignment:
    """Deal the segments to read round-robin over the consumers sorted by name."""
    names = sorted(set(consumers))
    dealt: dict[str, list[int]] = {name: [] for name in names}
    if names:
        for index, segment_id in enumerate(segments_to_read(layout, drained)):
            dealt[names[index % len(names)]].append(segment_id)
    return Assignment(layout.epoch, term, {name: tuple(ids) for name, ids in dealt.items()})
