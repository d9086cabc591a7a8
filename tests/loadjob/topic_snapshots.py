"""Topics as the load job reads them, built in memory for its tests."""

from __future__ import annotations

from datetime import UTC, datetime

from scalable_topics.loadjob.topics import TopicSnapshot
from scalable_topics.model.autoscale_config import CLUSTER_DEFAULTS, AutoScaleConfig, Rates
from scalable_topics.model.layout import SegmentLayout

T0 = datetime(2026, 11, 26, 12, 0, tzinfo=UTC)

# Easy thresholds for hand-computed cases: split above 100 msg/s in, merge at or below 10.
SMALL = AutoScaleConfig(
    enabled=True,
    min_segments=1,
    max_segments=64,
    max_dag_depth=10,
    split_cooldown=60.0,
    merge_cooldown=60.0,
    merge_window=120.0,
    split_thresholds=Rates(100.0, 100.0, 100_000.0, 100_000.0),
    merge_thresholds=Rates(10.0, 10.0, 10_000.0, 10_000.0),
)


def topic(
    name: str,
    segments: int = 1,
    config: AutoScaleConfig = SMALL,
    consumers: dict[str, int] | None = None,
    namespace: str = "default",
    layout: SegmentLayout | None = None,
) -> TopicSnapshot:
    return TopicSnapshot(
        namespace=namespace,
        name=name,
        layout=layout or SegmentLayout.initial(segments, T0),
        config=config,
        consumers=consumers or {},
        last_split=None,
        last_merge=None,
        recommendation=None,
    )


__all__ = ["CLUSTER_DEFAULTS", "SMALL", "T0", "topic"]
