"""The controller's choice between its own decision and the load job's recommendation, and
the gates a recommendation is re-checked against on the live layout."""

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from scalable_topics.model.autoscale_choice import choose
from scalable_topics.model.autoscale_config import CLUSTER_DEFAULTS, AutoScaleConfig, Rates
from scalable_topics.model.autoscale_policy import (
    AutoScaleInputs,
    Merge,
    NoAction,
    SegmentLoad,
    Split,
    admissible,
)
from scalable_topics.model.layout import SegmentLayout
from scalable_topics.model.resources import AutoScaleRecommendation

T0 = datetime(2026, 1, 1, tzinfo=UTC)
NOW = T0 + timedelta(hours=1)
HOT = SegmentLoad(Rates(15_000, 0, 0, 0))


def inputs(
    layout: SegmentLayout,
    loads: dict[int, SegmentLoad] | None = None,
    consumers: dict[str, int] | None = None,
    last_split: datetime | None = None,
    last_merge: datetime | None = None,
) -> AutoScaleInputs:
    return AutoScaleInputs(layout, loads or {}, consumers or {}, last_split, last_merge, NOW)


def recommendation(
    decision: str, ids: list[int], epoch: int = 0, expires_in: float = 60, rule: str = "msgRateIn"
) -> AutoScaleRecommendation:
    return AutoScaleRecommendation.model_validate(
        {
            "decision": decision,
            "segmentIds": ids,
            "rule": rule,
            "window": "2m",
            "reason": "the job says so",
            "layoutEpoch": epoch,
            "computedAt": NOW - timedelta(seconds=30),
            "expiresAt": NOW + timedelta(seconds=expires_in),
        }
    )


# -- admissible: every gate on the live layout ---------------------------------------------------


def test_a_split_of_an_active_segment_outside_every_gate_is_admissible() -> None:
    assert (
        admissible(CLUSTER_DEFAULTS, inputs(SegmentLayout.initial(2, T0)), Split(1, "r", ""))
        is None
    )


@pytest.mark.parametrize(
    ("config", "last_split", "segment", "why"),
    [
        (CLUSTER_DEFAULTS, None, 7, "segment 7 is not active"),
        (replace(CLUSTER_DEFAULTS, max_segments=2), None, 0, "the maximum 2"),
        (CLUSTER_DEFAULTS, NOW - timedelta(seconds=10), 0, "inside the 60 s split cooldown"),
        (replace(CLUSTER_DEFAULTS, enabled=False), None, 0, "disabled"),
    ],
)
def test_a_split_is_refused_by_each_gate(
    config: AutoScaleConfig, last_split: datetime | None, segment: int, why: str
) -> None:
    got = admissible(
        config,
        inputs(SegmentLayout.initial(2, T0), last_split=last_split),
        Split(segment, "r", ""),
    )
    assert got is not None and why in got


def test_a_sealed_segment_is_not_active_any_more() -> None:
    layout = SegmentLayout.initial(2, T0).split(0, T0)
    assert admissible(CLUSTER_DEFAULTS, inputs(layout), Split(0, "r", "")) == (
        "segment 0 is not active"
    )


def test_a_merge_is_refused_by_each_gate() -> None:
    three = SegmentLayout.initial(3, T0)
    pair = Merge(0, 1, "r", "")
    assert admissible(CLUSTER_DEFAULTS, inputs(three), pair) is None
    refusals = [
        (CLUSTER_DEFAULTS, inputs(three), Merge(0, 2, "r", ""), "0 and 2 are not adjacent"),
        (CLUSTER_DEFAULTS, inputs(three), Merge(0, 9, "r", ""), "segment 9 is not active"),
        (replace(CLUSTER_DEFAULTS, min_segments=3), inputs(three), pair, "the minimum 3"),
        (CLUSTER_DEFAULTS, inputs(three, consumers={"s": 3}), pair, "3 consumers"),
        (
            CLUSTER_DEFAULTS,
            inputs(three, last_merge=NOW - timedelta(seconds=5)),
            pair,
            "merge cooldown",
        ),
        (replace(CLUSTER_DEFAULTS, max_dag_depth=0), inputs(three), pair, "over the maximum 0"),
    ]
    for config, seen, merge, why in refusals:
        got = admissible(config, seen, merge)
        assert got is not None and why in got, (merge, why, got)


# -- choose: fresh, stale, wrong epoch, inadmissible, overridden ---------------------------------


def test_without_a_recommendation_the_controller_acts_on_its_own_decision() -> None:
    got = choose(CLUSTER_DEFAULTS, inputs(SegmentLayout.initial(1, T0), {0: HOT}), 0, None)
    assert isinstance(got.decision, Split) and got.decision.segment_id == 0
    assert (got.source, got.window, got.recommendation) == ("controller", "latest report", "none")


def test_a_fresh_recommendation_for_the_current_epoch_is_acted_on() -> None:
    layout = SegmentLayout.initial(2, T0)
    got = choose(CLUSTER_DEFAULTS, inputs(layout), 0, recommendation("Split", [1]))
    assert got.decision == Split(1, "msgRateIn", "the job says so")
    assert (got.source, got.window, got.recommendation) == ("recommendation", "2m", "used")


def test_a_merge_recommended_higher_range_first_is_carried_out_lower_range_first() -> None:
    layout = SegmentLayout.initial(2, T0)
    got = choose(CLUSTER_DEFAULTS, inputs(layout), 0, recommendation("Merge", [1, 0]))
    assert isinstance(got.decision, Merge)
    assert (got.decision.first_id, got.decision.second_id) == (0, 1)


@pytest.mark.parametrize(
    ("epoch", "expires_in", "use"), [(0, 0, "stale"), (0, -5, "stale"), (3, 60, "wrongEpoch")]
)
def test_a_stale_or_other_epochs_recommendation_gives_way_to_the_own_decision(
    epoch: int, expires_in: float, use: str
) -> None:
    layout = SegmentLayout.initial(1, T0)
    rec = recommendation("NoAction", [], epoch=epoch, expires_in=expires_in)
    got = choose(CLUSTER_DEFAULTS, inputs(layout, {0: HOT}), 0, rec)
    assert isinstance(got.decision, Split) and got.decision.rule == "msgRateIn"
    assert (got.source, got.recommendation) == ("controller", use)


def test_a_fresh_no_action_recommendation_holds_back_a_traffic_split() -> None:
    layout = SegmentLayout.initial(1, T0)
    got = choose(CLUSTER_DEFAULTS, inputs(layout, {0: HOT}), 0, recommendation("NoAction", []))
    assert isinstance(got.decision, NoAction)
    assert got.recommendation == "used"


def test_an_inadmissible_recommendation_is_refused_and_nothing_is_done() -> None:
    layout = SegmentLayout.initial(2, T0)
    got = choose(
        CLUSTER_DEFAULTS,
        inputs(layout, last_split=NOW - timedelta(seconds=1)),
        0,
        recommendation("Split", [1]),
    )
    assert isinstance(got.decision, NoAction)
    assert "split cooldown" in got.decision.reason
    assert got.recommendation == "refused"


def test_a_malformed_recommendation_is_refused_naming_the_problem() -> None:
    layout = SegmentLayout.initial(2, T0)
    got = choose(CLUSTER_DEFAULTS, inputs(layout), 0, recommendation("Merge", [1]))
    assert isinstance(got.decision, NoAction) and "two segments" in got.decision.reason
    assert got.recommendation == "refused"


def test_live_consumers_win_over_the_load_jobs_view() -> None:
    layout = SegmentLayout.initial(1, T0)
    got = choose(
        CLUSTER_DEFAULTS, inputs(layout, consumers={"s": 2}), 0, recommendation("NoAction", [])
    )
    assert isinstance(got.decision, Split) and got.decision.rule == "consumers"
    assert (got.source, got.recommendation) == ("controller", "overridden")
