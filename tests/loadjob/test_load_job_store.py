"""A load job run against a real embedded store: topics and the cluster's settings read from
it, recommendations written to it and read back, rewritten only when they change."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from history_files import Sample, write_history
from pyspark.sql import SparkSession
from topic_snapshots import T0

from scalable_topics.loadjob.run import RunSettings, run_once
from scalable_topics.loadjob.topics import SettingsInvalid
from scalable_topics.model.autoscale_config import CLUSTER_CONFIGMAP, CLUSTER_CONFIGMAP_KEY
from scalable_topics.model.layout import SegmentLayout
from scalable_topics.model.rate_windows import parse_windows
from scalable_topics.model.resources import AutoScaleRecommendation, ScalableTopic
from scalable_topics.store import EmbeddedStore

SYSTEM = "scalable-topics"
TTL = timedelta(seconds=60)
# The cluster's settings: split above 100 msg/s in, merge at or below 10.
CLUSTER = """
splitThresholds: {msgRateIn: 100, msgRateOut: 100}
mergeThresholds: {msgRateIn: 10, msgRateOut: 10}
mergeWindowSeconds: 60
"""


def at(seconds: float) -> Any:
    return T0 + timedelta(seconds=seconds)


async def create_topic(
    store: EmbeddedStore, name: str, segments: int, auto_scale: dict[str, Any] | None = None
) -> None:
    spec: dict[str, Any] = {"initialSegments": segments}
    if auto_scale is not None:
        spec["autoScale"] = auto_scale
    await store.create(
        {
            "apiVersion": "scalabletopics.dev/v1alpha1",
            "kind": "ScalableTopic",
            "metadata": {"name": name, "namespace": "default"},
            "spec": spec,
        }
    )
    layout = SegmentLayout.initial(segments, T0 - timedelta(hours=1))
    await store.patch_status(ScalableTopic.KIND, "default", name, {"status": layout.to_status()})


async def set_cluster_settings(store: EmbeddedStore, text: str) -> None:
    await store.create(
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": CLUSTER_CONFIGMAP, "namespace": SYSTEM},
            "data": {CLUSTER_CONFIGMAP_KEY: text},
        }
    )


async def recommendation(store: EmbeddedStore, name: str) -> AutoScaleRecommendation | None:
    topic = ScalableTopic.model_validate(await store.get(ScalableTopic.KIND, "default", name))
    auto = topic.status.auto_scale
    return None if auto is None else auto.recommendation


async def test_recommendations_are_written_to_the_store_and_read_back(
    spark: SparkSession, store: EmbeddedStore, tmp_path: Path
) -> None:
    await set_cluster_settings(store, CLUSTER)
    await create_topic(store, "hot", 2)
    await create_topic(store, "cold", 2)
    await create_topic(store, "off", 1, {"enabled": False})
    await create_topic(store, "own", 1, {"splitThresholds": {"msgRateIn": 1000}})
    history = tmp_path / "history"
    write_history(
        history,
        [
            Sample("hot", 1, at(-60), at(-20), msg_rate_in=50.0),
            Sample("hot", 1, at(-20), at(0), msg_rate_in=250.0),  # a burst in the 20 s window
            Sample("hot", 0, at(-60), at(0), msg_rate_in=20.0),
            *(Sample("cold", i, at(-100), at(0), msg_rate_in=1.0) for i in (0, 1)),
            Sample("off", 0, at(-60), at(0), msg_rate_in=9000.0),
            Sample("own", 0, at(-60), at(0), msg_rate_in=500.0),  # under its own threshold
        ],
    )
    settings = RunSettings(str(history), parse_windows("20s,40s,160s"), TTL, SYSTEM)
    report = await run_once(store, spark, settings, now=T0)
    assert (report.rows, report.segments, report.topics, report.written) == (6, 5, 3, 3)

    hot = await recommendation(store, "hot")
    assert hot is not None
    assert (hot.decision, hot.segment_ids, hot.rule, hot.window) == (
        "Split",
        [1],
        "msgRateIn",
        "20s",
    )
    assert (hot.layout_epoch, hot.computed_at, hot.expires_at, hot.source) == (
        0,
        T0,
        T0 + TTL,
        "spark",
    )
    cold = await recommendation(store, "cold")
    assert cold is not None
    assert (cold.decision, cold.segment_ids, cold.rule, cold.window) == (
        "Merge",
        [0, 1],
        "coldPair",
        "160s",
    )
    own = await recommendation(store, "own")
    assert own is not None and own.decision == "NoAction"
    assert own.rule is None and own.segment_ids == []
    assert await recommendation(store, "off") is None

    # The next run, before half the ttl: nothing changed, nothing written.
    again = await run_once(store, spark, settings, now=T0 + TTL / 2 - timedelta(seconds=1))
    assert again.written == 0
    assert await recommendation(store, "hot") == hot
    # At half the ttl every recommendation is renewed.
    renewed = await run_once(store, spark, settings, now=T0 + TTL / 2)
    assert renewed.written == 3
    hot_renewed = await recommendation(store, "hot")
    assert hot_renewed is not None and hot_renewed.computed_at == T0 + TTL / 2


async def test_invalid_cluster_settings_fail_the_run_naming_the_problem(
    spark: SparkSession, store: EmbeddedStore, tmp_path: Path
) -> None:
    await set_cluster_settings(store, "splitThresholds: {msgRateIn: -5}")
    await create_topic(store, "t", 1)
    settings = RunSettings(str(tmp_path), parse_windows("20s"), TTL, SYSTEM)
    with pytest.raises(
        SettingsInvalid, match="ConfigMap scalable-topics/scalable-topics-autoscale"
    ):
        await run_once(store, spark, settings, now=T0)
    assert await recommendation(store, "t") is None
