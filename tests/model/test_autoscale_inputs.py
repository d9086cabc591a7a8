"""The decision core's inputs as read from a topic and its Segment objects."""

from datetime import UTC, datetime, timedelta
from typing import Any

from scalable_topics.model.autoscale_config import CLUSTER_DEFAULTS, Rates
from scalable_topics.model.autoscale_inputs import autoscale_inputs
from scalable_topics.model.autoscale_policy import Merge, SegmentLoad, decide
from scalable_topics.model.layout import SegmentLayout
from scalable_topics.model.resources import ScalableTopic, Segment

T0 = datetime(2026, 1, 1, tzinfo=UTC)
NOW = T0 + timedelta(hours=1)


def topic(layout: SegmentLayout, **status: Any) -> ScalableTopic:
    return ScalableTopic.model_validate(
        {
            "metadata": {"name": "orders", "namespace": "default"},
            "status": {**layout.to_status(), **status},
        }
    )


def segment(segment_id: int, load: dict[str, Any] | None) -> Segment:
    return Segment.model_validate(
        {
            "metadata": {"name": f"orders-{segment_id}", "namespace": "default"},
            "spec": {
                "topic": "orders",
                "segmentId": segment_id,
                "hashRange": {"start": 0, "end": 1},
            },
            "status": {} if load is None else {"load": load},
        }
    )


def test_consumers_count_per_ordered_subscription_only() -> None:
    layout = SegmentLayout.initial(1, T0)
    consumers = [{"name": f"c{i}"} for i in range(3)]
    got = autoscale_inputs(
        topic(
            layout,
            subscriptions=[
                {"name": "stream", "type": "Stream", "consumers": consumers},
                {"name": "cp", "type": "Checkpoint", "consumers": consumers[:1]},
                {"name": "queue", "type": "Queue", "consumers": consumers},
            ],
        ),
        [],
        NOW,
    )
    assert dict(got.consumers) == {"stream": 3, "cp": 1}


def test_loads_of_active_segments_with_a_record_and_the_cooldowns_from_status() -> None:
    layout = SegmentLayout.initial(2, T0).split(1, T0)  # 1 sealed; 0, 2, 3 active
    split_at = NOW - timedelta(seconds=5)
    got = autoscale_inputs(
        topic(layout, autoScale={"lastSplitTime": split_at}),
        [
            segment(0, {"msgRateIn": 5.0, "byteRateOut": 7.0}),
            segment(1, {"msgRateIn": 99.0}),  # sealed: ignored
            segment(2, None),  # no record: no entry
        ],
        NOW,
    )
    assert dict(got.loads) == {0: SegmentLoad(Rates(5.0, 0.0, 0.0, 7.0))}
    assert (got.last_split, got.last_merge, got.now) == (split_at, None, NOW)


def test_the_merge_window_runs_from_cold_since_not_from_when_the_record_was_written() -> None:
    # Finding 4: a new owner rewrote both records a moment ago (sampledAt), keeping coldSince.
    layout = SegmentLayout.initial(2, T0)
    record = {"sampledAt": NOW - timedelta(seconds=1), "coldSince": NOW - timedelta(seconds=400)}
    got = autoscale_inputs(topic(layout), [segment(0, record), segment(1, record)], NOW)
    assert got.loads[0].cold_since == NOW - timedelta(seconds=400)
    assert isinstance(decide(CLUSTER_DEFAULTS, got), Merge)  # 400 s > the 300 s window
