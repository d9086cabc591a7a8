from datetime import UTC, datetime

import pytest

from scalable_topics.model.consumer_sessions import GraceTimers, drained_segments, reassign
from scalable_topics.model.layout import SegmentLayout

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def test_grace_deadlines_run_from_the_disconnection_and_expire_in_order() -> None:
    timers = GraceTimers(30)
    assert timers.start(("s", "b"), 100.0) == 130.0
    timers.start(("s", "a"), 110.0)
    assert timers.next_deadline() == 130.0
    assert timers.pop_expired(129.9) == []
    assert timers.pop_expired(140.0) == [("s", "b"), ("s", "a")]
    assert len(timers) == 0
    assert timers.next_deadline() is None


def test_a_reconnection_cancels_the_deadline_and_a_new_disconnection_restarts_it() -> None:
    timers = GraceTimers(30)
    timers.start(("s", "a"), 100.0)
    timers.cancel(("s", "a"))
    assert ("s", "a") not in timers
    assert timers.next_deadline() is None
    assert timers.pop_expired(1000.0) == []
    timers.start(("s", "a"), 200.0)
    timers.start(("s", "a"), 220.0)  # a fresh grace period, e.g. under a new leader
    assert timers.deadline(("s", "a")) == 250.0
    assert timers.pop_expired(240.0) == []
    assert timers.pop_expired(250.0) == [("s", "a")]


@pytest.mark.parametrize("grace", [0, -1.0])
def test_a_grace_period_must_be_positive(grace: float) -> None:
    with pytest.raises(ValueError, match="grace period must be positive"):
        GraceTimers(grace)


def test_every_member_gets_its_round_robin_share_stamped_with_epoch_and_term() -> None:
    layout = SegmentLayout.initial(4, T0)
    registered = {"zed": T0, "amy": None}
    result = reassign(layout, [], registered, term=5)
    assert [(r.name, r.assigned_segments) for r in result] == [("amy", [0, 2]), ("zed", [1, 3])]
    assert {(r.layout_epoch, r.term) for r in result} == {(0, 5)}
    assert [r.registered_at for r in result] == [None, T0]


def test_without_a_layout_members_are_kept_with_nothing_to_read() -> None:
    result = reassign(None, [], {"a": T0}, term=2)
    assert [(r.name, r.assigned_segments, r.layout_epoch, r.term) for r in result] == [
        ("a", [], 0, 2)
    ]


def test_sealed_segments_count_as_drained_by_marker_or_when_their_object_is_gone() -> None:
    layout = SegmentLayout.initial(2, T0).split(0, T0).split(1, T0)  # 0 and 1 sealed
    markers = {0: frozenset({"orders"}), 2: frozenset(), 3: frozenset(), 4: frozenset()}
    # 0 is drained for "orders" only; 1 has no object any more (garbage collected).
    assert drained_segments(layout, markers, "orders") == {0, 1}
    assert drained_segments(layout, markers, "billing") == {1}
    assert drained_segments(None, markers, "orders") == set()
    with_backlog = reassign(layout, drained_segments(layout, markers, "billing"), {"a": T0}, 1)
    assert with_backlog[0].assigned_segments == [0, 2, 3, 4, 5]
