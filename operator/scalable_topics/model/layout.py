"""The segment DAG of one scalable topic: an immutable, versioned value.

Every change (split, merge, prune) returns a new layout whose epoch is one higher; the old
value is never modified, so readers need no locks. Split and merge are planned first
(:class:`LayoutChange`), which reserves the child ids and ranges so that a controller can
write its intent down before it touches any segment, and applied later.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from functools import cached_property
from types import MappingProxyType
from typing import Any

from .errors import (
    CorruptLayout,
    InvalidSegmentCount,
    RangeTooSmallToSplit,
    SameSegment,
    SegmentActive,
    SegmentHasLiveParents,
    SegmentSealed,
    SegmentsNotAdjacent,
    StaleLayoutChange,
    UnknownSegment,
)
from .hash_range import HashRange
from .hashing import HASH_MAX, HASH_MIN, HASH_SPACE_SIZE
from .segment import SegmentInfo, SegmentState

MAX_SEGMENTS = HASH_SPACE_SIZE


class ChangeKind(StrEnum):
    SPLIT = "Split"
    MERGE = "Merge"


@dataclass(frozen=True, slots=True)
class PlannedChild:
    segment_id: int
    hash_range: HashRange


@dataclass(frozen=True, slots=True)
class LayoutChange:
    """A split or merge planned against the layout at ``base_epoch``."""

    kind: ChangeKind
    base_epoch: int
    parent_ids: tuple[int, ...]
    children: tuple[PlannedChild, ...]

    @property
    def child_ids(self) -> tuple[int, ...]:
        return tuple(child.segment_id for child in self.children)

    def describe(self) -> str:
        """What it does, in words: "split of segment 3", "merge of segments 3 and 4"."""
        parents = " and ".join(str(p) for p in self.parent_ids)
        noun = "split of segment" if self.kind is ChangeKind.SPLIT else "merge of segments"
        return f"{noun} {parents}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind.value,
            "baseEpoch": self.base_epoch,
            "parentIds": list(self.parent_ids),
            "children": [
                {
                    "id": c.segment_id,
                    "hashRange": {"start": c.hash_range.start, "end": c.hash_range.end},
                }
                for c in self.children
            ],
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> LayoutChange:
        try:
            return cls(
                kind=ChangeKind(data["kind"]),
                base_epoch=int(data["baseEpoch"]),
                parent_ids=tuple(int(p) for p in data["parentIds"]),
                children=tuple(
                    PlannedChild(
                        int(c["id"]),
                        HashRange(int(c["hashRange"]["start"]), int(c["hashRange"]["end"])),
                    )
                    for c in data["children"]
                ),
            )
        except (KeyError, TypeError, ValueError) as error:
            raise CorruptLayout(f"planned change {dict(data)!r} is malformed: {error}") from error


@dataclass(frozen=True)
class SegmentLayout:
    epoch: int
    next_segment_id: int
    segments: Mapping[int, SegmentInfo]

    def __post_init__(self) -> None:
        object.__setattr__(self, "segments", MappingProxyType(dict(sorted(self.segments.items()))))

    # -- construction -------------------------------------------------------------------------

    @classmethod
    def initial(cls, count: int, at: datetime) -> SegmentLayout:
        """Divide the hash space into ``count`` contiguous ranges whose sizes differ by at most 1."""
        if not 1 <= count <= MAX_SEGMENTS:
            raise InvalidSegmentCount(count, MAX_SEGMENTS)
        base, extra = divmod(HASH_SPACE_SIZE, count)
        segments: dict[int, SegmentInfo] = {}
        start = HASH_MIN
        for segment_id in range(count):
            size = base + (1 if segment_id < extra else 0)
            hash_range = HashRange(start, start + size - 1)
            segments[segment_id] = SegmentInfo(
                segment_id, hash_range, SegmentState.ACTIVE, created_at_epoch=0, created_at=at
            )
            start += size
        return cls(epoch=0, next_segment_id=count, segments=segments)

    # -- queries ------------------------------------------------------------------------------

    @cached_property
    def active(self) -> tuple[SegmentInfo, ...]:
        """Active segments ordered by the start of their range."""
        return tuple(
            sorted(
                (s for s in self.segments.values() if s.is_active), key=lambda s: s.hash_range.start
            )
        )

    @cached_property
    def _active_starts(self) -> list[int]:
        return [s.hash_range.start for s in self.active]

    @property
    def sealed(self) -> tuple[SegmentInfo, ...]:
        return tuple(s for s in self.segments.values() if not s.is_active)

    def get(self, segment_id: int) -> SegmentInfo:
        try:
            return self.segments[segment_id]
        except KeyError:
            raise UnknownSegment(segment_id) from None

    def find_active(self, hash_value: int) -> SegmentInfo:
        """The active segment that owns ``hash_value`` (the producer's routing decision)."""
        if not HASH_MIN <= hash_value <= HASH_MAX:
            raise ValueError(f"hash {hash_value:#x} is outside [{HASH_MIN:#06x}, {HASH_MAX:#06x}]")
        return self.active[bisect.bisect_right(self._active_starts, hash_value) - 1]

    def ancestors(self, segment_id: int) -> frozenset[int]:
        """Every present segment this one descends from."""
        return self._reach(segment_id, lambda s: s.parent_ids)

    def descendants(self, segment_id: int) -> frozenset[int]:
        return self._reach(segment_id, lambda s: s.child_ids)

    def lineage(self, segment_id: int) -> tuple[int, ...]:
        """The segment with all its present ancestors and descendants, oldest first.

        Ids grow with creation, so ascending order is a topological order of the DAG.
        """
        return tuple(
            sorted(self.ancestors(segment_id) | self.descendants(segment_id) | {segment_id})
        )

    def merge_depth(self, segment_id: int) -> int:
        """How many merges made this segment, counted along its deepest present ancestry.

        Pruned ancestors no longer count: the cap on it bounds the DAG that is still retained.
        """
        depths: dict[int, int] = {}
        for current in sorted(self.ancestors(segment_id) | {segment_id}):
            info = self.segments[current]
            inherited = max((depths[p] for p in info.parent_ids if p in depths), default=0)
            depths[current] = inherited + (1 if info.made_by_merge else 0)
        return depths[segment_id]

    # -- planning and applying changes -----------------------------------------------------

    def plan_split(self, segment_id: int) -> LayoutChange:
        parent = self._active(segment_id, "split")
        if not parent.hash_range.can_split():
            raise RangeTooSmallToSplit(segment_id, parent.hash_range.start)
        low, high = parent.hash_range.split()
        return LayoutChange(
            ChangeKind.SPLIT,
            self.epoch,
            (segment_id,),
            (PlannedChild(self.next_segment_id, low), PlannedChild(self.next_segment_id + 1, high)),
        )

    def plan_merge(self, first_id: int, second_id: int) -> LayoutChange:
        if first_id == second_id:
            raise SameSegment(first_id)
        first = self._active(first_id, "merge")
        second = self._active(second_id, "merge")
        if not first.hash_range.is_adjacent(second.hash_range):
            raise SegmentsNotAdjacent(first_id, second_id)
        low, high = sorted((first, second), key=lambda s: s.hash_range.start)
        merged = PlannedChild(self.next_segment_id, low.hash_range.union(high.hash_range))
        return LayoutChange(
            ChangeKind.MERGE, self.epoch, (low.segment_id, high.segment_id), (merged,)
        )

    def validate(self, change: LayoutChange) -> None:
        """Raise the LayoutError that says why ``change`` cannot be applied to this layout."""
        if change.base_epoch != self.epoch:
            raise StaleLayoutChange(change.base_epoch, self.epoch)
        expected = (
            self.plan_split(change.parent_ids[0])
            if change.kind is ChangeKind.SPLIT
            else self.plan_merge(*change.parent_ids)
        )
        if expected != change:
            raise StaleLayoutChange(change.base_epoch, self.epoch)

    def apply(self, change: LayoutChange, at: datetime) -> SegmentLayout:
        """Seal the change's parents and add its children, as one new epoch."""
        self.validate(change)
        epoch = self.epoch + 1
        segments = dict(self.segments)
        for parent_id in change.parent_ids:
            segments[parent_id] = segments[parent_id].sealed(change.child_ids, epoch, at)
        for child in change.children:
            segments[child.segment_id] = SegmentInfo(
                child.segment_id,
                child.hash_range,
                SegmentState.ACTIVE,
                created_at_epoch=epoch,
                created_at=at,
                parent_ids=change.parent_ids,
            )
        next_id = max(self.next_segment_id, max(change.child_ids) + 1)
        return SegmentLayout(epoch=epoch, next_segment_id=next_id, segments=segments)

    def split(self, segment_id: int, at: datetime) -> SegmentLayout:
        return self.apply(self.plan_split(segment_id), at)

    def merge(self, first_id: int, second_id: int, at: datetime) -> SegmentLayout:
        return self.apply(self.plan_merge(first_id, second_id), at)

    def prune(self, segment_id: int) -> SegmentLayout:
        """Drop a sealed segment of the oldest retained generation (its parents are gone)."""
        info = self.get(segment_id)
        if info.is_active:
            raise SegmentActive(segment_id)
        live_parents = [p for p in info.parent_ids if p in self.segments]
        if live_parents:
            raise SegmentHasLiveParents(segment_id, live_parents)
        segments = {k: v for k, v in self.segments.items() if k != segment_id}
        return SegmentLayout(
            epoch=self.epoch + 1, next_segment_id=self.next_segment_id, segments=segments
        )

    # -- the status form ----------------------------------------------------------------------

    def to_status(self) -> dict[str, Any]:
        return {
            "epoch": self.epoch,
            "nextSegmentId": self.next_segment_id,
            "segments": [s.to_status() for s in self.segments.values()],
        }

    @classmethod
    def from_status(cls, status: Mapping[str, Any]) -> SegmentLayout:
        """Read a layout back from a resource status; refuse data that breaks an invariant."""
        try:
            epoch = int(status["epoch"])
            next_id = int(status["nextSegmentId"])
            entries: Iterable[Any] = status["segments"]
        except (KeyError, TypeError, ValueError) as error:
            raise CorruptLayout(f"layout status is malformed: {error}") from error
        segments: dict[int, SegmentInfo] = {}
        for entry in entries:
            info = SegmentInfo.from_status(entry)
            if info.segment_id in segments:
                raise CorruptLayout(f"segment {info.segment_id} appears twice in the layout")
            segments[info.segment_id] = info
        layout = cls(epoch=epoch, next_segment_id=next_id, segments=segments)
        layout.check_invariants()
        return layout

    def check_invariants(self) -> None:
        """Raise :class:`CorruptLayout` unless the DAG is consistent and the active ranges
        partition the hash space exactly."""
        if self.epoch < 0:
            raise CorruptLayout(f"epoch {self.epoch} is negative")
        expected_start = HASH_MIN
        for info in self.active:
            if info.hash_range.start != expected_start:
                raise CorruptLayout(
                    f"active ranges do not partition the hash space: segment {info.segment_id} "
                    f"starts at {info.hash_range.start:04x}, expected {expected_start:04x}"
                )
            expected_start = info.hash_range.end + 1
        if expected_start != HASH_MAX + 1:
            raise CorruptLayout(
                f"active ranges end at {expected_start - 1:04x}, not {HASH_MAX:04x}"
            )
        for segment_id, info in self.segments.items():
            if segment_id >= self.next_segment_id:
                raise CorruptLayout(
                    f"segment {segment_id} is not below nextSegmentId {self.next_segment_id}"
                )
            if info.created_at_epoch > self.epoch:
                raise CorruptLayout(f"segment {segment_id} was created after epoch {self.epoch}")
            if info.is_active and (info.child_ids or info.sealed_at_epoch != 0):
                raise CorruptLayout(f"active segment {segment_id} has children or a seal epoch")
            if not info.is_active and not (
                info.child_ids and info.created_at_epoch < info.sealed_at_epoch <= self.epoch
            ):
                raise CorruptLayout(
                    f"sealed segment {segment_id} lacks children or a valid seal epoch"
                )
            for child_id in info.child_ids:
                child = self.segments.get(child_id)
                if child is None or segment_id not in child.parent_ids:
                    raise CorruptLayout(
                        f"segment {segment_id} names child {child_id}, which does not name it back"
                    )
            for parent_id in info.parent_ids:
                parent = self.segments.get(parent_id)
                if parent is not None and segment_id not in parent.child_ids:
                    raise CorruptLayout(
                        f"segment {segment_id} names parent {parent_id}, which does not name it back"
                    )

    # -- helpers --------------------------------------------------------------------------------

    def _active(self, segment_id: int, action: str) -> SegmentInfo:
        info = self.get(segment_id)
        if not info.is_active:
            raise SegmentSealed(segment_id, action)
        return info

    def _reach(self, segment_id: int, step: Any) -> frozenset[int]:
        start = self.get(segment_id)
        seen: set[int] = set()
        frontier = [p for p in step(start) if p in self.segments]
        while frontier:
            current = frontier.pop()
            if current not in seen:
                seen.add(current)
                frontier.extend(p for p in step(self.segments[current]) if p in self.segments)
        return frozenset(seen)
