"""The windowed rates of a history computed in plain Python, the obvious way: the oracle the
Spark job is compared with."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from datetime import datetime, timedelta

from history_files import Sample

from scalable_topics.loadjob.policy_input import SegmentWindows
from scalable_topics.model.autoscale_config import RATE_NAMES, Rates
from scalable_topics.model.rate_windows import Window

FIELDS = [field for field, _ in RATE_NAMES]


def _overlap(sample: Sample, since: datetime, now: datetime) -> float:
    return max(0.0, (min(sample.end, now) - max(sample.start, since)).total_seconds())


def hand_rates(
    samples: Iterable[Sample], merge: Rates, windows: tuple[Window, ...], now: datetime
) -> dict[tuple[str, int], SegmentWindows]:
    by_segment: defaultdict[tuple[str, int], list[Sample]] = defaultdict(list)
    for sample in samples:
        by_segment[sample.topic, sample.segment_id].append(sample)
    found = {}
    widest = now - timedelta(seconds=max(windows).seconds)
    for (topic, segment_id), rows in by_segment.items():
        rates = {}
        for window in windows:
            since = now - timedelta(seconds=window.seconds)
            covered = sum(_overlap(s, since, now) for s in rows)
            if covered > 0:
                rates[window.label] = Rates(
                    *(
                        sum(getattr(s, f) * _overlap(s, since, now) for s in rows) / covered
                        for f in FIELDS
                    )
                )
        inside = [s for s in rows if _overlap(s, widest, now) > 0]
        if not inside:
            continue
        hot = [s.end for s in inside if any(getattr(s, f) > getattr(merge, f) for f in FIELDS)]
        found[topic, segment_id] = SegmentWindows(
            "default",
            topic,
            segment_id,
            rates,
            max(hot, default=None),
            min(s.start for s in inside),
        )
    return found
