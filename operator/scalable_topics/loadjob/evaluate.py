"""One topic's recommendation from its segments' windowed rates (pure: no Spark here)."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timedelta

from ..model.autoscale_policy import AutoScaleDecision, AutoScaleInputs, NoAction, decide
from ..model.rate_windows import Window
from ..model.resources import AutoScaleRecommendation
from .policy_input import SegmentWindows, WindowedLoad, windowed_load
from .recommendations import recommendation
from .topics import TopicSnapshot


def topic_loads(
    topic: TopicSnapshot, segments: Mapping[int, SegmentWindows], windows: tuple[Window, ...]
) -> dict[int, WindowedLoad]:
    """The policy input of each active segment the history covers; rows of sealed or unknown
    segments are ignored."""
    loads: dict[int, WindowedLoad] = {}
    for info in topic.layout.active:
        found = segments.get(info.segment_id)
        load = None if found is None else windowed_load(topic.config, windows, found)
        if load is not None:
            loads[info.segment_id] = load
    return loads


def topic_decision(
    topic: TopicSnapshot, loads: Mapping[int, WindowedLoad], now: datetime
) -> AutoScaleDecision:
    return decide(
        topic.config,
        AutoScaleInputs(
            layout=topic.layout,
            loads={segment_id: load.load for segment_id, load in loads.items()},
            consumers=topic.consumers,
            last_split=topic.last_split,
            last_merge=topic.last_merge,
            now=now,
        ),
    )


def evaluate_topic(
    topic: TopicSnapshot,
    segments: Mapping[int, SegmentWindows],
    windows: tuple[Window, ...],
    now: datetime,
    ttl: timedelta,
) -> AutoScaleRecommendation | None:
    """The topic's recommendation, or None when the history cannot support one: "no action"
    while an active segment has no rows in the longest window (a segment made since the
    brokers last wrote their history) says nothing of that segment, and a fresh recommendation
    is what the controller goes by, so it would hold back the controller's own evaluation of
    the segment's load record. A split or merge found on the rest still stands."""
    loads = topic_loads(topic, segments, windows)
    decision = topic_decision(topic, loads, now)
    if isinstance(decision, NoAction) and len(loads) < len(topic.layout.active):
        return None
    return recommendation(decision, loads, windows, topic.layout.epoch, now, ttl)
