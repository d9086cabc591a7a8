"""What the broker's load reporter costs the store at a steady load (broker/load_reporter.py).

    python benchmarks/bench_load_reporter.py [--segments 1000] [--minutes 30] [--jitter J]...

Segments on one topic carry a steady load (10 % to 70 % of the default split threshold, or
idle) with each interval's rate drawn within +-J of it (default: 0.1, then 0.2); the reporter samples them every
10 s of simulated time against an embedded store, and writes each load record only on a
material change. Prints: store writes per segment per minute (the first record of each
segment included, and without it), the history rows buffered per segment per minute, and the
reporter's CPU time per sample; then how long writing one flush of the history takes (one
minute of every segment's samples, as one Parquet file). Figures only.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from scalable_topics.broker.load import SegmentLoad
from scalable_topics.broker.load_history_files import HistoryFiles, open_location
from scalable_topics.broker.load_reporter import LoadReporter
from scalable_topics.broker.load_row import LoadRow
from scalable_topics.broker.segment import SegmentKey
from scalable_topics.model.clock import ManualClock
from scalable_topics.model.hash_range import HashRange
from scalable_topics.model.resources import API_VERSION, TOPIC_LABEL, Segment, segment_object_name
from scalable_topics.model.segment import descriptor
from scalable_topics.store import EmbeddedStore
from scalable_topics.store.cluster_autoscale import ClusterAutoScale
from scalable_topics.store.informers import Informers

SYSTEM = "scalable-topics"
NS, TOPIC = "bench", "steady"
INTERVAL = 10.0
T0 = datetime(2026, 1, 1, tzinfo=UTC)


class Steady:
    """A hosted segment as the reporter reads it, with a steady load of its own."""

    def __init__(self, segment_id: int, rate: float, clock: ManualClock) -> None:
        self.key = SegmentKey(NS, TOPIC, segment_id)
        self.sealed = False
        self.load = SegmentLoad(60.0, clock.monotonic)
        self.rate = rate
        width = 0x10000 // 4096
        self.meta = type("Meta", (), {})()
        self.meta.descriptor = descriptor(
            segment_id, HashRange(segment_id * width, segment_id * width + width - 1)
        )


class Rows:
    def __init__(self) -> None:
        self.count = 0

    def append(self, row: LoadRow) -> None:
        self.count += 1


def segment_object(segment: Steady) -> dict[str, Any]:
    name = segment_object_name(TOPIC, segment.meta.descriptor)
    start, end = (int(part, 16) for part in segment.meta.descriptor.split("-")[:2])
    return {
        "apiVersion": API_VERSION,
        "kind": Segment.KIND,
        "metadata": {"name": name, "namespace": NS, "labels": {TOPIC_LABEL: TOPIC}},
        "spec": {
            "topic": TOPIC,
            "segmentId": segment.key.segment_id,
            "hashRange": {"start": start, "end": end},
            "parents": [],
        },
    }


async def run(segments: int, minutes: float, jitter: float) -> None:
    assert segments <= 4096, "at most 4096 segments of 16 hashes"
    clock = ManualClock(T0)
    chance = random.Random(18)
    # Idle, cold, between the thresholds and near the split threshold (msg/s; 100 B each).
    levels = [0.0, 500.0, 1_000.0, 3_000.0, 5_000.0, 7_000.0]
    hosted = [Steady(i, chance.choice(levels), clock) for i in range(segments)]
    with tempfile.TemporaryDirectory() as root:
        async with await EmbeddedStore.open(Path(root) / "store.db", synchronous="OFF") as store:
            for segment in hosted:
                await store.create(segment_object(segment))
            informers = Informers(store, SYSTEM)
            informers.start()
            await informers.wait_synced()
            try:
                rows = Rows()
                reporter = LoadReporter(
                    store,
                    informers,
                    ClusterAutoScale(informers.configmaps, SYSTEM),
                    lambda: hosted,
                    "bench-0",
                    rows,
                    monotonic=clock.monotonic,
                    now=clock.now,
                )
                cycles = int(minutes * 60 / INTERVAL)
                await reporter.cycle()
                cpu = 0.0
                first_writes = 0
                for cycle in range(cycles):
                    for segment in hosted:
                        drawn = segment.rate * (1 + chance.uniform(-jitter, jitter))
                        messages = round(drawn * INTERVAL)
                        segment.load.produced(messages, messages * 100)
                        segment.load.dispatched(messages, messages * 100)
                    clock.advance(INTERVAL)
                    started = time.process_time()
                    await reporter.cycle()
                    cpu += time.process_time() - started
                    if cycle == 0:
                        first_writes = reporter.record_writes
            finally:
                await informers.stop()
    per_minute = reporter.record_writes / segments / minutes
    steady = (reporter.record_writes - first_writes) / segments / minutes
    print(
        f"load reporter: {segments} segments, {minutes:g} min at a {INTERVAL:g} s interval, "
        f"rates within +-{jitter:.0%} of a steady level, materiality 0.25"
    )
    print(f"  store writes per segment per minute: {per_minute:.4f} (first records included)")
    print(f"  store writes per segment per minute after the first record: {steady:.4f}")
    print(f"  history rows per segment per minute: {rows.count / segments / minutes:.1f}")
    print(f"  reporter CPU per sample: {cpu / max(reporter.samples, 1) * 1e6:.1f} us")


def flush_cost(segments: int) -> None:
    chance = random.Random(1)
    rows = []
    for k in range(6):  # six 10 s samples a minute, each ending at its own microsecond
        for i in range(segments):
            end = T0 + timedelta(seconds=10 * (k + 1) + chance.random())
            rates = [chance.uniform(0, 10_000) for _ in range(2)]
            rows.append(
                LoadRow(
                    NS,
                    TOPIC,
                    i,
                    "bench-0",
                    end - timedelta(seconds=10),
                    end,
                    rates[0],
                    rates[1],
                    rates[0] * 100,
                    rates[1] * 100,
                )
            )
    with tempfile.TemporaryDirectory() as root:
        files = HistoryFiles(*open_location(root), "bench-0")
        files.prepare()
        started = time.perf_counter()
        [path] = files.write(rows)
        seconds = time.perf_counter() - started
        size = Path(path).stat().st_size
    print(
        f"load history: one flush of {len(rows)} rows ({segments} segments x 1 min) in "
        f"{seconds * 1000:.1f} ms ({len(rows) / seconds:,.0f} rows/s), {size / len(rows):.1f} "
        "bytes a row on disk"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--segments", type=int, default=1000)
    parser.add_argument("--minutes", type=float, default=30.0)
    parser.add_argument("--jitter", type=float, action="append")
    args = parser.parse_args()
    for jitter in args.jitter or [0.1, 0.2]:
        asyncio.run(run(args.segments, args.minutes, jitter))
    flush_cost(args.segments)


if __name__ == "__main__":
    main()
