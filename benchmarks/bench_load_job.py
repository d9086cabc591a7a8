"""The load job (scalable_topics.loadjob) over a large load history, on local[2].

    python benchmarks/bench_load_job.py [--topics 1000] [--segments 16] [--minutes 60]

Writes a history of 10-second samples (``--topics`` x ``--segments`` segments for
``--minutes``, in the brokers' Parquet layout: 4 brokers, one file each per minute), creates
the topics in an embedded store, and times whole runs of the job: the first on a fresh
SparkSession (what the scheduled job in a cluster pays every run, JVM start aside), then a
second on the same session (standalone's loop). Prints rows, seconds and rows per second per
run, the time to start Spark, and the recommendations written. Figures only.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from scalable_topics.loadjob.run import RunSettings, run_once
from scalable_topics.loadjob.session import spark_session
from scalable_topics.model.layout import SegmentLayout
from scalable_topics.model.rate_windows import DEFAULT_WINDOWS
from scalable_topics.model.resources import ScalableTopic
from scalable_topics.store import EmbeddedStore

SAMPLE_SECONDS = 10
BROKERS = 4
NOW = datetime(2026, 11, 26, 12, 0, tzinfo=UTC)  # midday: one date partition


def write_history(root: Path, topics: int, segments: int, minutes: int) -> int:
    """The history, one file per broker per minute; returns the rows written."""
    rng = random.Random(18)
    # Each topic's level: most quiet (merge candidates), some busy, a few over the split
    # threshold (10,000 msg/s by default), each sample within 20 % of it.
    levels = rng.choices([500.0, 5_000.0, 14_000.0], weights=[60, 35, 5], k=topics)
    directory = root / f"date={NOW.date().isoformat()}"
    directory.mkdir(parents=True)
    first = NOW - timedelta(minutes=minutes)
    steps = 60 // SAMPLE_SECONDS
    rows = 0
    for minute in range(minutes):
        for broker in range(BROKERS):
            # This broker's segments: every BROKERS-th of each topic.
            mine = [(t, s) for t in range(topics) for s in range(broker, segments, BROKERS)]
            count = len(mine) * steps
            starts = [
                first + timedelta(minutes=minute, seconds=step * SAMPLE_SECONDS)
                for step in range(steps)
                for _ in mine
            ]
            rate_in = [levels[t] * rng.uniform(0.8, 1.2) for _ in range(steps) for t, _ in mine]
            table = pa.table(
                {
                    "namespace": pa.array(["default"] * count, pa.string()),
                    "topic": pa.array([f"t{t:05d}" for _ in range(steps) for t, _ in mine]),
                    "segment_id": pa.array([s for _ in range(steps) for _, s in mine], pa.int64()),
                    "broker": pa.array([f"broker-{broker}"] * count, pa.string()),
                    "start": pa.array(starts, pa.timestamp("us", tz="UTC")),
                    "end": pa.array(
                        [s + timedelta(seconds=SAMPLE_SECONDS) for s in starts],
                        pa.timestamp("us", tz="UTC"),
                    ),
                    "msg_rate_in": pa.array(rate_in, pa.float64()),
                    "msg_rate_out": pa.array(rate_in, pa.float64()),
                    "byte_rate_in": pa.array([100 * r for r in rate_in], pa.float64()),
                    "byte_rate_out": pa.array([100 * r for r in rate_in], pa.float64()),
                }
            )
            first_ms = int((first + timedelta(minutes=minute)).timestamp() * 1000)
            pq.write_table(table, directory / f"broker-{broker}-{first_ms}-{minute}.parquet")
            rows += table.num_rows
    return rows


async def create_topics(store: EmbeddedStore, topics: int, segments: int) -> None:
    layout = SegmentLayout.initial(segments, NOW - timedelta(hours=2)).to_status()
    for i in range(topics):
        name = f"t{i:05d}"
        await store.create(
            {
                "apiVersion": "scalabletopics.dev/v1alpha1",
                "kind": "ScalableTopic",
                "metadata": {"name": name, "namespace": "default"},
                "spec": {"initialSegments": segments},
            }
        )
        await store.patch_status(ScalableTopic.KIND, "default", name, {"status": layout})


async def bench(args: argparse.Namespace, root: Path) -> None:
    started = time.perf_counter()
    rows = write_history(root / "history", args.topics, args.segments, args.minutes)
    files = len(list((root / "history").rglob("*.parquet")))
    size = sum(p.stat().st_size for p in (root / "history").rglob("*.parquet"))
    print(
        f"history: {rows:,} rows ({args.topics} topics x {args.segments} segments x "
        f"{args.minutes} min of {SAMPLE_SECONDS} s samples), {files} files, "
        f"{size / 2**20:.0f} MiB, written in {time.perf_counter() - started:.1f} s"
    )
    # NORMAL: the store's commits are not what is measured here.
    async with await EmbeddedStore.open(root / "store.db", synchronous="NORMAL") as store:
        started = time.perf_counter()
        await create_topics(store, args.topics, args.segments)
        print(f"store: {args.topics} topics created in {time.perf_counter() - started:.1f} s")
        started = time.perf_counter()
        spark = spark_session("local[2]", app_name="bench-load-job")
        print(f"spark: session started in {time.perf_counter() - started:.1f} s (local[2])")
        settings = RunSettings(
            str(root / "history"), DEFAULT_WINDOWS, timedelta(minutes=3), "scalable-topics"
        )
        try:
            for label, now in (("first run", NOW), ("second run", NOW + timedelta(seconds=30))):
                report = await run_once(store, spark, settings, now=now)
                print(
                    f"{label}: {report.rows:,} rows in the 20 min window ({report.segments:,} "
                    f"segments, {report.topics} topics) in {report.seconds:.1f} s: "
                    f"{report.rows / report.seconds:,.0f} rows/s (Spark {report.spark_seconds:.1f} s: "
                    f"{rows / report.spark_seconds:,.0f}/s of the {rows:,} rows in the partition read); "
                    f"{report.written} recommendations written"
                )
        finally:
            spark.stop()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--topics", type=int, default=1000)
    parser.add_argument("--segments", type=int, default=16)
    parser.add_argument("--minutes", type=int, default=60)
    args = parser.parse_args()
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    with tempfile.TemporaryDirectory(prefix="bench-load-job-") as directory:
        asyncio.run(bench(args, Path(directory)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
