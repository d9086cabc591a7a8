"""The Key_Shared consistent-hash ring (model/key_shared.py)."""

from itertools import pairwise

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scalable_topics.model.hash_range import HashRange
from scalable_topics.model.hashing import HASH_MAX, hash_key
from scalable_topics.model.key_shared import ConsistentHashRing

UNIQUE_NAMES = st.lists(
    st.tuples(st.integers(0, 50), st.sampled_from(["a", "b", "c", "orders-worker"])),
    max_size=4,
    unique_by=(lambda member: member[0], lambda member: member[1]),
)
MEMBERS = st.lists(
    st.tuples(st.integers(0, 50), st.sampled_from(["a", "b", "c", "orders-worker"])),
    max_size=8,
    unique_by=lambda member: member[0],
)


def ring_of(members: list[tuple[int, str]], points: int = 10) -> ConsistentHashRing:
    ring = ConsistentHashRing(points)
    for consumer_id, name in members:
        ring.add(consumer_id, name)
    return ring


def boundaries(*assignments: dict[int, tuple[HashRange, ...]]) -> set[int]:
    """Owners only change at range ends, so checking these hashes checks every hash."""
    return {
        h
        for owned in assignments
        for ranges in owned.values()
        for r in ranges
        for h in (r.start, r.end)
    }


def owner_in(assignment: dict[int, tuple[HashRange, ...]], key_hash: int) -> int | None:
    return next(
        (o for o, ranges in assignment.items() if any(r.contains(key_hash) for r in ranges)), None
    )


def test_an_empty_ring_selects_nobody() -> None:
    ring = ConsistentHashRing()
    assert ring.select(0) is None
    assert ring.assignments() == {}


def test_points_come_from_murmur3_of_name_index_and_point() -> None:
    ring = ring_of([(1, "a"), (2, "b")], points=1)
    point_a = hash_key("a\x000\x000")
    point_b = hash_key("b\x000\x000")
    low, high = sorted([(point_a, 1), (point_b, 2)])
    # A hash belongs to the first point at or after it, wrapping around to the lowest point.
    assert ring.select(low[0]) == low[1]
    assert ring.select(low[0] + 1) == high[1]
    assert ring.select(high[0]) == high[1]
    if high[0] < HASH_MAX:
        assert ring.select(high[0] + 1) == low[1]


@settings(max_examples=40, deadline=None)
@given(members=MEMBERS.filter(bool))
def test_assignments_cover_the_hash_space_once_and_agree_with_select(
    members: list[tuple[int, str]],
) -> None:
    ring = ring_of(members)
    ranges = sorted(r for owned in ring.assignments().values() for r in owned)
    assert ranges[0].start == 0 and ranges[-1].end == HASH_MAX
    assert all(a.end + 1 == b.start for a, b in pairwise(ranges))
    for owner, owned in ring.assignments().items():
        for r in owned:
            assert ring.select(r.start) == ring.select(r.end) == owner


@settings(max_examples=30, deadline=None)
@given(members=UNIQUE_NAMES, data=st.data())
def test_the_ring_depends_only_on_who_is_attached(
    members: list[tuple[int, str]], data: st.DataObject
) -> None:
    shuffled = data.draw(st.permutations(members))
    assert ring_of(members).assignments() == ring_of(shuffled).assignments()


@settings(max_examples=30, deadline=None)
@given(members=MEMBERS, joiner=st.sampled_from(["a", "z", "orders-worker"]))
def test_a_join_reports_exactly_the_hashes_others_lost(
    members: list[tuple[int, str]], joiner: str
) -> None:
    ring = ring_of(members)
    before = ring.assignments()
    lost = ring.add(99, joiner)
    after = ring.assignments()
    for h in boundaries(before, after, lost):
        old, new = owner_in(before, h), owner_in(after, h)
        assert owner_in(lost, h) == (old if old != new else None)
        assert new in (99, old)


@settings(max_examples=30, deadline=None)
@given(members=MEMBERS.filter(bool), data=st.data())
def test_a_leave_gives_only_the_leavers_hashes_away(
    members: list[tuple[int, str]], data: st.DataObject
) -> None:
    ring = ring_of(members)
    leaver = data.draw(st.sampled_from([consumer_id for consumer_id, _ in members]))
    before = ring.assignments()
    lost = ring.remove(leaver)
    after = ring.assignments()
    assert set(lost) <= {leaver}
    for h in boundaries(before, after):
        assert owner_in(before, h) in (leaver, owner_in(after, h))


def test_consumers_sharing_a_name_get_distinct_points_and_indexes_are_reused() -> None:
    ring = ring_of([(1, "worker"), (2, "worker")])
    owned = ring.assignments()
    assert owned[1] and owned[2]
    ring.remove(1)
    ring.add(3, "worker")  # takes name index 0 again: the ranges consumer 1 had
    assert ring.assignments()[3] == owned[1]


def test_misuse_is_refused() -> None:
    with pytest.raises(ValueError, match="at least one ring point"):
        ConsistentHashRing(0)
    ring = ring_of([(1, "a")])
    with pytest.raises(ValueError, match="already on the ring"):
        ring.add(1, "a")
    with pytest.raises(ValueError, match="not on the ring"):
        ring.remove(2)


def test_a_single_consumer_owns_everything() -> None:
    ring = ring_of([(7, "solo")])
    assert ring.assignments() == {7: (HashRange(0, HASH_MAX),)}
    assert ring.remove(7) == {7: (HashRange(0, HASH_MAX),)}
