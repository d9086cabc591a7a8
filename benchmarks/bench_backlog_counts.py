"""What counting backlogs in messages costs a broker (broker/message_counts.py).

    python benchmarks/bench_backlog_counts.py [--entries 200000] [--batch 10]

Prints: the cost of counting one appended entry and of a backlog query; the memory the counts
take per unacknowledged entry; and how long reopening a segment takes with its whole log
unacknowledged (the counts are read again from the log) against the same segment fully
acknowledged (nothing to count). Figures only.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path

from scalable_topics.broker.config import BrokerConfig
from scalable_topics.broker.message_counts import MessageCounts
from scalable_topics.broker.segment import HostedSegment
from scalable_topics.broker.segment_meta import SegmentMeta
from scalable_topics.model.resources import ProducerAccessMode
from scalable_topics.protocol import BatchMessage, Send


class OpenGate:
    def parents_drained(self, namespace: str, topic: str, parents: object, sub: str) -> bool:
        return True

    def mark_drained(self, namespace: str, topic: str, descriptor: str, sub: str) -> None:
        pass

    def listen(
        self, namespace: str, topic: str, parents: object, callback: Callable[[], None]
    ) -> Callable[[], None]:
        return lambda: None


def counting(entries: int, batch: int) -> None:
    counts = MessageCounts(0)
    started = time.perf_counter()
    for entry in range(entries):
        counts.add(entry, batch)
    added = time.perf_counter() - started
    started = time.perf_counter()
    queries = 100_000
    for index in range(queries):
        counts.messages(index % entries, entries - 1)
    queried = time.perf_counter() - started
    tracemalloc.start()  # apart: tracing slows what it watches
    measured = MessageCounts(0)
    for entry in range(entries):
        measured.add(entry, batch)
    size, _ = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    print(
        f"counting: {added / entries * 1e9:.0f} ns per entry appended, "
        f"{queried / queries * 1e9:.0f} ns per range query, "
        f"{size / entries:.1f} bytes per counted entry ({entries:,} entries)"
    )


async def reopen(directory: Path, entries: int, batch: int, acknowledged: bool) -> float:
    config = BrokerConfig(data_dir=directory, store_url="embedded:unused.db", sync="none")
    meta = SegmentMeta("default", "orders", 0, 0, 0xFFFF)
    segment = await HostedSegment.create(directory / "seg", meta, ["billing"], config, OpenGate())
    await segment.open_producer("p", "p", ProducerAccessMode.SHARED, None, None)  # type: ignore[arg-type]
    messages = tuple(BatchMessage(b"x" * 100) for _ in range(batch))
    for entry in range(entries):
        await segment.publish("p", Send(1, entry * batch, messages))
    if acknowledged:
        await segment.subscriptions["billing"].seek(entries)
    await segment.close()
    started = time.perf_counter()
    again = await HostedSegment.open(directory / "seg", config, OpenGate())
    elapsed = time.perf_counter() - started
    expected = 0 if acknowledged else entries * batch
    backlog = again.subscriptions["billing"].backlog()
    await again.close()
    assert backlog == expected, (backlog, expected)
    return elapsed


async def main(entries: int, batch: int) -> None:
    counting(entries, batch)
    reopened = entries // 10
    with tempfile.TemporaryDirectory() as root:
        counted = await reopen(Path(root) / "a", reopened, batch, acknowledged=False)
        nothing = await reopen(Path(root) / "b", reopened, batch, acknowledged=True)
    print(
        f"reopening a segment of {reopened:,} entries of {batch} messages: "
        f"{counted:.3f} s all unacknowledged (counted again), {nothing:.3f} s all acknowledged"
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--entries", type=int, default=200_000)
    parser.add_argument("--batch", type=int, default=10)
    options = parser.parse_args()
    if options.entries < 10 or options.batch < 1:
        sys.exit("bench_backlog_counts: --entries must be at least 10 and --batch at least 1")
    asyncio.run(main(options.entries, options.batch))
