from datetime import UTC, datetime

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from scalable_topics.model.errors import (
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
from scalable_topics.model.hash_range import HashRange
from scalable_topics.model.layout import LayoutChange, SegmentLayout
from scalable_topics.model.segment import parse_descriptor

T0 = datetime(2026, 1, 1, tzinfo=UTC)


@settings(max_examples=30, deadline=None)
@given(st.integers(1, 65536))
@example(65536)
def test_initial_layout_divides_the_space_into_near_equal_ranges(count: int) -> None:
    layout = SegmentLayout.initial(count, T0)
    sizes = [s.hash_range.size for s in layout.active]
    assert len(sizes) == count
    assert sum(sizes) == 65536
    assert max(sizes) - min(sizes) <= 1
    assert layout.epoch == 0 and layout.next_segment_id == count
    layout.check_invariants()


@pytest.mark.parametrize("count", [0, -3, 65537])
def test_initial_count_out_of_bounds_names_the_count(count: int) -> None:
    with pytest.raises(
        InvalidSegmentCount, match=f"between 1 and 65536 initial segments, not {count}"
    ):
        SegmentLayout.initial(count, T0)


def test_split_seals_parent_and_adds_two_children() -> None:
    layout = SegmentLayout.initial(2, T0).split(1, T0)
    assert layout.epoch == 1
    assert [(s.segment_id, str(s.hash_range)) for s in layout.active] == [
        (0, "0000-7fff"),
        (2, "8000-bfff"),
        (3, "c000-ffff"),
    ]
    parent = layout.get(1)
    assert not parent.is_active and parent.child_ids == (2, 3) and parent.sealed_at_epoch == 1
    assert layout.get(2).parent_ids == (1,) and layout.get(2).created_at_epoch == 1


def test_merge_of_adjacent_segments_orders_parents_by_range() -> None:
    layout = SegmentLayout.initial(3, T0).merge(2, 1, T0)
    merged = layout.get(3)
    assert merged.parent_ids == (1, 2)
    assert merged.hash_range == HashRange(0x5556, 0xFFFF)
    assert layout.merge_depth(3) == 1


def test_find_active_routes_every_boundary() -> None:
    layout = SegmentLayout.initial(4, T0).split(0, T0)
    for segment in layout.active:
        assert layout.find_active(segment.hash_range.start) == segment
        assert layout.find_active(segment.hash_range.end) == segment
    with pytest.raises(ValueError, match="outside"):
        layout.find_active(0x10000)


@pytest.mark.parametrize(
    ("action", "error", "message"),
    [
        (lambda layout: layout.split(99, T0), UnknownSegment, "segment 99 does not exist"),
        (lambda layout: layout.split(1, T0), SegmentSealed, "cannot split segment 1: it is sealed"),
        (
            lambda layout: layout.merge(0, 1, T0),
            SegmentSealed,
            "cannot merge segment 1: it is sealed",
        ),
        (
            lambda layout: layout.merge(0, 4, T0),
            SegmentsNotAdjacent,
            "segments 0 and 4: their hash ranges are not adjacent",
        ),
        (lambda layout: layout.merge(3, 3, T0), SameSegment, "segment 3 with itself"),
        (
            lambda layout: layout.prune(0),
            SegmentActive,
            "cannot prune segment 0: it is still active",
        ),
        (lambda layout: layout.prune(7), UnknownSegment, "segment 7 does not exist"),
    ],
)
def test_impossible_requests_name_their_cause_and_change_nothing(action, error, message) -> None:  # type: ignore[no-untyped-def]
    layout = SegmentLayout.initial(2, T0).split(1, T0).split(3, T0)  # active: 0, 2, 4, 5
    before = layout.to_status()
    with pytest.raises(error, match=message):
        action(layout)
    assert layout.to_status() == before


def test_a_one_hash_segment_cannot_split() -> None:
    layout = SegmentLayout.initial(1, T0)
    segment_id = 0
    while layout.get(segment_id).hash_range.size > 1:
        layout = layout.split(segment_id, T0)
        segment_id = layout.get(segment_id).child_ids[0]
    assert layout.get(segment_id).hash_range == HashRange(0, 0)
    with pytest.raises(RangeTooSmallToSplit, match="owns the single hash 0000"):
        layout.split(segment_id, T0)


def test_prune_goes_oldest_generation_first() -> None:
    layout = SegmentLayout.initial(1, T0).split(0, T0).split(1, T0)  # 0 -> (1, 2); 1 -> (3, 4)
    with pytest.raises(SegmentHasLiveParents, match=r"parents 0 are still in the layout"):
        layout.prune(1)
    pruned = layout.prune(0).prune(1)
    assert sorted(pruned.segments) == [2, 3, 4]
    assert pruned.epoch == layout.epoch + 2
    assert pruned.get(3).parent_ids == (1,)  # history is kept even though 1 is gone
    assert pruned.lineage(3) == (3,)
    pruned.check_invariants()


def test_merge_depth_counts_merges_along_the_deepest_retained_ancestry() -> None:
    layout = SegmentLayout.initial(4, T0)
    layout = layout.merge(0, 1, T0)  # 4 (depth 1)
    layout = layout.merge(2, 3, T0)  # 5 (depth 1)
    layout = layout.merge(4, 5, T0)  # 6 (depth 2)
    layout = layout.split(6, T0)  # 7, 8 inherit depth 2
    assert [layout.merge_depth(i) for i in (0, 4, 6, 7, 8)] == [0, 1, 2, 2, 2]
    layout = layout.merge(7, 8, T0)  # 9
    assert layout.merge_depth(9) == 3
    for segment_id in (0, 1, 2, 3, 4, 5):
        layout = layout.prune(segment_id)
    assert layout.merge_depth(9) == 2  # 6, 9: pruned merges no longer count


def test_a_planned_change_is_refused_once_the_layout_moved_on() -> None:
    layout = SegmentLayout.initial(2, T0)
    change = layout.plan_split(0)
    moved = layout.split(1, T0)
    with pytest.raises(StaleLayoutChange, match="planned against layout epoch 0"):
        moved.apply(change, T0)
    assert LayoutChange.from_dict(change.to_dict()) == change
    assert layout.apply(change, T0) == layout.split(0, T0)


def test_descriptors_round_trip() -> None:
    layout = SegmentLayout.initial(2, T0)
    assert [s.descriptor for s in layout.active] == ["0000-7fff-0", "8000-ffff-1"]
    assert parse_descriptor("8000-ffff-1") == (1, HashRange(0x8000, 0xFFFF))
    with pytest.raises(ValueError, match="not a segment descriptor"):
        parse_descriptor("8000-ffff-01")


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda s: s["segments"].pop(2), "do not partition"),
        (lambda s: s.update(nextSegmentId=1), "not below nextSegmentId"),
        (lambda s: s["segments"].append(dict(s["segments"][0])), "appears twice"),
        (lambda s: s["segments"][0].update(childIds=[]), "lacks children"),
        (
            lambda s: s["segments"][1].update(parentIds=[0]),
            "names parent 0, which does not name it back",
        ),
        (lambda s: s["segments"][0].pop("hashRange"), "malformed"),
        (lambda s: s.pop("epoch"), "malformed"),
    ],
)
def test_corrupt_status_is_refused(mutate, message) -> None:  # type: ignore[no-untyped-def]
    status = SegmentLayout.initial(2, T0).split(0, T0).to_status()  # 0 sealed -> 2, 3; 1 active
    mutate(status)
    with pytest.raises(CorruptLayout, match=message):
        SegmentLayout.from_status(status)
