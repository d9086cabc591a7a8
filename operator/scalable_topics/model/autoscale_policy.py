"""The autoscale decision core: given a topic's layout, load and consumers, split, merge or wait.

Pure and deterministic: the caller gathers the inputs (load records, consumer counts, the
times of the last split and merge) and dispatches the decision to the split/merge protocols.

Splits are fast, merges are lazy. The split pass runs first: a subscription with more
consumers than active segments splits the widest segment (so another consumer gets work),
else the segment furthest over a split threshold splits; both wait out the split cooldown and
stop at ``max_segments``. Only when nothing splits does the merge pass look for an adjacent
pair of segments that have both been cold for the merge window and whose summed rates stay
below every merge threshold, gated by the merge cooldown, ``min_segments``, the DAG depth cap
and the consumer counts (a merge never leaves a consumer without a segment, which would only
split again).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from itertools import pairwise
from types import MappingProxyType

from .autoscale_config import AutoScaleConfig, Rates
from .layout import LayoutChange, SegmentLayout
from .segment import SegmentInfo


@dataclass(frozen=True, slots=True)
class SegmentLoad:
    """One active segment's latest load report.

    ``cold_since``: since when every rate has been at or below its merge threshold, or None
    when it is not cold. It comes from another machine's clock, so it may lie slightly in the
    future; that counts as cold for no time yet.
    """

    rates: Rates
    cold_since: datetime | None = None

    def __post_init__(self) -> None:
        for rate, value in self.rates.by_wire_name():
            if not (value >= 0 and math.isfinite(value)):
                raise ValueError(f"segment load {rate} must be a finite number >= 0, not {value}")


@dataclass(frozen=True)
class AutoScaleInputs:
    """What ``decide`` reads. ``loads`` names active segments; one without a report is neither
    hot nor cold, and reports of segments no longer active are ignored. ``consumers`` counts
    the consumers of each Stream or Checkpoint subscription."""

    layout: SegmentLayout
    loads: Mapping[int, SegmentLoad]
    consumers: Mapping[str, int]
    last_split: datetime | None
    last_merge: datetime | None
    now: datetime

    def __post_init__(self) -> None:
        bad = {name: count for name, count in self.consumers.items() if count < 0}
        if bad:
            raise ValueError(f"consumer counts must not be negative: {bad}")
        object.__setattr__(self, "loads", MappingProxyType(dict(self.loads)))
        object.__setattr__(self, "consumers", MappingProxyType(dict(self.consumers)))


@dataclass(frozen=True, slots=True)
class Split:
    segment_id: int
    rule: str
    reason: str

    def plan(self, layout: SegmentLayout) -> LayoutChange:
        return layout.plan_split(self.segment_id)


@dataclass(frozen=True, slots=True)
class Merge:
    """``first_id`` holds the lower hash range."""

    first_id: int
    second_id: int
    rule: str
    reason: str

    def plan(self, layout: SegmentLayout) -> LayoutChange:
        return layout.plan_merge(self.first_id, self.second_id)


@dataclass(frozen=True, slots=True)
class NoAction:
    reason: str


AutoScaleDecision = Split | Merge | NoAction


def _elapsed(since: datetime | None, now: datetime) -> float | None:
    return None if since is None else (now - since).total_seconds()


def _cooling(last: datetime | None, cooldown: float, now: datetime) -> float | None:
    """Seconds since ``last`` while still inside ``cooldown``; None once it is over."""
    elapsed = _elapsed(last, now)
    return elapsed if elapsed is not None and elapsed < cooldown else None


def decide(config: AutoScaleConfig, inputs: AutoScaleInputs) -> AutoScaleDecision:
    """The one change the topic should make now, or why it should make none."""
    if not config.enabled:
        return NoAction("autoscale is disabled for this topic")
    split, split_note = _split_pass(config, inputs)
    if split is not None:
        return split
    merge, merge_note = _merge_pass(config, inputs)
    if merge is not None:
        return merge
    return NoAction(f"{split_note}; {merge_note}")


# -- the split pass ---------------------------------------------------------------------------


def _split_pass(config: AutoScaleConfig, inputs: AutoScaleInputs) -> tuple[Split | None, str]:
    active = inputs.layout.active
    wanted = _consumer_split(active, inputs) or _traffic_split(config, active, inputs)
    if wanted is None:
        return None, "no segment needs a split"
    if len(active) >= config.max_segments:
        return None, (
            f"segment {wanted.segment_id} would split ({wanted.rule}) but the topic has "
            f"{len(active)} active segments, the maximum {config.max_segments}"
        )
    cooling = _cooling(inputs.last_split, config.split_cooldown, inputs.now)
    if cooling is not None:
        return None, (
            f"segment {wanted.segment_id} would split ({wanted.rule}) but the last split was "
            f"{cooling:g} s ago, inside the {config.split_cooldown:g} s split cooldown"
        )
    return wanted, ""


def _consumer_split(active: tuple[SegmentInfo, ...], inputs: AutoScaleInputs) -> Split | None:
    if not inputs.consumers:
        return None
    # The subscription with the most consumers; ties by name so the reason is stable.
    name, count = min(inputs.consumers.items(), key=lambda item: (-item[1], item[0]))
    if count <= len(active):
        return None
    splittable = [s for s in active if s.hash_range.can_split()]
    if not splittable:
        return None
    widest = min(splittable, key=lambda s: (-s.hash_range.size, s.segment_id))
    return Split(
        widest.segment_id,
        "consumers",
        f"subscription {name!r} has {count} consumers for {len(active)} active segments; "
        f"segment {widest.segment_id} has the widest range ({widest.hash_range.size} hashes)",
    )


def _traffic_split(
    config: AutoScaleConfig, active: tuple[SegmentInfo, ...], inputs: AutoScaleInputs
) -> Split | None:
    thresholds = dict(config.split_thresholds.by_wire_name())
    best: tuple[float, int, str, float] | None = None  # (ratio, id, rate, value)
    for segment in active:
        load = inputs.loads.get(segment.segment_id)
        if load is None or not segment.hash_range.can_split():
            continue
        for rate, value in load.rates.by_wire_name():
            ratio = value / thresholds[rate]  # thresholds are > 0: validated
            # Strictly higher ratio wins, so ties keep the lowest id and the first rate.
            if ratio > 1 and (best is None or ratio > best[0]):
                best = (ratio, segment.segment_id, rate, value)
    if best is None:
        return None
    ratio, segment_id, rate, value = best
    return Split(
        segment_id,
        rate,
        f"segment {segment_id} has {rate} {value:g}/s, {ratio:.2f}x the split threshold "
        f"{thresholds[rate]:g}/s",
    )


# -- the merge pass ---------------------------------------------------------------------------


def _merge_pass(config: AutoScaleConfig, inputs: AutoScaleInputs) -> tuple[Merge | None, str]:
    layout, now = inputs.layout, inputs.now
    active = layout.active
    if len(active) - 1 < config.min_segments:
        return None, f"{len(active)} active segments, a merge would go below the minimum " + str(
            config.min_segments
        )
    most_consumers = max(inputs.consumers.values(), default=0)
    if len(active) - 1 < most_consumers:
        return None, (
            f"a subscription has {most_consumers} consumers, a merge would leave one without "
            f"a segment"
        )
    cooling = _cooling(inputs.last_merge, config.merge_cooldown, now)
    if cooling is not None:
        return None, (
            f"the last merge was {cooling:g} s ago, inside the {config.merge_cooldown:g} s "
            f"merge cooldown"
        )
    limits = config.merge_thresholds.by_wire_name()
    best: tuple[datetime, int, int, Merge] | None = None
    for low, high in pairwise(active):
        if not low.hash_range.is_adjacent(high.hash_range):
            continue  # cannot happen in a valid layout; never merge across a gap
        low_load, high_load = inputs.loads.get(low.segment_id), inputs.loads.get(high.segment_id)
        if low_load is None or high_load is None:
            continue
        if low_load.cold_since is None or high_load.cold_since is None:
            continue
        # The pair has been cold since the later of the two.
        cold_since = max(low_load.cold_since, high_load.cold_since)
        cold_for = (now - cold_since).total_seconds()
        if cold_for < config.merge_window:
            continue
        combined = low_load.rates + high_load.rates
        # Strictly below: a merge threshold of 0 turns merging off, as no load is below it.
        if not all(
            value < limit
            for (_, value), (_, limit) in zip(combined.by_wire_name(), limits, strict=True)
        ):
            continue
        depth = 1 + max(layout.merge_depth(low.segment_id), layout.merge_depth(high.segment_id))
        if depth > config.max_dag_depth:
            continue
        ids = sorted((low.segment_id, high.segment_id))
        if best is None or (cold_since, ids[0], ids[1]) < best[:3]:
            merge = Merge(
                low.segment_id,
                high.segment_id,
                "coldPair",
                f"segments {low.segment_id} and {high.segment_id} are adjacent and have been "
                f"cold for {cold_for:g} s (window {config.merge_window:g} s); together they "
                f"carry {_describe(combined)}, below every merge threshold; the merged segment "
                f"would be {depth} merge(s) deep (max {config.max_dag_depth})",
            )
            best = (cold_since, ids[0], ids[1], merge)
    if best is None:
        return None, "no adjacent pair is cold enough to merge"
    return best[3], ""


def _describe(rates: Rates) -> str:
    return ", ".join(f"{rate} {value:g}/s" for rate, value in rates.by_wire_name())


# -- re-checking a decision made elsewhere ------------------------------------------------------


def admissible(
    config: AutoScaleConfig, inputs: AutoScaleInputs, decision: Split | Merge
) -> str | None:
    """Why ``decision`` (made elsewhere, on an older view: the load job's) must not be carried
    out on the live layout now, or None when every gate lets it through. The gates are
    ``decide``'s, without the load rules: which segment is hot or cold is the job's to judge,
    whether the layout still allows the change is not."""
    if not config.enabled:
        return "autoscale is disabled for this topic"
    layout, active = inputs.layout, inputs.layout.active
    active_ids = {s.segment_id for s in active}
    if isinstance(decision, Split):
        if decision.segment_id not in active_ids:
            return f"segment {decision.segment_id} is not active"
        if not layout.get(decision.segment_id).hash_range.can_split():
            return f"segment {decision.segment_id} covers one hash and cannot split"
        if len(active) >= config.max_segments:
            return f"the topic has {len(active)} active segments, the maximum {config.max_segments}"
        cooling = _cooling(inputs.last_split, config.split_cooldown, inputs.now)
        if cooling is not None:
            return (
                f"the last split was {cooling:g} s ago, inside the {config.split_cooldown:g} s "
                "split cooldown"
            )
        return None
    first, second = decision.first_id, decision.second_id
    for segment_id in (first, second):
        if segment_id not in active_ids:
            return f"segment {segment_id} is not active"
    if not layout.get(first).hash_range.is_adjacent(layout.get(second).hash_range):
        return f"segments {first} and {second} are not adjacent"
    if len(active) - 1 < config.min_segments:
        return (
            f"{len(active)} active segments, a merge would go below the minimum "
            f"{config.min_segments}"
        )
    most_consumers = max(inputs.consumers.values(), default=0)
    if len(active) - 1 < most_consumers:
        return (
            f"a subscription has {most_consumers} consumers, a merge would leave one without a "
            "segment"
        )
    cooling = _cooling(inputs.last_merge, config.merge_cooldown, inputs.now)
    if cooling is not None:
        return (
            f"the last merge was {cooling:g} s ago, inside the {config.merge_cooldown:g} s "
            "merge cooldown"
        )
    depth = 1 + max(layout.merge_depth(first), layout.merge_depth(second))
    if depth > config.max_dag_depth:
        return (
            f"the merged segment would be {depth} merge(s) deep, over the maximum "
            f"{config.max_dag_depth}"
        )
    return None
