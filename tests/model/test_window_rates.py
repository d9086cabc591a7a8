"""The per-segment window rates a broker computes from load history rows (model/window_rates.py),
against values computed by hand, including rows that only partly overlap a window."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from scalable_topics.model.autoscale_config import Rates
from scalable_topics.model.rate_windows import parse_windows, partition_dates
from scalable_topics.model.window_rates import Span, window_rates

NOW = datetime(2026, 3, 1, 0, 1, tzinfo=UTC)
WINDOWS = parse_windows("1m,2m,5m")


def span(segment: int, start_s: float, end_s: float, msg_in: float) -> Span:
    """A row over [now - start_s, now - end_s] at ``msg_in`` (msgRateOut twice that)."""
    return Span(
        segment,
        NOW - timedelta(seconds=start_s),
        NOW - timedelta(seconds=end_s),
        Rates(msg_in, 2 * msg_in, 0.0, 0.0),
    )


def test_rates_are_weighted_by_the_time_each_row_covers_inside_the_window() -> None:
    found = window_rates(
        [
            span(0, 30, 0, 10.0),  # inside every window
            span(0, 90, 30, 40.0),  # 30 s inside 1m, all 60 s inside 2m and 5m
            span(0, 200, 100, 100.0),  # 20 s inside 2m, all 100 s inside 5m
        ],
        WINDOWS,
        NOW,
    )
    # 1m: (30*10 + 30*40) / 60 = 25; 2m: (300 + 2400 + 20*100) / 110; 5m: (300+2400+10000)/190
    assert found[0]["1m"].msg_rate_in == pytest.approx(25.0)
    assert found[0]["2m"].msg_rate_in == pytest.approx(4700 / 110)
    assert found[0]["5m"].msg_rate_in == pytest.approx(12700 / 190)
    assert found[0]["5m"].msg_rate_out == pytest.approx(2 * 12700 / 190)


def test_a_window_without_coverage_has_no_value_and_a_young_segment_is_not_diluted() -> None:
    found = window_rates([span(1, 250, 200, 8.0), span(2, 20, 0, 3.0)], WINDOWS, NOW)
    assert found[1] == {"5m": Rates(8.0, 16.0, 0.0, 0.0)}
    # 20 s of history in every window: its rate, not 3 * 20 / 60.
    assert found[2] == {label: Rates(3.0, 6.0, 0.0, 0.0) for label in ("1m", "2m", "5m")}


def test_rows_outside_every_window_and_invalid_rates_are_ignored() -> None:
    found = window_rates(
        [
            span(0, 30, 0, 10.0),
            span(0, 30, 0, float("nan")),
            span(0, 30, 0, -1.0),
            span(0, 30, 0, float("inf")),
            span(3, 900, 400, 50.0),
        ],
        WINDOWS,
        NOW,
    )
    assert found == {0: {label: Rates(10.0, 20.0, 0.0, 0.0) for label in ("1m", "2m", "5m")}}


def test_the_partitions_a_window_touches_cross_midnight() -> None:
    assert partition_dates(NOW, max(WINDOWS)) == ["2026-02-28", "2026-03-01"]
    assert partition_dates(NOW, min(WINDOWS)) == ["2026-03-01"]
