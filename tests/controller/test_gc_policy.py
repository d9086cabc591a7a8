"""Garbage collection decisions (pure): which sealed segments may be pruned, and why not."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from scalable_topics.admin.stats import Rates, SegmentReport, SubscriptionReport
from scalable_topics.controller.gc_policy import Verdict, decide, frontier, newer_bytes
from scalable_topics.model.errors import LayoutError
from scalable_topics.model.layout import SegmentLayout
from scalable_topics.model.resources import RetentionSpec

SEALED_AT = datetime(2026, 1, 1, tzinfo=UTC)


def report(size: int = 100, **drained: bool) -> SegmentReport:
    return SegmentReport(
        state="Terminated",
        entries=1,
        size_bytes=size,
        producers=0,
        rates=Rates(),
        subscriptions={
            n: SubscriptionReport(None, 0 if d else 1, d, 0) for n, d in drained.items()
        },
    )


@pytest.fixture
def sealed() -> SegmentLayout:
    return SegmentLayout.initial(1, SEALED_AT).split(0, SEALED_AT)


def test_drained_for_every_subscription_is_pruned(sealed: SegmentLayout) -> None:
    verdict = decide(sealed.get(0), report(a=True, b=True), ["a"], None, SEALED_AT)
    assert verdict == Verdict(True, "drained for a, b")


def test_one_undrained_subscription_keeps_it(sealed: SegmentLayout) -> None:
    verdict = decide(sealed.get(0), report(a=True, b=False), [], None, SEALED_AT)
    assert verdict == Verdict(False, "subscriptions b are not drained")


def test_a_declared_subscription_missing_on_the_broker_keeps_it(sealed: SegmentLayout) -> None:
    verdict = decide(sealed.get(0), report(a=True), ["a", "new"], None, SEALED_AT)
    assert verdict == Verdict(False, "declared subscriptions new are not on it yet")


def test_no_report_keeps_it(sealed: SegmentLayout) -> None:
    assert not decide(sealed.get(0), None, [], None, SEALED_AT).prune


def test_an_active_segment_is_never_pruned(sealed: SegmentLayout) -> None:
    assert not decide(sealed.get(1), report(a=True), [], None, SEALED_AT).prune


def test_without_subscriptions_and_retention_it_goes_at_once(sealed: SegmentLayout) -> None:
    assert decide(sealed.get(0), report(), [], None, SEALED_AT).prune
    assert decide(sealed.get(0), report(), [], RetentionSpec(), SEALED_AT).prune


@pytest.mark.parametrize(
    ("age", "newer", "prune"),
    [
        (3599, None, False),
        (3600, None, True),
        (10, 999, False),
        (10, 1000, True),  # the newer segments fill the size budget
    ],
)
def test_without_subscriptions_either_retention_limit_passed_prunes(
    sealed: SegmentLayout, age: int, newer: int | None, prune: bool
) -> None:
    retention = RetentionSpec(max_age_seconds=3600, max_size_bytes=1000)
    now = SEALED_AT + timedelta(seconds=age)
    assert decide(sealed.get(0), report(), [], retention, now, newer).prune is prune


def test_only_an_age_limit_ignores_sizes(sealed: SegmentLayout) -> None:
    retention = RetentionSpec(max_age_seconds=60)
    assert not decide(sealed.get(0), report(), [], retention, SEALED_AT, 10**12).prune


def test_the_frontier_is_the_oldest_retained_generation() -> None:
    layout = SegmentLayout.initial(2, SEALED_AT).split(0, SEALED_AT).split(2, SEALED_AT)
    # 0 sealed (children 2, 3), 2 sealed (children 4, 5), 1 active.
    assert [s.segment_id for s in frontier(layout)] == [0]
    assert [s.segment_id for s in frontier(layout.prune(0))] == [2]
    assert frontier(layout.prune(0).prune(2)) == ()


def test_newer_bytes_count_present_later_segments() -> None:
    layout = SegmentLayout.initial(1, SEALED_AT).split(0, SEALED_AT).split(1, SEALED_AT)
    sizes = {0: 5, 1: 7, 2: 11, 3: 13, 4: 17, 99: 1000}
    assert newer_bytes(layout, 1, sizes) == 11 + 13 + 17
    assert newer_bytes(layout.prune(0), 0, sizes) == 7 + 11 + 13 + 17


@st.composite
def layouts(draw: st.DrawFn) -> SegmentLayout:
    layout = SegmentLayout.initial(draw(st.integers(1, 3)), SEALED_AT)
    for step in draw(st.lists(st.integers(0, 10**6), max_size=8)):
        active = layout.active
        try:
            if step % 3 == 0 and len(active) > 1:
                i = step % (len(active) - 1)
                layout = layout.merge(active[i].segment_id, active[i + 1].segment_id, SEALED_AT)
            elif step % 3 == 1 and frontier(layout):
                layout = layout.prune(frontier(layout)[step % len(frontier(layout))].segment_id)
            else:
                layout = layout.split(active[step % len(active)].segment_id, SEALED_AT)
        except LayoutError:
            pass
    return layout


@given(layouts())
def test_every_frontier_segment_can_be_pruned_and_pruning_it_keeps_the_invariants(
    layout: SegmentLayout,
) -> None:
    for info in frontier(layout):
        pruned = layout.prune(info.segment_id)
        pruned.check_invariants()
        assert pruned.epoch == layout.epoch + 1
    # Only the frontier can go: every other sealed segment has a present parent.
    others = [s for s in layout.sealed if s not in frontier(layout)]
    for info in others:
        with pytest.raises(LayoutError):
            layout.prune(info.segment_id)
