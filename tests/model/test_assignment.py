from datetime import UTC, datetime

from hypothesis import given
from hypothesis import strategies as st

from scalable_topics.model.assignment import Assignment, assign, segments_to_read
from scalable_topics.model.layout import SegmentLayout

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def test_round_robin_by_range_start_and_consumer_name() -> None:
    layout = SegmentLayout.initial(4, T0)
    assignment = assign(layout, ["zed", "amy"], drained=[], term=3)
    assert dict(assignment.segments_by_consumer) == {"amy": (0, 2), "zed": (1, 3)}
    assert (assignment.layout_epoch, assignment.term) == (0, 3)


def test_sealed_segments_with_backlog_stay_assigned_until_drained() -> None:
    layout = SegmentLayout.initial(2, T0).split(0, T0)  # 0 sealed -> 2, 3
    assert segments_to_read(layout, drained=[]) == [0, 2, 3, 1]  # bug #25642: 0 still has data
    assert segments_to_read(layout, drained=[0]) == [2, 3, 1]
    assignment = assign(layout, ["a", "b"], drained=[], term=1)
    assert dict(assignment.segments_by_consumer) == {"a": (0, 3), "b": (2, 1)}


def test_no_consumers_no_assignment() -> None:
    assert dict(assign(SegmentLayout.initial(3, T0), [], [], 1).segments_by_consumer) == {}


def test_newer_term_or_epoch_supersedes_and_changes_are_listed() -> None:
    old = Assignment(5, 2, {"a": (1,), "b": (2,)})
    new = Assignment(4, 3, {"a": (1,), "b": (3,), "c": (4,)})
    assert new.supersedes(old)
    assert not old.supersedes(new)
    assert not old.supersedes(old)
    assert new.changed_for(old) == ["b", "c"]


@given(st.integers(1, 40), st.lists(st.text(min_size=1, max_size=5), max_size=8), st.data())
def test_every_segment_to_read_goes_to_exactly_one_consumer(
    count: int, names: list[str], data: st.DataObject
) -> None:
    layout = SegmentLayout.initial(count, T0)
    for _ in range(data.draw(st.integers(0, 5))):
        active = [s.segment_id for s in layout.active if s.hash_range.can_split()]
        layout = layout.split(data.draw(st.sampled_from(active)), T0)
    sealed = [s.segment_id for s in layout.sealed]
    drained = data.draw(st.lists(st.sampled_from(sealed), unique=True)) if sealed else []
    assignment = assign(layout, names, drained, term=7)
    dealt = [s for ids in assignment.segments_by_consumer.values() for s in ids]
    if names:
        assert sorted(dealt) == sorted(segments_to_read(layout, drained))
        sizes = [len(ids) for ids in assignment.segments_by_consumer.values()]
        assert max(sizes) - min(sizes) <= 1
    else:
        assert dealt == []
    assert assign(layout, list(reversed(names)), drained, term=7) == assignment  # order-independent


def test_a_drained_segment_moves_nothing_else() -> None:
    layout = SegmentLayout.initial(2, T0).split(0, T0).split(1, T0)  # 0, 1 sealed -> 2..5
    before = assign(layout, ["a", "b"], drained=[], term=1)
    after = assign(layout, ["a", "b"], [0], 1, before.segments_by_consumer)
    for name in ("a", "b"):
        assert set(after.of(name)) <= set(before.of(name)) | {0}
    # The plain deal would have shifted every segment after 0 to the other consumer.
    plain = assign(layout, ["a", "b"], [0], 1)
    assert sum(set(plain.of(n)) != set(before.of(n)) - {0} for n in ("a", "b")) == 2


def test_a_new_consumer_takes_only_its_share() -> None:
    layout = SegmentLayout.initial(6, T0)
    before = assign(layout, ["a", "b"], [], 1)
    after = assign(layout, ["a", "b", "c"], [], 1, before.segments_by_consumer)
    assert len(after.of("c")) == 2
    moved = sum(len(set(before.of(n)) - set(after.of(n))) for n in ("a", "b"))
    assert moved == 2


@given(st.integers(1, 30), st.lists(st.sampled_from("abcdef"), max_size=6), st.data())
def test_every_consumer_keeps_what_its_share_allows(
    count: int, names: list[str], data: st.DataObject
) -> None:
    layout = SegmentLayout.initial(count, T0)
    readable = segments_to_read(layout, [])
    previous: dict[str, list[int]] = {}
    for segment_id in readable:  # any earlier deal, even a lopsided or partial one
        owner = data.draw(st.sampled_from([*"abcdefgh", None]))
        if owner is not None:
            previous.setdefault(owner, []).append(segment_id)
    assignment = assign(layout, names, [], 3, previous)
    dealt = [s for ids in assignment.segments_by_consumer.values() for s in ids]
    if not names:
        assert dealt == []
        return
    assert sorted(dealt) == sorted(readable)
    sizes = sorted(len(ids) for ids in assignment.segments_by_consumer.values())
    assert sizes[-1] - sizes[0] <= 1
    # Nobody gives up a segment unless it held more than the larger share.
    larger = -(-len(readable) // len(set(names)))
    for name in set(names):
        kept = set(previous.get(name, ())) & set(assignment.of(name))
        assert len(kept) == min(len(previous.get(name, ())), len(assignment.of(name)), larger)
