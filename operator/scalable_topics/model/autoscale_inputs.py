"""The decision core's inputs, read from a topic and its Segment objects as stored.

The merge window is measured from each record's ``coldSince``, which the brokers carry over
while a segment stays cold (also across a move to another broker), never from when a record
was written: a new owner rewriting an identical record must not restart it.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime

from .autoscale_config import Rates
from .autoscale_policy import AutoScaleInputs, SegmentLoad
from .layout import SegmentLayout
from .resources import ScalableTopic, Segment, SubscriptionType

# Subscriptions whose consumers each need a segment of their own.
ORDERED_TYPES = frozenset({SubscriptionType.STREAM, SubscriptionType.CHECKPOINT})


def consumer_counts(topic: ScalableTopic) -> dict[str, int]:
    """Registered consumers per Stream or Checkpoint subscription."""
    return {s.name: len(s.consumers) for s in topic.status.subscriptions if s.type in ORDERED_TYPES}


def segment_loads(layout: SegmentLayout, segments: Iterable[Segment]) -> dict[int, SegmentLoad]:
    """The latest load record of each active segment that has one."""
    active = {s.segment_id for s in layout.active}
    loads = {}
    for segment in segments:
        load = segment.status.load
        if load is None or segment.spec.segment_id not in active:
            continue
        rates = Rates(load.msg_rate_in, load.msg_rate_out, load.byte_rate_in, load.byte_rate_out)
        loads[segment.spec.segment_id] = SegmentLoad(rates, cold_since=load.cold_since)
    return loads


def autoscale_inputs(
    topic: ScalableTopic, segments: Iterable[Segment], now: datetime
) -> AutoScaleInputs:
    """What ``decide`` reads about ``topic`` at ``now``; the topic must have a layout."""
    layout = SegmentLayout.from_status(topic.status.to_wire())
    status = topic.status.auto_scale
    return AutoScaleInputs(
        layout=layout,
        loads=segment_loads(layout, segments),
        consumers=consumer_counts(topic),
        last_split=status.last_split_time if status else None,
        last_merge=status.last_merge_time if status else None,
        now=now,
    )
