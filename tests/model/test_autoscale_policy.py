"""The autoscale decision core: every split and merge rule, its gates, and properties."""

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scalable_topics.model.autoscale_config import CLUSTER_DEFAULTS, AutoScaleConfig, Rates
from scalable_topics.model.autoscale_policy import (
    AutoScaleDecision,
    AutoScaleInputs,
    Merge,
    NoAction,
    SegmentLoad,
    Split,
    decide,
)
from scalable_topics.model.hash_range import HashRange
from scalable_topics.model.layout import SegmentLayout
from scalable_topics.model.segment import SegmentInfo, SegmentState

T0 = datetime(2026, 1, 1, tzinfo=UTC)
NOW = T0 + timedelta(hours=1)
CONFIG = CLUSTER_DEFAULTS
IDLE = Rates(0, 0, 0, 0)
WARM = Rates(5_000, 5_000, 0, 0)  # between merge (2,000) and split (10,000)


def cold(rates: Rates = IDLE, for_seconds: float = 600) -> SegmentLoad:
    return SegmentLoad(rates, cold_since=NOW - timedelta(seconds=for_seconds))


def inputs(
    layout: SegmentLayout,
    loads: dict[int, SegmentLoad] | None = None,
    consumers: dict[str, int] | None = None,
    last_split: datetime | None = None,
    last_merge: datetime | None = None,
) -> AutoScaleInputs:
    return AutoScaleInputs(layout, loads or {}, consumers or {}, last_split, last_merge, NOW)


def ago(seconds: float) -> datetime:
    return NOW - timedelta(seconds=seconds)


# -- split rules ----------------------------------------------------------------------------


def test_disabled_does_nothing_even_under_pressure() -> None:
    layout = SegmentLayout.initial(1, T0)
    got = decide(
        replace(CONFIG, enabled=False),
        inputs(layout, {0: SegmentLoad(Rates(1e9, 0, 0, 0))}, {"s": 9}),
    )
    assert got == NoAction("autoscale is disabled for this topic")


def test_more_consumers_than_segments_splits_the_widest() -> None:
    layout = SegmentLayout.initial(2, T0).split(0, T0)  # active: 2, 3 (halves of 0), 1
    got = decide(CONFIG, inputs(layout, consumers={"a": 2, "b": 4}))
    assert isinstance(got, Split)
    assert (got.segment_id, got.rule) == (1, "consumers")
    assert "'b' has 4 consumers for 3 active segments" in got.reason


def test_consumer_split_ties_go_to_the_lowest_id() -> None:
    layout = SegmentLayout.initial(4, T0)
    got = decide(CONFIG, inputs(layout, consumers={"s": 5}))
    assert got == Split(0, "consumers", got.reason) and isinstance(got, Split)


def test_as_many_consumers_as_segments_does_not_split() -> None:
    got = decide(CONFIG, inputs(SegmentLayout.initial(3, T0), consumers={"s": 3}))
    assert isinstance(got, NoAction)


@pytest.mark.parametrize(
    ("rates", "rule"),
    [
        (Rates(10_001, 0, 0, 0), "msgRateIn"),
        (Rates(0, 20_000, 0, 0), "msgRateOut"),
        (Rates(0, 0, 11 * 2**20, 0), "byteRateIn"),
        (Rates(0, 0, 0, 11 * 2**20), "byteRateOut"),
    ],
)
def test_each_rate_over_its_split_threshold_splits(rates: Rates, rule: str) -> None:
    got = decide(
        CONFIG, inputs(SegmentLayout.initial(2, T0), {0: SegmentLoad(WARM), 1: SegmentLoad(rates)})
    )
    assert isinstance(got, Split)
    assert (got.segment_id, got.rule) == (1, rule)


def test_rate_at_the_split_threshold_does_not_split() -> None:
    got = decide(
        CONFIG, inputs(SegmentLayout.initial(1, T0), {0: SegmentLoad(Rates(10_000, 0, 0, 0))})
    )
    assert isinstance(got, NoAction)


def test_the_most_overloaded_segment_splits() -> None:
    loads = {
        0: SegmentLoad(Rates(15_000, 0, 0, 0)),  # 1.5x
        1: SegmentLoad(Rates(0, 0, 0, 30 * 2**20)),  # 3x
        2: SegmentLoad(Rates(20_000, 0, 0, 0)),  # 2x
    }
    got = decide(CONFIG, inputs(SegmentLayout.initial(3, T0), loads))
    assert isinstance(got, Split)
    assert (got.segment_id, got.rule) == (1, "byteRateOut")
    assert "3.00x" in got.reason


def test_consumer_rule_comes_before_traffic() -> None:
    layout = SegmentLayout.initial(2, T0).split(0, T0)  # 1 is widest
    got = decide(CONFIG, inputs(layout, {2: SegmentLoad(Rates(50_000, 0, 0, 0))}, {"s": 4}))
    assert isinstance(got, Split) and (got.segment_id, got.rule) == (1, "consumers")


def test_split_cooldown_blocks_and_then_allows() -> None:
    layout = SegmentLayout.initial(1, T0)
    hot = {0: SegmentLoad(Rates(50_000, 0, 0, 0))}
    blocked = decide(CONFIG, inputs(layout, hot, last_split=ago(59)))
    assert isinstance(blocked, NoAction) and "split cooldown" in blocked.reason
    assert isinstance(decide(CONFIG, inputs(layout, hot, last_split=ago(60))), Split)


def test_merge_does_not_gate_splits() -> None:
    hot = {0: SegmentLoad(Rates(50_000, 0, 0, 0))}
    assert isinstance(
        decide(CONFIG, inputs(SegmentLayout.initial(1, T0), hot, last_merge=ago(1))), Split
    )


def test_max_segments_blocks_splits() -> None:
    layout = SegmentLayout.initial(4, T0)
    got = decide(replace(CONFIG, max_segments=4), inputs(layout, consumers={"s": 9}))
    assert isinstance(got, NoAction) and "the maximum 4" in got.reason


def test_a_one_hash_segment_is_never_split() -> None:
    one = SegmentInfo(0, HashRange(0, 0), SegmentState.ACTIVE, 0, T0)
    rest = SegmentInfo(1, HashRange(1, 0xFFFF), SegmentState.ACTIVE, 0, T0)
    layout = SegmentLayout(0, 2, {0: one, 1: rest})
    got = decide(
        CONFIG,
        inputs(
            layout, {0: SegmentLoad(Rates(90_000, 0, 0, 0)), 1: SegmentLoad(Rates(20_000, 0, 0, 0))}
        ),
    )
    assert isinstance(got, Split) and got.segment_id == 1


# -- merge rules ----------------------------------------------------------------------------


def test_a_cold_adjacent_pair_merges() -> None:
    got = decide(CONFIG, inputs(SegmentLayout.initial(2, T0), {0: cold(), 1: cold()}))
    assert isinstance(got, Merge)
    assert (got.first_id, got.second_id, got.rule) == (0, 1, "coldPair")


def test_merge_waits_for_the_window_on_both() -> None:
    layout = SegmentLayout.initial(2, T0)
    got = decide(CONFIG, inputs(layout, {0: cold(), 1: cold(for_seconds=299)}))
    assert isinstance(got, NoAction)
    assert isinstance(decide(CONFIG, inputs(layout, {0: cold(), 1: cold(for_seconds=300)})), Merge)


def test_not_cold_or_unreported_segments_do_not_merge() -> None:
    layout = SegmentLayout.initial(2, T0)
    assert isinstance(decide(CONFIG, inputs(layout, {0: cold(), 1: SegmentLoad(IDLE)})), NoAction)
    assert isinstance(decide(CONFIG, inputs(layout, {0: cold()})), NoAction)


def test_hysteresis_the_pair_sum_must_stay_below_every_merge_threshold() -> None:
    layout = SegmentLayout.initial(2, T0)
    each = Rates(1_000, 0, 0, 0)  # each below 2,000, together exactly 2,000
    assert isinstance(decide(CONFIG, inputs(layout, {0: cold(each), 1: cold(each)})), NoAction)
    less = Rates(999, 0, 0, 0)
    assert isinstance(decide(CONFIG, inputs(layout, {0: cold(less), 1: cold(each)})), Merge)


def test_a_merge_threshold_of_zero_never_merges() -> None:
    config = replace(CONFIG, merge_thresholds=replace(CONFIG.merge_thresholds, byte_rate_in=0))
    got = decide(config, inputs(SegmentLayout.initial(2, T0), {0: cold(), 1: cold()}))
    assert isinstance(got, NoAction)


def test_only_adjacent_segments_merge() -> None:
    # 0 and 2 are cold, 1 between them is warm: no adjacent cold pair.
    layout = SegmentLayout.initial(3, T0)
    loads = {0: cold(), 1: SegmentLoad(WARM), 2: cold()}
    assert isinstance(decide(CONFIG, inputs(layout, loads)), NoAction)


def test_the_coldest_pair_merges_first_ties_by_lowest_ids() -> None:
    layout = SegmentLayout.initial(4, T0)
    loads = {
        0: cold(for_seconds=400),
        1: cold(for_seconds=900),
        2: cold(for_seconds=900),
        3: cold(for_seconds=900),
    }
    got = decide(CONFIG, inputs(layout, loads))
    assert isinstance(got, Merge) and (got.first_id, got.second_id) == (1, 2)


def test_merge_cooldown_blocks_and_then_allows() -> None:
    layout = SegmentLayout.initial(2, T0)
    loads = {0: cold(), 1: cold()}
    got = decide(CONFIG, inputs(layout, loads, last_merge=ago(299)))
    assert isinstance(got, NoAction) and "merge cooldown" in got.reason
    assert isinstance(decide(CONFIG, inputs(layout, loads, last_merge=ago(300))), Merge)


def test_min_segments_blocks_merges() -> None:
    got = decide(
        replace(CONFIG, min_segments=2),
        inputs(SegmentLayout.initial(2, T0), {0: cold(), 1: cold()}),
    )
    assert isinstance(got, NoAction) and "minimum 2" in got.reason


def test_a_merge_never_leaves_a_consumer_without_a_segment() -> None:
    got = decide(CONFIG, inputs(SegmentLayout.initial(2, T0), {0: cold(), 1: cold()}, {"s": 2}))
    assert isinstance(got, NoAction)


def test_max_dag_depth_caps_merges_but_not_splits() -> None:
    layout = SegmentLayout.initial(2, T0).merge(0, 1, T0).split(2, T0)  # 3, 4 at depth 1
    loads = {3: cold(), 4: cold()}
    assert isinstance(decide(replace(CONFIG, max_dag_depth=2), inputs(layout, loads)), Merge)
    got = decide(replace(CONFIG, max_dag_depth=1), inputs(layout, loads))
    assert isinstance(got, NoAction)
    hot = {3: SegmentLoad(Rates(50_000, 0, 0, 0)), 4: cold()}
    assert isinstance(decide(replace(CONFIG, max_dag_depth=0), inputs(layout, hot)), Split)


def test_a_split_wins_over_a_merge() -> None:
    layout = SegmentLayout.initial(3, T0)
    loads = {0: cold(), 1: cold(), 2: SegmentLoad(Rates(50_000, 0, 0, 0))}
    got = decide(CONFIG, inputs(layout, loads))
    assert isinstance(got, Split) and got.segment_id == 2


def test_bad_inputs_are_refused() -> None:
    with pytest.raises(ValueError, match="msgRateOut must be a finite number >= 0"):
        SegmentLoad(Rates(0, -1, 0, 0))
    with pytest.raises(ValueError, match="consumer counts must not be negative"):
        inputs(SegmentLayout.initial(1, T0), consumers={"s": -1})


# -- properties -----------------------------------------------------------------------------


@st.composite
def layouts(draw: st.DrawFn) -> SegmentLayout:
    layout = SegmentLayout.initial(draw(st.integers(1, 6)), T0)
    for step in range(draw(st.integers(0, 10))):
        active = layout.active
        at = T0 + timedelta(seconds=step + 1)
        if draw(st.booleans()) or len(active) < 2:
            layout = layout.split(draw(st.sampled_from(active)).segment_id, at)
        else:
            i = draw(st.integers(0, len(active) - 2))
            layout = layout.merge(active[i].segment_id, active[i + 1].segment_id, at)
    return layout


rates = st.builds(Rates, *[st.sampled_from([0.0, 500.0, 1_500.0, 5_000.0, 12_000.0, 3e7])] * 4)
seconds_ago = st.one_of(st.none(), st.floats(-10, 1_000).map(ago))


@st.composite
def scenarios(draw: st.DrawFn) -> tuple[AutoScaleConfig, AutoScaleInputs]:
    layout = draw(layouts())
    config = replace(
        CONFIG,
        min_segments=draw(st.integers(1, 4)),
        max_segments=draw(st.integers(4, 12)),
        max_dag_depth=draw(st.integers(0, 3)),
        merge_window=draw(st.sampled_from([0.0, 300.0])),
    )
    loads = {
        s.segment_id: SegmentLoad(draw(rates), draw(seconds_ago))
        for s in layout.active
        if draw(st.integers(0, 5))  # now and then a segment has no report yet
    }
    consumers = draw(st.dictionaries(st.sampled_from("abc"), st.integers(0, 10), max_size=3))
    return config, AutoScaleInputs(
        layout, loads, consumers, draw(seconds_ago), draw(seconds_ago), NOW
    )


@settings(max_examples=300, deadline=None)
@given(scenarios())
def test_decisions_keep_the_layout_valid_and_respect_every_gate(
    scenario: tuple[AutoScaleConfig, AutoScaleInputs],
) -> None:
    config, given_inputs = scenario
    layout = given_inputs.layout
    got: AutoScaleDecision = decide(config, given_inputs)
    assert decide(config, given_inputs) == got  # deterministic
    if isinstance(got, NoAction):
        return
    after = layout.apply(got.plan(layout), NOW)
    after.check_invariants()
    if isinstance(got, Split):
        assert len(after.active) <= config.max_segments
        last = given_inputs.last_split
        assert last is None or (NOW - last).total_seconds() >= config.split_cooldown
    else:
        child = after.get(got.plan(layout).child_ids[0])
        assert after.merge_depth(child.segment_id) <= config.max_dag_depth
        assert len(after.active) >= config.min_segments
        last = given_inputs.last_merge
        assert last is None or (NOW - last).total_seconds() >= config.merge_cooldown
        for segment_id in (got.first_id, got.second_id):
            since = given_inputs.loads[segment_id].cold_since
            assert since is not None and (NOW - since).total_seconds() >= config.merge_window
        assert len(after.active) >= max(given_inputs.consumers.values(), default=0)
