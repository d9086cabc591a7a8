"""Which sealed segments garbage collection may prune: pure decisions.

Only the oldest retained generation can go (a sealed segment none of whose parents is still in
the layout, as ``SegmentLayout.prune`` requires), and only when nothing needs it any more:

* It has subscriptions (as its broker lists them): every one is drained, i.e. every message is
  acknowledged, and every declared subscription is among them. Its children's ordered dispatch
  treats a parent that is gone as drained, so pruning an undrained one would break per-key order.
* It has none: it is past the topic's retention. With ``maxAgeSeconds``, once that long has
  passed since it was sealed; with ``maxSizeBytes``, once the segments created after it hold at
  least that much; with both, when either limit is passed (as the broker trims consumed data
  within a log); with neither, at once. A topic with no retention keeps no data that no
  subscription needs, as in Pulsar: a subscription added later starts at Latest and would never
  read it.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass
from datetime import datetime

from ..admin.stats import SegmentReport
from ..model.layout import SegmentLayout
from ..model.resources import RetentionSpec
from ..model.segment import SegmentInfo


@dataclass(frozen=True, slots=True)
class Verdict:
    prune: bool
    reason: str


def frontier(layout: SegmentLayout) -> tuple[SegmentInfo, ...]:
    """The sealed segments whose parents are all pruned already, oldest (lowest id) first."""
    return tuple(
        info
        for info in layout.segments.values()
        if not info.is_active and not any(p in layout.segments for p in info.parent_ids)
    )


def newer_bytes(layout: SegmentLayout, segment_id: int, sizes: Mapping[int, int]) -> int:
    """What the segments created after ``segment_id`` hold, of those whose size is known (a
    lower bound, so a decision that it fills the retention budget is sound)."""
    return sum(size for sid, size in sizes.items() if sid > segment_id and sid in layout.segments)


def decide(
    info: SegmentInfo,
    report: SegmentReport | None,
    declared: Collection[str],
    retention: RetentionSpec | None,
    now: datetime,
    newer: int | None = None,
) -> Verdict:
    """Whether the sealed segment ``info`` may be pruned; ``newer`` as from :func:`newer_bytes`
    (None when unknown)."""
    if info.is_active:
        return Verdict(False, "it is active")
    if report is None:
        return Verdict(False, "its broker did not report on it")
    subscriptions = report.subscriptions
    missing = sorted(set(declared) - set(subscriptions))
    if missing:
        return Verdict(False, f"declared subscriptions {', '.join(missing)} are not on it yet")
    undrained = sorted(name for name, sub in subscriptions.items() if not sub.drained)
    if undrained:
        return Verdict(False, f"subscriptions {', '.join(undrained)} are not drained")
    if subscriptions:
        return Verdict(True, f"drained for {', '.join(sorted(subscriptions))}")
    return _past_retention(info, retention, now, newer)


def _past_retention(
    info: SegmentInfo, retention: RetentionSpec | None, now: datetime, newer: int | None
) -> Verdict:
    max_age = retention.max_age_seconds if retention is not None else None
    max_size = retention.max_size_bytes if retention is not None else None
    if max_age is None and max_size is None:
        return Verdict(True, "no subscription and no retention")
    if max_age is not None and info.sealed_at is not None:
        age = (now - info.sealed_at).total_seconds()
        if age >= max_age:
            return Verdict(True, f"no subscription, sealed {age:.0f}s ago (retention {max_age}s)")
    if max_size is not None and newer is not None and newer >= max_size:
        return Verdict(
            True, f"no subscription, newer segments hold {newer} bytes (retention {max_size})"
        )
    return Verdict(False, "no subscription, within the retention")
