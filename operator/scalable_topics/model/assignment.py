"""Which consumer of an ordered (Stream or Checkpoint) subscription reads which segments.

The seed's round-robin: the segments to read, sorted by the start of their hash range (then
id), are dealt to the consumers sorted by name. The segments to read are the Active ones *and
the sealed ones that still hold a backlog for the subscription*: leaving those out orphans the
messages written before a split (Pulsar bug #25642). A child is not dispatched before its
parents are drained (the broker enforces that), so handing parent and child to different
consumers keeps per-key order.

The deal is sticky. A segment that moves costs a redelivery of everything its old owner had
not acknowledged, and the old owner must let go before the new one may read it; a pure
round-robin moves almost every segment whenever one sealed segment drains (every position
after it shifts), and under steady splitting segments then move faster than they are read.
So each consumer keeps the segments it has, up to its round-robin share (the same counts the
plain deal gives, the larger shares going to the consumers that keep the most), and only the
rest are dealt, round-robin, to the consumers with room. Without a previous assignment this is
exactly the seed's deal.

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
    layout: SegmentLayout,
    consumers: Iterable[str],
    drained: Iterable[int],
    term: int,
    previous: Mapping[str, Iterable[int]] | None = None,
) -> Assignment:
    """Deal the segments to read over the consumers sorted by name, each keeping what it had
    in ``previous`` up to its share."""
    names = sorted(set(consumers))
    if not names:
        return Assignment(layout.epoch, term, {})
    readable = segments_to_read(layout, drained)
    position = {segment_id: index for index, segment_id in enumerate(readable)}
    # Round-robin position of each segment's plain owner: a consumer over its share keeps
    # those first, so the seed's deal is where repeated deals settle.
    plain_owner = {
        segment_id: names[index % len(names)] for index, segment_id in enumerate(readable)
    }
    kept: dict[str, list[int]] = {}
    claimed: set[int] = set()
    for name in names:
        held = sorted(
            (s for s in set((previous or {}).get(name, ())) if s in position and s not in claimed),
            key=lambda s: (plain_owner[s] != name, position[s]),
        )
        claimed.update(held)
        kept[name] = held
    base, extra = divmod(len(readable), len(names))
    keeping_most = sorted(names, key=lambda name: (-len(kept[name]), name))
    share = {name: base + (1 if rank < extra else 0) for rank, name in enumerate(keeping_most)}
    dealt = {name: kept[name][: share[name]] for name in names}
    taken = {segment_id for ids in dealt.values() for segment_id in ids}
    for segment_id in readable:
        if segment_id in taken:
            continue
        with_room = (name for name in names if len(dealt[name]) < share[name])
        receiver = min(with_room, key=lambda name: (len(dealt[name]), name))
        dealt[receiver].append(segment_id)
    return Assignment(
        layout.epoch,
        term,
        {name: tuple(sorted(ids, key=position.__getitem__)) for name, ids in dealt.items()},
    )
