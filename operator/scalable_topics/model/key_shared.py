"""Key_Shared (AUTO_SPLIT) pieces that hold no I/O: the consistent-hash ring that maps a key
hash to a consumer, and the draining-hashes tracker of PIP-379 (seed: key-shared-draining-hashes).

Consumers are plain ``int`` ids here; the broker's dispatcher owns the consumer objects.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

from .hash_range import HashRange
from .hashing import HASH_MAX, HASH_MIN, hash_key

# Pulsar's keySharedConsistentHashingReplicaPoints default.
DEFAULT_POINTS_PER_CONSUMER: Final = 100
# Pulsar joins name, name index and point index with a NUL to build each point's key.
_KEY_SEPARATOR: Final = "\0"

LostRanges = dict[int, tuple[HashRange, ...]]
"""For each consumer that lost hashes in an assignment change, the ranges it lost (sorted)."""

# (start, end, owner) pieces covering the whole hash space, adjacent pieces of one owner merged.
_Pieces = list[tuple[int, int, int]]


class DrainingHashConflict(RuntimeError):
    """A hash would be pending at two consumers at once: the Key_Shared invariant is broken."""


class ConsistentHashRing:
    """AUTO_SPLIT assignment of the 16-bit hash space, as Pulsar's
    ConsistentHashingStickyKeyConsumerSelector with its range reduced to 16 bits (PIP-379).

    Each consumer puts ``points_per_consumer`` points on the ring at
    ``hash_key(name NUL name_index NUL i)``; a hash belongs to the owner of the first point at or
    after it, wrapping to the first point. ``name_index`` tells apart connected consumers that
    share a name: each gets the smallest index no other connected consumer of that name holds.

    When points of two consumers collide, the claim with the smallest ``(name, name_index,
    consumer_id)`` owns the point. Pulsar lets the latest joiner win, which makes the ring
    depend on join history; here it depends only on the connected ``(name, name_index)`` pairs,
    so join order matters only in which of two same-named consumers gets which index.
    """

    def __init__(self, points_per_consumer: int = DEFAULT_POINTS_PER_CONSUMER) -> None:
        if points_per_consumer < 1:
            raise ValueError(f"a consumer needs at least one ring point, not {points_per_consumer}")
        self._points_per_consumer = points_per_consumer
        self._members: dict[int, tuple[str, int]] = {}
        self._claims: dict[int, list[tuple[str, int, int]]] = {}
        self._points: tuple[int, ...] = ()
        self._owners: tuple[int, ...] = ()
        self._pieces: _Pieces = []

    def __len__(self) -> int:
        return len(self._members)

    def __contains__(self, consumer_id: object) -> bool:
        return consumer_id in self._members

    def add(self, consumer_id: int, name: str) -> LostRanges:
        """Put the consumer on the ring; return the ranges other consumers lost to it."""
        if consumer_id in self._members:
            raise ValueError(f"consumer {consumer_id} is already on the ring")
        taken = {index for member, index in self._members.values() if member == name}
        name_index = next(i for i in range(len(taken) + 1) if i not in taken)
        self._members[consumer_id] = (name, name_index)
        claim = (name, name_index, consumer_id)
        for point in self._point_hashes(name, name_index):
            self._claims.setdefault(point, []).append(claim)
        return self._rebuild()

    def remove(self, consumer_id: int) -> LostRanges:
        """Take the consumer off the ring; return the ranges that changed owner, by old owner
        (the removed consumer, and anyone who lost a point it gave back)."""
        if consumer_id not in self._members:
            raise ValueError(f"consumer {consumer_id} is not on the ring")
        name, name_index = self._members.pop(consumer_id)
        claim = (name, name_index, consumer_id)
        for point in self._point_hashes(name, name_index):
            claims = self._claims[point]
            claims.remove(claim)
            if not claims:
                del self._claims[point]
        return self._rebuild()

    def select(self, key_hash: int) -> int | None:
        """The consumer that owns ``key_hash``, or None when the ring is empty."""
        if not self._points:
            return None
        return self._owners[bisect_left(self._points, key_hash)]

    def lookup_table(self) -> tuple[tuple[int, ...], tuple[int, ...]]:
        """``(points, owners)`` for callers that inline :meth:`select` on a hot path:
        ``owners[bisect_left(points, key_hash)]``. ``owners`` has one entry more than
        ``points``: the wrap-around to the first point's owner."""
        return self._points, self._owners

    def assignments(self) -> dict[int, tuple[HashRange, ...]]:
        """Each consumer's ranges, sorted; together they cover the hash space exactly once."""
        ranges: dict[int, list[HashRange]] = {consumer_id: [] for consumer_id in self._members}
        for start, end, owner in self._pieces:
            ranges[owner].append(HashRange(start, end))
        return {consumer_id: tuple(owned) for consumer_id, owned in ranges.items()}

    def _point_hashes(self, name: str, name_index: int) -> set[int]:
        prefix = f"{name}{_KEY_SEPARATOR}{name_index}{_KEY_SEPARATOR}"
        return {hash_key(f"{prefix}{i}") for i in range(self._points_per_consumer)}

    def _rebuild(self) -> LostRanges:
        before = self._pieces
        points = sorted(self._claims)
        owners = [min(self._claims[point])[2] for point in points]
        self._points = tuple(points)
        self._owners = (*owners, owners[0]) if owners else ()
        self._pieces = _pieces_of(points, owners)
        return _lost_ranges(before, self._pieces)


def _pieces_of(points: list[int], owners: list[int]) -> _Pieces:
    if not points:
        return []
    pieces: _Pieces = []
    start = HASH_MIN
    for point, owner in zip(points, owners, strict=True):
        _append_piece(pieces, start, point, owner)
        start = point + 1
    if start <= HASH_MAX:
        _append_piece(pieces, start, HASH_MAX, owners[0])
    return pieces


def _append_piece(pieces: _Pieces, start: int, end: int, owner: int) -> None:
    if pieces and pieces[-1][2] == owner and pieces[-1][1] + 1 == start:
        pieces[-1] = (pieces[-1][0], end, owner)
    else:
        pieces.append((start, end, owner))


def _lost_ranges(before: _Pieces, after: _Pieces) -> LostRanges:
    """Sweep both assignments together; every stretch whose owner changed is lost by its old
    owner (Pulsar's ConsumerHashAssignmentsSnapshot.resolveImpactedConsumers)."""
    lost: dict[int, _Pieces] = {}
    if not after:
        for start, end, owner in before:
            _append_piece(lost.setdefault(owner, []), start, end, owner)
        return _as_ranges(lost)
    i = j = 0
    low = HASH_MIN
    while i < len(before) and j < len(after):
        _, before_end, before_owner = before[i]
        _, after_end, after_owner = after[j]
        high = min(before_end, after_end)
        if before_owner != after_owner:
            _append_piece(lost.setdefault(before_owner, []), low, high, before_owner)
        low = high + 1
        i += before_end == high
        j += after_end == high
    return _as_ranges(lost)


def _as_ranges(pieces_by_owner: dict[int, _Pieces]) -> LostRanges:
    return {
        owner: tuple(HashRange(start, end) for start, end, _ in pieces)
        for owner, pieces in pieces_by_owner.items()
    }


@dataclass(slots=True)
class DrainingHashEntry:
    """The seed's DrainingHashEntry: which consumer still holds the hash, how many of its
    pending messages carry it, and how often delivery to another consumer was refused."""

    consumer_id: int
    ref_count: int = 0
    blocked_attempts: int = 0

    @property
    def is_blocking(self) -> bool:
        return self.blocked_attempts > 0


@dataclass(frozen=True, slots=True)
class DrainingHashStats:
    key_hash: int
    pending_messages: int
    blocked_attempts: int


class DrainingHashesTracker:
    """Hashes whose pending messages sit at a consumer that no longer owns them (PIP-379).

    While a hash drains, messages with it go to no other consumer. The entry's reference count
    follows the draining consumer's pending messages with that hash; at zero the hash leaves
    the tracker. Empty most of the time, so callers test ``if tracker:`` before each lookup.
    """

    def __init__(self) -> None:
        self._entries: dict[int, DrainingHashEntry] = {}
        self._pending_messages = 0
        self._cleared_total = 0

    def __len__(self) -> int:
        return len(self._entries)

    def __bool__(self) -> bool:
        return bool(self._entries)

    def __contains__(self, key_hash: object) -> bool:
        return key_hash in self._entries

    def get(self, key_hash: int) -> DrainingHashEntry | None:
        return self._entries.get(key_hash)

    @property
    def pending_messages(self) -> int:
        """Pending messages over all draining hashes (stat ``draining_hashes_pending_messages``)."""
        return self._pending_messages

    @property
    def cleared_total(self) -> int:
        """Hashes that drained to zero so far (stat ``draining_hashes_cleared_total``)."""
        return self._cleared_total

    def add_entry(self, consumer_id: int, key_hash: int, count: int = 1) -> None:
        """Count ``count`` more pending messages of ``consumer_id`` with ``key_hash``."""
        if count < 1:
            raise ValueError(f"a draining hash counts at least one pending message, not {count}")
        entry = self._entries.get(key_hash)
        if entry is None:
            entry = self._entries[key_hash] = DrainingHashEntry(consumer_id)
        elif entry.consumer_id != consumer_id:
            raise DrainingHashConflict(
                f"hash {key_hash:04x} is already draining for consumer {entry.consumer_id}, "
                f"it cannot drain for consumer {consumer_id} too"
            )
        entry.ref_count += count
        self._pending_messages += count

    def should_block(self, consumer_id: int, key_hash: int) -> bool:
        """Whether a message with ``key_hash`` must not go to ``consumer_id`` now.

        A hash that was reassigned back to its draining consumer stops draining here, lazily,
        rather than by scanning the tracker on every assignment change.
        """
        entry = self._entries.get(key_hash)
        if entry is None:
            return False
        if entry.consumer_id == consumer_id:
            del self._entries[key_hash]
            self._pending_messages -= entry.ref_count
            return False
        entry.blocked_attempts += 1
        return True

    def reduce_ref_count(
        self, consumer_id: int, key_hash: int, count: int = 1, *, closing: bool = False
    ) -> bool:
        """``count`` pending messages of ``consumer_id`` with ``key_hash`` were acknowledged,
        nacked or returned by a closing consumer. True when this drained a hash on which
        delivery was refused: the caller should dispatch again (batched). A closing consumer
        triggers a dispatch anyway, so closing never reports."""
        entry = self._entries.get(key_hash)
        if entry is None:
            return False
        if entry.consumer_id != consumer_id:
            raise DrainingHashConflict(
                f"consumer {consumer_id} released a message with hash {key_hash:04x}, "
                f"which is draining for consumer {entry.consumer_id}"
            )
        if count > entry.ref_count:
            raise ValueError(
                f"hash {key_hash:04x} has {entry.ref_count} pending messages, cannot release {count}"
            )
        entry.ref_count -= count
        self._pending_messages -= count
        if entry.ref_count:
            return False
        del self._entries[key_hash]
        self._cleared_total += 1
        return entry.is_blocking and not closing

    def consumer_stats(self) -> Mapping[int, tuple[DrainingHashStats, ...]]:
        """Per draining consumer, its draining hashes (stat ``draining_hashes``), by hash."""
        grouped: dict[int, list[DrainingHashStats]] = {}
        for key_hash, entry in sorted(self._entries.items()):
            grouped.setdefault(entry.consumer_id, []).append(
                DrainingHashStats(key_hash, entry.ref_count, entry.blocked_attempts)
            )
        return {consumer_id: tuple(hashes) for consumer_id, hashes in grouped.items()}
