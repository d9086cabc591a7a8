"""One run of the load job: read the topics, compute the windows in Spark, decide per topic,
write the recommendations that changed; and the loop that repeats it on one SparkSession."""

from __future__ import annotations

import asyncio
import logging
import time
from collections import defaultdict
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from pyspark.sql import SparkSession

from ..model.autoscale_config import AutoScaleConfig
from ..model.rate_windows import Window, longest
from ..store import NotFound, Store
from .evaluate import evaluate_topic
from .history import TopicThresholds, read_history, windowed_rates
from .policy_input import SegmentWindows
from .recommendations import needs_write, status_patch
from .topics import SettingsInvalid, read_cluster_config, read_topics

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class RunSettings:
    history: str  # the load history's location: a directory or a URI Spark reads
    windows: tuple[Window, ...]
    ttl: timedelta
    system_namespace: str


@dataclass(frozen=True, slots=True)
class RunReport:
    rows: int  # history rows inside the longest window
    segments: int  # segments with rows there
    topics: int  # topics evaluated (autoscale on, laid out)
    unseen: int  # of which no recommendation: an active segment has no history yet
    written: int  # recommendations written
    seconds: float
    spark_seconds: float  # of which reading the history and computing the windows

    def line(self) -> str:
        return (
            f"load job run: {self.rows} rows, {self.segments} segments, {self.topics} topics "
            f"({self.unseen} without history for every active segment), "
            f"{self.written} recommendations written, {self.seconds:.1f} s "
            f"(Spark {self.spark_seconds:.1f} s)"
        )


async def run_once(
    store: Store, spark: SparkSession, settings: RunSettings, now: datetime | None = None
) -> RunReport:
    started = time.monotonic()
    now = now or datetime.now(UTC)
    cluster: AutoScaleConfig = await read_cluster_config(store, settings.system_namespace)
    topics = await read_topics(store, cluster)
    thresholds = [TopicThresholds(t.namespace, t.name, t.config.merge_thresholds) for t in topics]

    def compute() -> tuple[int, list[SegmentWindows]]:
        if not topics:
            return 0, []  # nothing to recommend for: no need to read the history
        history = read_history(spark, settings.history, now, longest(settings.windows))
        found = windowed_rates(spark, history, thresholds, settings.windows, now)
        return found.rows, found.segments

    # Spark blocks: off the event loop, so the store's clients and signals stay served.
    computing = time.monotonic()
    rows, segments = await asyncio.to_thread(compute)
    spark_seconds = time.monotonic() - computing
    by_topic: defaultdict[tuple[str, str], dict[int, SegmentWindows]] = defaultdict(dict)
    for segment in segments:
        by_topic[segment.namespace, segment.topic][segment.segment_id] = segment
    written = unseen = 0
    for topic in topics:
        rec = evaluate_topic(topic, by_topic[topic.key], settings.windows, now, settings.ttl)
        if rec is None:
            unseen += 1
            continue
        if not needs_write(topic.recommendation, rec, now):
            continue
        try:
            await store.patch_status(
                "ScalableTopic", topic.namespace, topic.name, status_patch(rec)
            )
        except NotFound:
            continue  # deleted since it was read
        written += 1
    return RunReport(
        rows,
        len(segments),
        len(topics),
        unseen,
        written,
        time.monotonic() - started,
        spark_seconds,
    )


async def run_every(store: Store, spark: SparkSession, settings: RunSettings, every: float) -> None:
    """A run every ``every`` seconds (from the start of one to the next) until cancelled. A
    failed run is logged and the next one goes ahead."""
    while True:
        started = time.monotonic()
        try:
            log.info("%s", (await run_once(store, spark, settings)).line())
        except SettingsInvalid as error:
            log.error("load job run: no recommendations: %s", error)
        except Exception:
            log.exception("load job run failed; the next one is in %g s", every)
        await asyncio.sleep(max(0.0, every - (time.monotonic() - started)))
