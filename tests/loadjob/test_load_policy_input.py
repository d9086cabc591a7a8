"""The load job's pure parts: windows on the command line, from windowed rates to the policy's
input, and which recommendations a run writes."""

from __future__ import annotations

from datetime import timedelta

import pytest
from topic_snapshots import SMALL, T0, topic

from scalable_topics.loadjob.evaluate import evaluate_topic
from scalable_topics.loadjob.policy_input import SegmentWindows, windowed_load
from scalable_topics.loadjob.recommendations import needs_write, status_patch
from scalable_topics.model.autoscale_config import Rates
from scalable_topics.model.rate_windows import DEFAULT_WINDOWS, Window, parse_windows
from scalable_topics.model.resources import AutoScaleDecisionKind

W = parse_windows("20s,40s,80s,160s")
TTL = timedelta(minutes=5)


def rates(msg_in: float, msg_out: float = 0.0) -> Rates:
    return Rates(msg_in, msg_out, 0.0, 0.0)


def segment(by_window: dict[str, Rates], segment_id: int = 0, **times: object) -> SegmentWindows:
    return SegmentWindows(
        "default",
        "t",
        segment_id,
        by_window,
        times.get("last_hot_end"),  # type: ignore[arg-type]
        times.get("first_start"),  # type: ignore[arg-type]
    )


def test_windows_parse_sorted_with_their_labels() -> None:
    assert parse_windows("10m, 2m,20m,5m") == (
        Window(120, "2m"),
        Window(300, "5m"),
        Window(600, "10m"),
        Window(1200, "20m"),
    )
    assert parse_windows("2m,5m,10m,20m") == DEFAULT_WINDOWS
    assert parse_windows("1h") == (Window(3600, "1h"),)


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("2x", "'2x' is not a whole number"),
        ("", "'' is not a whole number"),
        ("0s", "'0s' must be longer than 0"),
        ("60s,1m", "'1m' is the same length as '60s'"),
        ("-5s", "'-5s' is not a whole number"),
    ],
)
def test_bad_windows_are_refused_by_name(text: str, problem: str) -> None:
    with pytest.raises(ValueError, match=problem):
        parse_windows(text)


def test_rates_are_the_per_rate_maximum_and_name_their_window() -> None:
    got = windowed_load(
        SMALL,
        W,
        segment(
            {"20s": rates(150, 1), "40s": rates(90, 7), "80s": rates(40, 7), "160s": rates(20, 3)}
        ),
    )
    assert got is not None
    assert got.load.rates == Rates(150, 7, 0, 0)
    # A tie names the shortest window: the one that showed it first.
    assert got.windows == {
        "msgRateIn": "20s",
        "msgRateOut": "40s",
        "byteRateIn": "20s",
        "byteRateOut": "20s",
    }
    assert got.load.cold_since is None  # 150 > 10: not cold


def test_a_window_without_coverage_has_no_say_and_none_at_all_means_no_load() -> None:
    only_long = windowed_load(SMALL, W, segment({"160s": rates(500)}))
    assert only_long is not None and only_long.load.rates == rates(500)
    assert only_long.window_of("msgRateIn") == "160s"
    assert windowed_load(SMALL, W, segment({})) is None


def test_cold_since_is_the_last_hot_end_or_the_first_start() -> None:
    hot_end, first = T0 - timedelta(seconds=30), T0 - timedelta(seconds=150)
    cold = {label: rates(5) for label in ("20s", "40s", "80s", "160s")}
    was_hot = windowed_load(SMALL, W, segment(cold, last_hot_end=hot_end, first_start=first))
    assert was_hot is not None and was_hot.load.cold_since == hot_end
    always = windowed_load(SMALL, W, segment(cold, first_start=first))
    assert always is not None and always.load.cold_since == first
    # At the merge threshold is cold; above it in any window is not.
    at = windowed_load(SMALL, W, segment({"20s": rates(10), "160s": rates(11)}, first_start=first))
    assert at is not None and at.load.cold_since is None


def test_a_burst_in_the_short_window_recommends_a_split_naming_it() -> None:
    t = topic("t", segments=2)
    segments = {0: segment({"20s": rates(300), "160s": rates(50)}, first_start=T0)}
    rec = evaluate_topic(t, segments, W, T0, TTL)
    assert rec.decision is AutoScaleDecisionKind.SPLIT
    assert (rec.segment_ids, rec.rule, rec.window) == ([0], "msgRateIn", "20s")
    assert (rec.layout_epoch, rec.computed_at, rec.expires_at) == (0, T0, T0 + TTL)
    assert "3.00x the split threshold" in rec.reason


def test_a_pair_cold_in_every_window_for_the_merge_window_merges() -> None:
    t = topic("t", segments=2)
    cold = {label: rates(2) for label in ("20s", "40s", "80s", "160s")}
    since = T0 - timedelta(seconds=SMALL.merge_window)
    segments = {i: segment(cold, i, first_start=since) for i in (0, 1)}
    rec = evaluate_topic(t, segments, W, T0, TTL)
    assert rec.decision is AutoScaleDecisionKind.MERGE
    assert (rec.segment_ids, rec.rule, rec.window) == ([0, 1], "coldPair", "160s")
    # One second short of the window: no merge yet.
    late = {i: segment(cold, i, first_start=since + timedelta(seconds=1)) for i in (0, 1)}
    assert evaluate_topic(t, late, W, T0, TTL).decision is AutoScaleDecisionKind.NO_ACTION


def test_sealed_segments_rows_are_ignored() -> None:
    t = topic("t", segments=1)
    t = topic("t", layout=t.layout.split(0, T0))  # 0 sealed; 1 and 2 active
    quiet = {i: segment({"20s": rates(5)}, i) for i in (1, 2)}
    rec = evaluate_topic(t, {0: segment({"20s": rates(10_000)}), **quiet}, W, T0, TTL)
    assert rec is not None and rec.decision is AutoScaleDecisionKind.NO_ACTION


def test_no_action_needs_history_of_every_active_segment_a_split_or_merge_does_not() -> None:
    """A segment without rows (made since the brokers last wrote the history) is unknown:
    "no action" would hold back the controller's own reading of its load record."""
    t = topic("t", segments=3)
    quiet = {i: segment({"20s": rates(5)}, i) for i in (0, 1)}
    assert evaluate_topic(t, quiet, W, T0, TTL) is None
    quiet[2] = segment({"20s": rates(5)}, 2)
    found = evaluate_topic(t, quiet, W, T0, TTL)
    assert found is not None and found.decision is AutoScaleDecisionKind.NO_ACTION
    hot = {0: segment({"20s": rates(300)})}
    found = evaluate_topic(t, hot, W, T0, TTL)
    assert found is not None and found.decision is AutoScaleDecisionKind.SPLIT


def test_consumers_split_without_a_window() -> None:
    rec = evaluate_topic(topic("t", consumers={"s": 2}), {}, W, T0, TTL)
    assert (rec.decision, rec.rule, rec.window) == (AutoScaleDecisionKind.SPLIT, "consumers", None)


def test_a_run_rewrites_only_a_changed_or_half_expired_recommendation() -> None:
    t = topic("t", segments=2)
    hot = {0: segment({"20s": rates(300)})}
    first = evaluate_topic(t, hot, W, T0, TTL)
    assert needs_write(None, first, T0)
    later = T0 + TTL / 2 - timedelta(seconds=1)
    same = evaluate_topic(t, hot, W, later, TTL)
    assert not needs_write(first, same, later)
    half = T0 + TTL / 2
    assert needs_write(first, evaluate_topic(t, hot, W, half, TTL), half)
    other = evaluate_topic(t, {1: segment({"20s": rates(300)}, 1)}, W, later, TTL)
    assert needs_write(first, other, later)
    # The same decision for a newer layout epoch is a new recommendation.
    newer = topic("t", layout=t.layout.split(1, T0))
    assert needs_write(first, evaluate_topic(newer, hot, W, later, TTL), later)


def test_the_patch_sets_every_field_and_clears_what_no_action_lacks() -> None:
    rec = evaluate_topic(topic("t"), {0: segment({"20s": rates(5)})}, W, T0, TTL)
    assert rec is not None
    assert status_patch(rec) == {
        "status": {
            "autoScale": {
                "recommendation": {
                    "decision": "NoAction",
                    "segmentIds": [],
                    "rule": None,
                    "window": None,
                    "reason": rec.reason,
                    "layoutEpoch": 0,
                    "computedAt": "2026-11-26T12:00:00Z",
                    "expiresAt": "2026-11-26T12:05:00Z",
                    "source": "spark",
                }
            }
        }
    }
