"""CursorState: examples, refused input, and random acks and seeks against a set of positions."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from scalable_topics.model.cursor_state import CorruptCursorState, CursorState, PartialAck
from scalable_topics.model.position import Position


def test_individual_acks_merge_into_ranges_and_advance_mark_delete() -> None:
    state = CursorState.earliest()
    assert state.ack(Position(2), 1)
    assert state.ack(Position(4), 1)
    assert state.acked_ranges == [(2, 2), (4, 4)]
    assert state.ack(Position(3), 1)
    assert state.acked_ranges == [(2, 4)]
    assert state.mark_delete == -1
    assert state.ack(Position(1), 1)
    assert state.ack(Position(0), 1)
    assert (state.mark_delete, state.acked_ranges) == (4, [])
    assert not state.ack(Position(3), 1)


def test_a_batch_is_acked_when_its_last_message_is() -> None:
    state = CursorState.earliest()
    assert state.ack(Position(0, 2), 3)
    assert state.ack(Position(0, 0), 3)
    assert state.partial_acks == {0: PartialAck(3, frozenset({0, 2}))}
    assert state.acked_indexes(0) == {0, 2}
    assert not state.is_entry_acked(0)
    assert not state.ack(Position(0, 0), 3)
    assert state.ack(Position(0, 1), 3)
    assert state.mark_delete == 0
    assert state.partial_acks == {}


def test_cumulative_ack_inside_a_batch_acks_the_earlier_indexes() -> None:
    state = CursorState.earliest()
    state.ack(Position(7), 1)
    assert state.ack_cumulative(Position(5, 1), 4)
    assert state.mark_delete == 4
    assert [state.is_acked(Position(5, i)) for i in range(4)] == [True, True, False, False]
    assert not state.ack_cumulative(Position(5, 0), 4)
    assert state.ack_cumulative(Position(5, 3), 4)
    assert (state.mark_delete, state.acked_ranges) == (5, [(7, 7)])
    assert state.ack(Position(6), 1)
    assert (state.mark_delete, state.acked_ranges) == (7, [])


def test_cumulative_ack_absorbs_ranges_it_reaches() -> None:
    state = CursorState.earliest()
    for entry in (3, 4, 6, 9):
        state.ack(Position(entry), 1)
    state.ack_cumulative(Position(2), 1)
    assert (state.mark_delete, state.acked_ranges) == (4, [(6, 6), (9, 9)])
    state.ack_cumulative(Position(5, 0), 2)
    assert (state.mark_delete, state.acked_ranges) == (4, [(6, 6), (9, 9)])
    assert state.acked_indexes(5) == {0}
    # The acked entry itself starts a range: mark_delete runs through it.
    assert state.ack_cumulative(Position(9, 0), 2)
    assert (state.mark_delete, state.acked_ranges, state.partial_acks) == (9, [], {})


def test_seek_resets_everything_beyond() -> None:
    state = CursorState.earliest()
    for entry in (0, 1, 5):
        state.ack(Position(entry), 1)
    state.ack(Position(7, 1), 3)
    state.seek(3)
    assert (state.mark_delete, state.acked_ranges, state.partial_acks) == (2, [], {})
    state.seek(0)
    assert state == CursorState.earliest()
    assert CursorState.starting_at(10).first_unacked_entry == 10


def test_backlog_unacked_entries_and_drained() -> None:
    state = CursorState.earliest()
    for entry in (0, 2, 3, 6):
        state.ack(Position(entry), 1)
    state.ack(Position(4, 0), 2)
    assert list(state.unacked_entries(7)) == [1, 4, 5, 7]
    assert state.backlog_entries(7) == 4
    assert state.backlog_entries(3) == 1
    assert not state.is_drained(3)
    state.ack(Position(1), 1)
    assert state.is_drained(3)
    assert not state.is_drained(4)
    assert CursorState.earliest().is_drained(-1)


@pytest.mark.parametrize(
    ("position", "batch_size", "message"),
    [
        (Position(0, 3), 3, "position 0:3 is outside its entry's batch of 3"),
        (Position(0, 0), 0, "entry 0 cannot hold 0 messages"),
        (Position(1, 0), 5, "entry 1 holds 2 messages, not 5"),
    ],
)
def test_refused_acks_leave_the_state_unchanged(
    position: Position, batch_size: int, message: str
) -> None:
    state = CursorState.earliest()
    state.ack(Position(1, 1), 2)
    before = state.copy()
    with pytest.raises(ValueError, match=message):
        state.ack(position, batch_size)
    with pytest.raises(ValueError, match=message):
        state.ack_cumulative(position, batch_size)
    assert state == before


def test_seek_before_zero_is_refused() -> None:
    with pytest.raises(ValueError, match="entry ids start at 0"):
        CursorState().seek(-1)


def valid_dict() -> dict[str, Any]:
    return {
        "version": 1,
        "markDelete": 2,
        "ackedRanges": [[5, 6], [9, 9]],
        "partial": [[4, 3, [[0, 1]]], [8, 10, [[0, 0], [2, 9]]]],
    }


def test_dict_form_is_compact_and_round_trips() -> None:
    state = CursorState.from_dict(valid_dict())
    assert state.mark_delete == 2
    assert state.acked_ranges == [(5, 6), (9, 9)]
    assert state.acked_indexes(8) == {0, *range(2, 10)}
    assert state.to_dict() == valid_dict()
    assert CursorState.from_dict(json.loads(json.dumps(state.to_dict()))) == state


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda d: d.update(markDelete=-2), "below -1"),
        (lambda d: d.update(markDelete=True), "not an integer"),
        (lambda d: d.update(version=2), "version"),
        (lambda d: d.pop("partial"), "unexpected keys"),
        (lambda d: d.update(ackedRanges=[[3, 4]]), "adjacent"),  # touches mark_delete
        (lambda d: d.update(ackedRanges=[[5, 6], [7, 9]]), "adjacent"),
        (lambda d: d.update(ackedRanges=[[9, 9], [5, 6]]), "out of order"),
        (lambda d: d.update(ackedRanges=[[6, 5]]), "out of order"),
        (lambda d: d.update(ackedRanges=[[5]]), "pair"),
        (lambda d: d.update(ackedRanges={}), "not a list"),
        (lambda d: d.update(partial=[[4, 3, [[0, 2]]]]), "some but not all"),
        (lambda d: d.update(partial=[[4, 3, [[0, 3]]]]), "out of bounds"),
        (lambda d: d.update(partial=[[4, 1, [[0, 0]]]]), "below 2"),
        (lambda d: d.update(partial=[[2, 3, [[0, 0]]]]), "not above mark_delete"),
        (lambda d: d.update(partial=[[5, 3, [[0, 0]]]]), "inside a fully acked range"),
        (lambda d: d.update(partial=[[8, 3, [[0, 0]]], [4, 3, [[0, 0]]]]), "earlier partial"),
        (lambda d: d.update(partial=[[4, 3]]), "not \\[entry"),
    ],
)
def test_corrupt_dicts_are_refused_by_name(change: Any, message: str) -> None:
    data = valid_dict()
    change(data)
    with pytest.raises(CorruptCursorState, match=message):
        CursorState.from_dict(data)


def test_non_mapping_is_refused() -> None:
    with pytest.raises(CorruptCursorState, match="mapping"):
        CursorState.from_dict([1, 2])


ENTRIES = 12


class CursorMachine(RuleBasedStateMachine):
    """The state must acknowledge exactly the reference set, in canonical form."""

    state: CursorState
    batch_sizes: list[int]
    acked: set[Position]

    @initialize(sizes=st.lists(st.integers(1, 4), min_size=ENTRIES, max_size=ENTRIES))
    def start(self, sizes: list[int]) -> None:
        self.state = CursorState.earliest()
        self.batch_sizes = sizes
        self.acked = set()

    def positions(self, entry: int) -> set[Position]:
        return {Position(entry, i) for i in range(self.batch_sizes[entry])}

    def fully_acked(self, entry: int) -> bool:
        return self.positions(entry) <= self.acked

    @rule(entry=st.integers(0, ENTRIES - 1), data=st.data())
    def ack(self, entry: int, data: st.DataObject) -> None:
        position = Position(entry, data.draw(st.integers(0, self.batch_sizes[entry] - 1)))
        expected = position not in self.acked
        assert self.state.ack(position, self.batch_sizes[entry]) == expected
        self.acked.add(position)

    @rule(entry=st.integers(0, ENTRIES - 1), data=st.data())
    def ack_cumulative(self, entry: int, data: st.DataObject) -> None:
        position = Position(entry, data.draw(st.integers(0, self.batch_sizes[entry] - 1)))
        covered = {p for e in range(entry) for p in self.positions(e)}
        covered |= {Position(entry, i) for i in range(position.batch_index + 1)}
        expected = not covered <= self.acked
        assert self.state.ack_cumulative(position, self.batch_sizes[entry]) == expected
        self.acked |= covered

    @rule(entry=st.integers(0, ENTRIES - 1))
    def seek(self, entry: int) -> None:
        self.state.seek(entry)
        self.acked = {p for e in range(entry) for p in self.positions(e)}

    @precondition(lambda self: any(size > 1 for size in self.batch_sizes))
    @rule(data=st.data())
    def wrong_batch_size_is_refused(self, data: st.DataObject) -> None:
        partial = list(self.state.partial_acks)
        if not partial:
            return
        entry = data.draw(st.sampled_from(partial))
        before = self.state.copy()
        with pytest.raises(ValueError, match=f"entry {entry} holds"):
            self.state.ack(Position(entry, 0), self.batch_sizes[entry] + 1)
        assert self.state == before

    @invariant()
    def agrees_with_reference(self) -> None:
        for entry in range(ENTRIES):
            for position in self.positions(entry):
                assert self.state.is_acked(position) == (position in self.acked), position
            assert self.state.is_entry_acked(entry) == self.fully_acked(entry)
        unacked = [e for e in range(ENTRIES) if not self.fully_acked(e)]
        first_unacked = unacked[0] if unacked else ENTRIES
        assert self.state.mark_delete == first_unacked - 1
        assert list(self.state.unacked_entries(ENTRIES - 1)) == unacked
        assert self.state.backlog_entries(ENTRIES - 1) == len(unacked)

        def messages_in(first: int, last: int) -> int:
            return sum(self.batch_sizes[first : last + 1])

        for last in range(-1, ENTRIES):
            unacked_messages = sum(
                1
                for entry in range(last + 1)
                for position in self.positions(entry)
                if position not in self.acked
            )
            assert self.state.backlog_messages(last, messages_in) == unacked_messages
        for last in range(-1, ENTRIES):
            assert self.state.is_drained(last) == all(self.fully_acked(e) for e in range(last + 1))

    @invariant()
    def form_is_canonical(self) -> None:
        lowest = self.state.mark_delete + 2
        for start, end in self.state.acked_ranges:
            assert lowest <= start <= end
            lowest = end + 2
        for entry, partial in self.state.partial_acks.items():
            assert entry > self.state.mark_delete
            assert not self.state.is_entry_acked(entry)
            assert 0 < len(partial.acked) < partial.batch_size == self.batch_sizes[entry]

    @invariant()
    def serialized_form_round_trips(self) -> None:
        data = json.loads(json.dumps(self.state.to_dict()))
        assert CursorState.from_dict(data) == self.state
        assert self.state.copy() == self.state


CursorMachine.TestCase.settings = settings(max_examples=60, stateful_step_count=30, deadline=None)
TestCursorState = CursorMachine.TestCase
