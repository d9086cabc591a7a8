"""Per-segment time-weighted rates over rate windows, from load history rows: pure.

The same arithmetic as the load job (loadjob/history.py does it in Spark SQL): each row covers
exactly [start, end]; over a window W ending at ``now`` a segment's rate is

    sum(rate_i * overlap_i) / sum(overlap_i),  overlap_i = |[start_i, end_i] ∩ [now - W, now]|

so a young segment is not diluted by the time before it existed, and a window the history
does not cover at all has no value. A row with a negative, NaN or infinite rate is ignored
whole, as the job ignores it.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, fields
from datetime import datetime, timedelta

from .autoscale_config import Rates
from .rate_windows import Window


@dataclass(frozen=True, slots=True)
class Span:
    """One load history row of a segment: its four rates over [start, end]."""

    segment_id: int
    start: datetime
    end: datetime
    rates: Rates


def _valid(rates: Rates) -> bool:
    return all(math.isfinite(value := getattr(rates, f.name)) and value >= 0 for f in fields(Rates))


def _overlap(span: Span, since: datetime, now: datetime) -> float:
    return max(0.0, (min(span.end, now) - max(span.start, since)).total_seconds())


def window_rates(
    spans: Iterable[Span], windows: Iterable[Window], now: datetime
) -> dict[int, dict[str, Rates]]:
    """Per segment id, per window label: the rates; a window without coverage is left out,
    and a segment without coverage in any window is absent."""
    ordered = sorted(windows)
    covered: dict[int, list[float]] = {}
    weighted: dict[int, list[list[float]]] = {}
    names = [f.name for f in fields(Rates)]
    for span in spans:
        if not _valid(span.rates):
            continue
        values = [float(getattr(span.rates, name)) for name in names]
        for index, window in enumerate(ordered):
            overlap = _overlap(span, now - timedelta(seconds=window.seconds), now)
            if overlap <= 0:
                continue
            times = covered.setdefault(span.segment_id, [0.0] * len(ordered))
            sums = weighted.setdefault(span.segment_id, [[0.0] * len(names) for _ in ordered])
            times[index] += overlap
            sums[index] = [
                total + value * overlap for total, value in zip(sums[index], values, strict=True)
            ]
    found: dict[int, dict[str, Rates]] = {}
    for segment_id, times in covered.items():
        found[segment_id] = {
            window.label: Rates(*(total / times[i] for total in weighted[segment_id][i]))
            for i, window in enumerate(ordered)
            if times[i] > 0
        }
    return found
