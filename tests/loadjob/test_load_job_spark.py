"""The load job on Spark (local[2]): windowed rates against hand-computed values, partition
pruning, the job's decisions against the pure policy's, and recommendations in a real store."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from hand_rates import hand_rates
from history_files import Sample, write_file, write_history
from hypothesis import given, settings
from hypothesis import strategies as st
from pyspark.sql import SparkSession
from topic_snapshots import SMALL, T0, topic

from scalable_topics.loadjob.evaluate import evaluate_topic
from scalable_topics.loadjob.history import TopicThresholds, read_history, windowed_rates
from scalable_topics.loadjob.policy_input import SegmentWindows
from scalable_topics.model.autoscale_config import Rates
from scalable_topics.model.rate_windows import Window, longest, parse_windows

W = parse_windows("20s,40s,80s,160s")
TTL = timedelta(minutes=5)


def at(seconds: float) -> datetime:
    """``seconds`` relative to T0, the run's time."""
    return T0 + timedelta(seconds=seconds)


def rates_of(
    spark: SparkSession, location: Path, topics: list[str], windows: tuple[Window, ...] = W
) -> dict[tuple[str, int], SegmentWindows]:
    history = read_history(spark, str(location), T0, longest(windows))
    limits = [TopicThresholds("default", name, SMALL.merge_thresholds) for name in topics]
    found = windowed_rates(spark, history, limits, windows, T0)
    return {(s.topic, s.segment_id): s for s in found.segments}


def test_windowed_rates_match_hand_computed_values(spark: SparkSession, tmp_path: Path) -> None:
    write_history(
        tmp_path,
        [
            # Segment 0: irregular intervals and a gap (-60..-50 missing).
            Sample("t", 0, at(-170), at(-90), msg_rate_in=4.0),  # crosses the 160 s start
            Sample("t", 0, at(-90), at(-60), msg_rate_in=40.0, msg_rate_out=1.0),
            Sample("t", 0, at(-50), at(-30), msg_rate_in=10.0),  # crosses the 40 s start
            Sample("t", 0, at(-30), at(-5), msg_rate_in=200.0, byte_rate_in=1000.0),
            Sample("t", 0, at(-400), at(-200), msg_rate_in=9999.0),  # ends before every window
            # Segment 1: young, rows only in the last 15 s.
            Sample("t", 1, at(-15), at(-10), msg_rate_in=6.0),
            Sample("t", 1, at(-10), at(0), msg_rate_in=3.0),
        ],
    )
    got = rates_of(spark, tmp_path, ["t"])
    old, young = got["t", 0], got["t", 1]
    # 20 s window [-20, 0]: covered by [-20, -5] at 200 => 200 msg/s, 1000 B/s in.
    assert old.rates["20s"] == Rates(200.0, 0.0, 1000.0, 0.0)
    # 40 s [-40, 0]: 10 x 10 s + 200 x 25 s over 35 s.
    assert old.rates["40s"].msg_rate_in == pytest.approx((100 + 5000) / 35)
    # 80 s [-80, 0]: 40 x 20 + 10 x 20 + 200 x 25 over 65 s (the gap is not covered).
    assert old.rates["80s"].msg_rate_in == pytest.approx((800 + 200 + 5000) / 65)
    assert old.rates["80s"].msg_rate_out == pytest.approx(20 / 65)
    # 160 s [-160, 0]: 4 x 70 + 40 x 30 + 10 x 20 + 200 x 25 over 145 s.
    assert old.rates["160s"].msg_rate_in == pytest.approx((280 + 1200 + 200 + 5000) / 145)
    # Over the merge threshold (10 msg/s in) last in [-30, -5]; first start -170.
    assert (old.last_hot_end, old.first_start) == (at(-5), at(-170))
    # The young segment: averaged over the 15 s it has existed, in every window alike.
    for label in ("20s", "40s", "80s", "160s"):
        assert young.rates[label].msg_rate_in == pytest.approx((30 + 30) / 15)
    assert (young.last_hot_end, young.first_start) == (None, at(-15))


def test_a_segment_without_rows_in_a_window_has_no_value_there(
    spark: SparkSession, tmp_path: Path
) -> None:
    write_history(tmp_path, [Sample("t", 0, at(-150), at(-100), msg_rate_in=8.0)])
    got = rates_of(spark, tmp_path, ["t"])["t", 0]
    assert set(got.rates) == {"160s"}
    assert got.rates["160s"].msg_rate_in == 8.0


def test_only_the_longest_windows_date_partitions_are_read(
    spark: SparkSession, tmp_path: Path
) -> None:
    write_history(tmp_path, [Sample("t", 0, at(-20), at(0), msg_rate_in=5.0)])
    # A file under another date whose rows claim to be recent: read, it would change the rate.
    write_file(
        tmp_path / f"date={(T0 - timedelta(days=3)).date().isoformat()}",
        [Sample("t", 0, at(-20), at(0), msg_rate_in=500.0)],
    )
    # And one that is not Parquet at all: read, the run would fail.
    (tmp_path / "date=2026-01-01").mkdir()
    (tmp_path / "date=2026-01-01" / "broker-0-0-0.parquet").write_bytes(b"not parquet")
    got = rates_of(spark, tmp_path, ["t"])["t", 0]
    assert got.rates["20s"].msg_rate_in == 5.0


def test_a_window_over_midnight_reads_both_dates(spark: SparkSession, tmp_path: Path) -> None:
    windows = parse_windows("13h")  # T0 is noon: the window starts the day before
    write_history(
        tmp_path,
        [
            Sample("t", 0, at(-13 * 3600), at(-12.5 * 3600), msg_rate_in=2.0),
            Sample("t", 0, at(-12.5 * 3600), at(0), msg_rate_in=4.0),
        ],
    )
    got = rates_of(spark, tmp_path, ["t"], windows)["t", 0]
    assert got.rates["13h"].msg_rate_in == pytest.approx((2 * 0.5 + 4 * 12.5) / 13)


def test_no_history_yet_is_no_rows(spark: SparkSession, tmp_path: Path) -> None:
    assert rates_of(spark, tmp_path / "nothing-here", ["t"]) == {}


def test_rows_of_other_topics_and_invalid_rates_are_left_out(
    spark: SparkSession, tmp_path: Path
) -> None:
    write_history(
        tmp_path,
        [
            Sample("t", 0, at(-20), at(0), msg_rate_in=5.0),
            Sample("t", 0, at(-20), at(0), msg_rate_in=float("nan")),
            Sample("t", 0, at(-20), at(0), msg_rate_in=-1.0),
            Sample("gone", 0, at(-20), at(0), msg_rate_in=7.0),
            Sample("t", None, at(-20), at(0), msg_rate_in=8.0),  # type: ignore[arg-type]
            Sample("t", 0, at(-20), at(0), msg_rate_in=9.0, namespace="other"),
        ],
    )
    write_file(
        tmp_path / f"date={T0.date().isoformat()}",
        [Sample("t", 0, at(-20), None, msg_rate_in=8.0)],  # type: ignore[arg-type]
    )
    got = rates_of(spark, tmp_path, ["t"])
    assert set(got) == {("t", 0)}
    assert got["t", 0].rates["20s"].msg_rate_in == 5.0


# Rates around SMALL's thresholds (merge at 10, split above 100), whole seconds: every sum the
# job and the oracle make is exact, so their decisions may be compared for equality.
_RATE = st.sampled_from([0.0, 5.0, 10.0, 11.0, 60.0, 100.0, 101.0, 400.0])
_SEGMENT_ROWS = st.lists(
    st.tuples(st.integers(0, 15), st.integers(1, 60), _RATE, _RATE), min_size=0, max_size=6
)


def _samples(segment_id: int, rows: list[tuple[int, int, float, float]]) -> list[Sample]:
    """Rows laid back to back from up to 200 s before T0, with gaps: (gap, length, in, out)."""
    samples, cursor = [], -200
    for gap, length, msg_in, msg_out in rows:
        start = cursor + gap
        samples.append(
            Sample(
                "t",
                segment_id,
                at(start),
                at(start + length),
                msg_rate_in=msg_in,
                msg_rate_out=msg_out,
            )
        )
        cursor = start + length
    return samples


@settings(max_examples=12)
@given(
    first=_SEGMENT_ROWS,
    second=_SEGMENT_ROWS,
    consumers=st.integers(0, 3),
    last_split=st.none() | st.integers(1, 120),
    last_merge=st.none() | st.integers(1, 120),
)
def test_the_jobs_recommendations_equal_the_pure_policys(
    spark: SparkSession,
    tmp_path_factory: pytest.TempPathFactory,
    first: list[tuple[int, int, float, float]],
    second: list[tuple[int, int, float, float]],
    consumers: int,
    last_split: int | None,
    last_merge: int | None,
) -> None:
    location = tmp_path_factory.mktemp("history")
    samples = _samples(0, first) + _samples(1, second)
    if samples:
        write_history(location, samples)
    snapshot = replace(
        topic("t", segments=2, consumers={"s": consumers}),
        last_split=None if last_split is None else at(-last_split),
        last_merge=None if last_merge is None else at(-last_merge),
    )
    by_job = {seg: found for (_, seg), found in rates_of(spark, location, ["t"]).items()}
    by_hand = {
        seg: found for (_, seg), found in hand_rates(samples, SMALL.merge_thresholds, W, T0).items()
    }
    assert by_job == by_hand
    assert evaluate_topic(snapshot, by_job, W, T0, TTL) == evaluate_topic(
        snapshot, by_hand, W, T0, TTL
    )
