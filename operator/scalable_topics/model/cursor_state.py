"""What one subscription has acknowledged on one segment.

A segment log numbers its records (entries) from 0, and a record may hold a producer batch of
several messages, so a message is a :class:`Position` ``(entry_id, batch_index)``. The state is
kept in the canonical form Pulsar's managed cursor uses:

- ``mark_delete``: every entry up to and including it is fully acknowledged (-1: none is);
- ``acked_ranges``: fully acknowledged entries beyond it, as sorted, disjoint, non-adjacent
  inclusive ranges that start at least two past ``mark_delete`` (an ack that makes a range touch
  its neighbour or ``mark_delete`` merges them at once);
- partially acknowledged entries: entry id -> (batch size, acknowledged batch indexes), for
  entries beyond ``mark_delete`` that are in no range.

Since the form is canonical, two states are equal exactly when they acknowledge the same
messages. Every method validates its input before changing anything, so a refused call leaves
the state as it was.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from .position import Position

FORMAT_VERSION = 1


class CorruptCursorState(ValueError):
    """A serialized cursor state that breaks an invariant or is not in the expected shape."""


@dataclass(frozen=True, slots=True)
class PartialAck:
    """The acknowledged messages of an entry whose batch is not fully acknowledged yet."""

    batch_size: int
    acked: frozenset[int]


@dataclass(slots=True)
class _Partial:
    # Mutable, so that acking the messages of a big batch one by one costs O(1) each.
    batch_size: int
    acked: set[int]


class CursorState:
    """The acknowledgement state of one subscription on one segment (see the module doc)."""

    __slots__ = ("_mark_delete", "_partial", "_range_ends", "_range_starts")
    __hash__ = None  # type: ignore[assignment]  # mutable

    def __init__(self, mark_delete: int = -1) -> None:
        if mark_delete < -1:
            raise ValueError(f"mark_delete is -1 or an entry id, not {mark_delete}")
        self._mark_delete = mark_delete
        # Two parallel sorted lists, so that bisect finds the range around an entry.
        self._range_starts: list[int] = []
        self._range_ends: list[int] = []
        self._partial: dict[int, _Partial] = {}

    @classmethod
    def earliest(cls) -> CursorState:
        """A subscription that starts at the first entry of the segment."""
        return cls(-1)

    @classmethod
    def starting_at(cls, entry_id: int) -> CursorState:
        """A subscription whose first delivered entry is ``entry_id`` (e.g. Latest: the next
        entry id of the log)."""
        state = cls()
        state.seek(entry_id)
        return state

    # -- reading ---------------------------------------------------------------------------------

    @property
    def mark_delete(self) -> int:
        return self._mark_delete

    @property
    def first_unacked_entry(self) -> int:
        """The lowest entry that is not fully acknowledged (it may be partly acknowledged)."""
        return self._mark_delete + 1

    @property
    def acked_ranges(self) -> list[tuple[int, int]]:
        """Fully acknowledged entries beyond ``mark_delete``, as inclusive ranges."""
        return list(zip(self._range_starts, self._range_ends, strict=True))

    @property
    def partial_acks(self) -> dict[int, PartialAck]:
        """Partly acknowledged entries beyond ``mark_delete``."""
        return {
            entry: PartialAck(partial.batch_size, frozenset(partial.acked))
            for entry, partial in sorted(self._partial.items())
        }

    def is_entry_acked(self, entry_id: int) -> bool:
        """Whether every message of the entry is acknowledged."""
        if entry_id <= self._mark_delete:
            return True
        index = bisect.bisect_right(self._range_starts, entry_id) - 1
        return index >= 0 and entry_id <= self._range_ends[index]

    @property
    def has_individual_acks(self) -> bool:
        """Whether anything past ``mark_delete`` is acknowledged: when not, every position
        after it is unacknowledged, and a reader need not ask about each one."""
        return bool(self._range_starts or self._partial)

    def is_acked(self, position: Position) -> bool:
        if self.is_entry_acked(position.entry_id):
            return True
        partial = self._partial.get(position.entry_id)
        return partial is not None and position.batch_index in partial.acked

    def acked_indexes(self, entry_id: int) -> frozenset[int]:
        """The acknowledged batch indexes of a partly acknowledged entry; empty for an entry
        with no acknowledged message. Ask :meth:`is_entry_acked` about whole entries first."""
        partial = self._partial.get(entry_id)
        return frozenset(partial.acked) if partial is not None else frozenset()

    def unacked_entries(self, last_entry_id: int) -> Iterator[int]:
        """The entries up to ``last_entry_id`` that are not fully acknowledged, in order."""
        entry = self._mark_delete + 1
        for start, end in zip(self._range_starts, self._range_ends, strict=True):
            if start > last_entry_id:
                break
            yield from range(entry, start)
            entry = end + 1
        yield from range(entry, last_entry_id + 1)

    def backlog_entries(self, last_entry_id: int) -> int:
        """How many entries up to ``last_entry_id`` are not fully acknowledged."""
        if last_entry_id <= self._mark_delete:
            return 0
        covered = 0
        for start, end in zip(self._range_starts, self._range_ends, strict=True):
            if start > last_entry_id:
                break
            covered += min(end, last_entry_id) - start + 1
        return last_entry_id - self._mark_delete - covered

    def backlog_messages(self, last_entry_id: int, messages_in: Callable[[int, int], int]) -> int:
        """How many messages up to ``last_entry_id`` are not acknowledged, where
        ``messages_in(first, last)`` says how many messages the entries ``first..last`` hold
        (a producer batch is one entry of several messages)."""
        first = self._mark_delete + 1
        if last_entry_id < first:
            return 0
        backlog = messages_in(first, last_entry_id)
        for start, end in zip(self._range_starts, self._range_ends, strict=True):
            if start > last_entry_id:
                break
            backlog -= messages_in(start, min(end, last_entry_id))
        for entry, partial in self._partial.items():
            if entry <= last_entry_id:
                backlog -= len(partial.acked)
        return backlog

    def is_drained(self, last_entry_id: int) -> bool:
        """Whether every entry up to ``last_entry_id`` (a sealed segment's last entry) is fully
        acknowledged. ``mark_delete + 1`` is never fully acknowledged, so this is one compare."""
        return self._mark_delete >= last_entry_id

    # -- acknowledging ---------------------------------------------------------------------------

    def ack(self, position: Position, batch_size: int) -> bool:
        """Acknowledge one message of an entry holding ``batch_size`` messages; True when it was
        not acknowledged before."""
        entry, index = position.entry_id, position.batch_index
        partial = self._checked_partial(position, batch_size)
        if self.is_entry_acked(entry):
            return False
        if partial is None:
            partial = self._partial[entry] = _Partial(batch_size, set())
        elif index in partial.acked:
            return False
        partial.acked.add(index)
        self._complete_if_full(entry, partial)
        return True

    def ack_cumulative(self, position: Position, batch_size: int) -> bool:
        """Acknowledge every message up to and including ``position``: all earlier entries and
        the indexes ``0..batch_index`` of its entry. True when anything was newly acknowledged."""
        entry, index = position.entry_id, position.batch_index
        partial = self._checked_partial(position, batch_size)
        changed = False
        if entry - 1 > self._mark_delete:
            # mark_delete + 1 is never fully acknowledged, so advancing past it is a change.
            self._advance_mark_delete(entry - 1)
            changed = True
        if self.is_entry_acked(entry):
            return changed
        if partial is None:
            partial = self._partial[entry] = _Partial(batch_size, set())
        before = len(partial.acked)
        partial.acked.update(range(index + 1))
        self._complete_if_full(entry, partial)
        return changed or len(partial.acked) > before

    def seek(self, entry_id: int) -> None:
        """Make ``entry_id`` the next entry to deliver: everything before it counts as
        acknowledged, nothing from it on does (a reset of the subscription, backwards or
        forwards)."""
        if entry_id < 0:
            raise ValueError(f"cannot seek to entry {entry_id}: entry ids start at 0")
        self._mark_delete = entry_id - 1
        self._range_starts.clear()
        self._range_ends.clear()
        self._partial.clear()

    def copy(self) -> CursorState:
        clone = CursorState(self._mark_delete)
        clone._range_starts = list(self._range_starts)
        clone._range_ends = list(self._range_ends)
        clone._partial = {e: _Partial(p.batch_size, set(p.acked)) for e, p in self._partial.items()}
        return clone

    def _checked_partial(self, position: Position, batch_size: int) -> _Partial | None:
        if batch_size < 1:
            raise ValueError(f"entry {position.entry_id} cannot hold {batch_size} messages")
        if position.batch_index >= batch_size:
            raise ValueError(
                f"position {position} is outside its entry's batch of {batch_size} messages"
            )
        partial = self._partial.get(position.entry_id)
        if partial is not None and partial.batch_size != batch_size:
            raise ValueError(
                f"entry {position.entry_id} holds {partial.batch_size} messages, "
                f"not {batch_size} as this acknowledgement says"
            )
        return partial

    def _complete_if_full(self, entry: int, partial: _Partial) -> None:
        if len(partial.acked) == partial.batch_size:
            del self._partial[entry]
            self._add_acked_entry(entry)

    def _add_acked_entry(self, entry: int) -> None:
        """Record a newly fully acknowledged entry, merging ranges and mark_delete eagerly."""
        starts, ends = self._range_starts, self._range_ends
        at = bisect.bisect_left(starts, entry)
        joins_left = at > 0 and ends[at - 1] == entry - 1
        joins_right = at < len(starts) and starts[at] == entry + 1
        if joins_left and joins_right:
            ends[at - 1] = ends[at]
            del starts[at], ends[at]
        elif joins_left:
            ends[at - 1] = entry
        elif joins_right:
            starts[at] = entry
        else:
            starts.insert(at, entry)
            ends.insert(at, entry)
        if starts[0] == self._mark_delete + 1:
            self._mark_delete = ends[0]
            del starts[0], ends[0]

    def _advance_mark_delete(self, entry: int) -> None:
        """Acknowledge every entry up to ``entry`` (which is beyond mark_delete)."""
        starts, ends = self._range_starts, self._range_ends
        # Ranges that start at or before entry + 1 are covered or now contiguous.
        absorbed = bisect.bisect_right(starts, entry + 1)
        if absorbed:
            entry = max(entry, ends[absorbed - 1])
            del starts[:absorbed], ends[:absorbed]
        self._mark_delete = entry
        for stale in [e for e in self._partial if e <= entry]:
            del self._partial[stale]

    # -- comparing and serializing ---------------------------------------------------------------

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, CursorState):
            return NotImplemented
        return (
            self._mark_delete == other._mark_delete
            and self._range_starts == other._range_starts
            and self._range_ends == other._range_ends
            and self._partial == other._partial
        )

    def __repr__(self) -> str:
        partial = {e: (p.batch_size, sorted(p.acked)) for e, p in sorted(self._partial.items())}
        return (
            f"CursorState(mark_delete={self._mark_delete}, "
            f"acked_ranges={self.acked_ranges}, partial={partial})"
        )

    def to_dict(self) -> dict[str, Any]:
        """A compact form of plain JSON and msgpack types. Batch indexes are stored as ranges
        too, so a big batch that is almost fully acknowledged stays small."""
        return {
            "version": FORMAT_VERSION,
            "markDelete": self._mark_delete,
            "ackedRanges": [list(r) for r in self.acked_ranges],
            "partial": [
                [entry, partial.batch_size, [list(r) for r in _as_ranges(partial.acked)]]
                for entry, partial in sorted(self._partial.items())
            ],
        }

    @classmethod
    def from_dict(cls, data: Any) -> CursorState:
        """The inverse of :meth:`to_dict`; raises :class:`CorruptCursorState` on anything that
        :meth:`to_dict` could not have produced."""
        if not isinstance(data, dict):
            raise CorruptCursorState(f"a cursor state is a mapping, not {type(data).__name__}")
        if set(data) != {"version", "markDelete", "ackedRanges", "partial"}:
            raise CorruptCursorState(f"a cursor state has unexpected keys {sorted(data)}")
        if data["version"] != FORMAT_VERSION:
            raise CorruptCursorState(f"unknown cursor state version {data['version']!r}")
        mark_delete = _integer(data["markDelete"], "markDelete")
        if mark_delete < -1:
            raise CorruptCursorState(f"markDelete {mark_delete} is below -1")
        state = cls(mark_delete)
        ranges = _ranges(data["ackedRanges"], "ackedRanges", floor=mark_delete + 2)
        state._range_starts = [start for start, _ in ranges]
        state._range_ends = [end for _, end in ranges]
        partials = data["partial"]
        if not isinstance(partials, list):
            raise CorruptCursorState("partial is not a list")
        previous = mark_delete
        for item in partials:
            entry, partial = _partial(item)
            if entry <= previous:
                raise CorruptCursorState(
                    f"partial entry {entry} is not above mark_delete and earlier partial entries"
                )
            if state.is_entry_acked(entry):
                raise CorruptCursorState(f"partial entry {entry} is inside a fully acked range")
            state._partial[entry] = _Partial(partial.batch_size, set(partial.acked))
            previous = entry
        return state


def _as_ranges(indexes: Iterable[int]) -> list[tuple[int, int]]:
    ranges: list[tuple[int, int]] = []
    for index in sorted(indexes):
        if ranges and ranges[-1][1] == index - 1:
            ranges[-1] = (ranges[-1][0], index)
        else:
            ranges.append((index, index))
    return ranges


def _integer(value: Any, name: str) -> int:
    if not isinstance(value, int) or isinstance(value, bool):
        raise CorruptCursorState(f"{name} is not an integer: {value!r}")
    return value


def _ranges(value: Any, name: str, *, floor: int, ceiling: int | None = None) -> list[list[int]]:
    """Sorted, disjoint, non-adjacent inclusive ranges within [floor, ceiling]."""
    if not isinstance(value, list):
        raise CorruptCursorState(f"{name} is not a list")
    ranges: list[list[int]] = []
    lowest = floor
    for item in value:
        if not isinstance(item, list) or len(item) != 2:
            raise CorruptCursorState(f"{name} holds {item!r}, not a [start, end] pair")
        start, end = _integer(item[0], name), _integer(item[1], name)
        if start < lowest or end < start or (ceiling is not None and end > ceiling):
            raise CorruptCursorState(
                f"{name} range [{start}, {end}] is out of order, overlapping, adjacent to its "
                f"neighbour or out of bounds"
            )
        ranges.append([start, end])
        lowest = end + 2
    return ranges


def _partial(item: Any) -> tuple[int, PartialAck]:
    if not isinstance(item, list) or len(item) != 3:
        raise CorruptCursorState(f"partial holds {item!r}, not [entry, batch size, ranges]")
    entry = _integer(item[0], "partial entry")
    batch_size = _integer(item[1], "partial batch size")
    if batch_size < 2:
        raise CorruptCursorState(f"partial entry {entry} has batch size {batch_size}, below 2")
    ranges = _ranges(item[2], f"partial entry {entry} indexes", floor=0, ceiling=batch_size - 1)
    acked = frozenset(i for start, end in ranges for i in range(start, end + 1))
    if not acked or len(acked) == batch_size:
        raise CorruptCursorState(
            f"partial entry {entry} acknowledges {len(acked)} of {batch_size} messages: "
            "a partial entry has some but not all"
        )
    return entry, PartialAck(batch_size, acked)
