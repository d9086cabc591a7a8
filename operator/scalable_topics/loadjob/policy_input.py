"""From a segment's windowed rates to the policy's input (pure: no Spark here).

``rates`` is the per-rate maximum over the windows: a burst over a split threshold in the
shortest window splits fast, while a merge needs every window cold. ``cold_since`` is the end
of the last sample (within the longest window) in which some rate was above the topic's merge
threshold, or the earliest start in the longest window if none was (cold throughout), and None
when the segment is not cold now.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime

from ..model.autoscale_config import RATE_NAMES, AutoScaleConfig, Rates
from ..model.autoscale_policy import SegmentLoad
from ..model.rate_windows import Window


@dataclass(frozen=True, slots=True)
class SegmentWindows:
    """What the history says about one segment at a run's time.

    ``rates``: per window label, the time-weighted average rates over the part of the window
    the history covers; a window with no coverage has no entry. ``last_hot_end``: the end of
    the last sample in the longest window with a rate above the topic's merge threshold;
    ``first_start``: the earliest start of a sample in the longest window.
    """

    namespace: str
    topic: str
    segment_id: int
    rates: Mapping[str, Rates]
    last_hot_end: datetime | None
    first_start: datetime | None


@dataclass(frozen=True, slots=True)
class WindowedLoad:
    """The policy's input for one segment, and for each rate the window its value came from."""

    load: SegmentLoad
    windows: Mapping[str, str]  # wire rate name -> window label

    def window_of(self, rule: str) -> str | None:
        return self.windows.get(rule)


def is_cold(rates: Rates, merge_thresholds: Rates) -> bool:
    return all(
        value <= limit
        for (_, value), (_, limit) in zip(
            rates.by_wire_name(), merge_thresholds.by_wire_name(), strict=True
        )
    )


def windowed_load(
    config: AutoScaleConfig, windows: tuple[Window, ...], segment: SegmentWindows
) -> WindowedLoad | None:
    """The segment's policy input, or None when no window has any coverage (no report)."""
    covered = [w for w in windows if w.label in segment.rates]
    if not covered:
        return None
    peaks: dict[str, float] = {}
    sources: dict[str, str] = {}
    # Shortest window first, and a strictly greater value to take over: a tie names the
    # shortest window, the one that would have fired first.
    for window in sorted(covered):
        for rate, value in segment.rates[window.label].by_wire_name():
            if rate not in peaks or value > peaks[rate]:
                peaks[rate], sources[rate] = value, window.label
    rates = Rates(*(peaks[wire] for _, wire in RATE_NAMES))
    cold_since = None
    if is_cold(rates, config.merge_thresholds):
        cold_since = segment.last_hot_end or segment.first_start
    return WindowedLoad(SegmentLoad(rates, cold_since), sources)
