"""The draining-hashes tracker of PIP-379 (model/key_shared.py)."""

import pytest

from scalable_topics.model.key_shared import (
    DrainingHashConflict,
    DrainingHashesTracker,
    DrainingHashStats,
)

A, B = 1, 2
H = 0x1234


def test_reference_counts_follow_pending_messages_and_clear_at_zero() -> None:
    tracker = DrainingHashesTracker()
    assert not tracker
    tracker.add_entry(A, H, 2)
    tracker.add_entry(A, H)
    tracker.add_entry(A, 0x10)
    assert (len(tracker), tracker.pending_messages) == (2, 4)
    assert not tracker.reduce_ref_count(A, H, 2)
    assert H in tracker and tracker.pending_messages == 2
    assert not tracker.reduce_ref_count(A, H)  # cleared, but nobody was refused: nothing to report
    assert H not in tracker
    assert (len(tracker), tracker.pending_messages, tracker.cleared_total) == (1, 1, 1)


def test_only_other_consumers_are_blocked_and_a_refusal_makes_the_clearing_reported() -> None:
    tracker = DrainingHashesTracker()
    tracker.add_entry(A, H)
    assert not tracker.should_block(B, 0x9999)  # not draining
    assert tracker.should_block(B, H)
    assert tracker.should_block(B, H)
    entry = tracker.get(H)
    assert entry is not None and entry.blocked_attempts == 2 and entry.is_blocking
    assert tracker.reduce_ref_count(A, H)
    assert tracker.cleared_total == 1


def test_a_closing_consumer_clears_its_hashes_without_reporting() -> None:
    tracker = DrainingHashesTracker()
    tracker.add_entry(A, H)
    assert tracker.should_block(B, H)
    assert not tracker.reduce_ref_count(A, H, closing=True)
    assert not tracker and tracker.cleared_total == 1


def test_a_hash_back_at_its_draining_consumer_stops_draining_lazily() -> None:
    tracker = DrainingHashesTracker()
    tracker.add_entry(A, H, 3)
    assert not tracker.should_block(A, H)
    assert not tracker and tracker.pending_messages == 0
    assert tracker.cleared_total == 0  # it did not drain: it was taken back
    assert not tracker.reduce_ref_count(A, H)  # later acks of those messages find nothing


def test_a_hash_cannot_drain_for_two_consumers() -> None:
    tracker = DrainingHashesTracker()
    tracker.add_entry(A, H)
    with pytest.raises(DrainingHashConflict, match="already draining for consumer 1"):
        tracker.add_entry(B, H)
    with pytest.raises(DrainingHashConflict):
        tracker.reduce_ref_count(B, H)
    with pytest.raises(ValueError, match="cannot release 2"):
        tracker.reduce_ref_count(A, H, 2)
    with pytest.raises(ValueError, match="at least one"):
        tracker.add_entry(A, H, 0)


def test_stats_group_draining_hashes_by_consumer() -> None:
    tracker = DrainingHashesTracker()
    tracker.add_entry(A, 0x20, 2)
    tracker.add_entry(B, 0x05)
    tracker.add_entry(A, 0x10)
    tracker.should_block(B, 0x20)
    assert tracker.consumer_stats() == {
        A: (DrainingHashStats(0x10, 1, 0), DrainingHashStats(0x20, 2, 1)),
        B: (DrainingHashStats(0x05, 1, 0),),
    }
