"""Namespace watch benchmark: how soon a watcher hears of a topic created in its namespace.

Against ``stctl standalone`` on loopback (an embedded store, a controller and a broker; the
token of its client configuration), one client watches a namespace with one property filter
(``Client.watch_namespace``) while an ``Admin`` creates matching topics. Prints:

- diff latency, one creation at a time (each waits for its change before the next): from the
  admin create call returning to the watcher's change event, and from the call being made,
  p50/p99 in milliseconds. The broker coalesces a namespace's changes for about 50 ms before
  it sends a diff, so that is the floor; the rest is the broker's cache of the store catching
  up with the write, and the wire. The event may come before the create call returns (the
  broker's cache can be quicker than the HTTP answer): a negative figure then.
- a burst: N topics created at once (``--burst``), the time from the first call to the last
  topic heard, and how many change events carried them (coalescing folds them into few).
Figures only: nothing here asserts on timing.

    python benchmarks/bench_namespace_diff_latency.py [--creations 300] [--burst 200]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import tempfile
import time
from pathlib import Path

from standalone_service import start_standalone

from scalable_topics.client import Client, TopicSetChange
from scalable_topics.client.admin import Admin

NAMESPACE = "bench"
FILTERS = {"watched": "yes"}
EVENT_SECONDS = 30.0


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


class Arrivals:
    """When each topic was first heard added, and how many change events there were."""

    def __init__(self) -> None:
        self.heard: dict[str, float] = {}
        self.events = 0
        self._changed = asyncio.Event()

    def on_change(self, change: TopicSetChange) -> None:
        now = time.perf_counter()
        self.events += 1
        for topic in change.added:
            self.heard.setdefault(topic, now)
        self._changed.set()

    async def wait_for(self, topics: set[str]) -> None:
        async with asyncio.timeout(EVENT_SECONDS):
            while not topics <= self.heard.keys():
                self._changed.clear()
                await self._changed.wait()


async def one_at_a_time(admin: Admin, arrivals: Arrivals, count: int) -> tuple[list[float], ...]:
    after_return: list[float] = []
    after_call: list[float] = []
    for index in range(count):
        topic = f"{NAMESPACE}/single-{index}"
        called = time.perf_counter()
        await admin.create_topic(topic, properties=FILTERS)
        returned = time.perf_counter()
        await arrivals.wait_for({topic})
        heard = arrivals.heard[topic]
        after_return.append((heard - returned) * 1000)
        after_call.append((heard - called) * 1000)
    return after_return, after_call


async def burst(admin: Admin, arrivals: Arrivals, count: int) -> tuple[float, int]:
    topics = {f"{NAMESPACE}/burst-{index}" for index in range(count)}
    events_before = arrivals.events
    started = time.perf_counter()
    await asyncio.gather(*(admin.create_topic(topic, properties=FILTERS) for topic in topics))
    await arrivals.wait_for(topics)
    last = max(arrivals.heard[topic] for topic in topics)
    return (last - started) * 1000, arrivals.events - events_before


async def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--creations", type=int, default=300)
    parser.add_argument("--burst", type=int, default=200)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as directory:
        process, config = await start_standalone(Path(directory))
        try:
            async with Client.from_config(config) as client, Admin.from_config(config) as admin:
                # An unfiltered topic in the namespace: the filter is evaluated, never matched.
                await admin.create_topic(f"{NAMESPACE}/unwatched")
                watcher = await client.watch_namespace(NAMESPACE, FILTERS)
                arrivals = Arrivals()
                watcher.listen(arrivals.on_change)
                print(f"namespace watch benchmark (stctl standalone, {os.cpu_count()} cores)")
                after_return, after_call = await one_at_a_time(admin, arrivals, args.creations)
                for name, values in (
                    ("create returned -> change heard", after_return),
                    ("create called   -> change heard", after_call),
                ):
                    print(
                        f"  {name}, {args.creations} creations one at a time: "
                        f"p50 {percentile(values, 0.5):7.1f} ms  "
                        f"p99 {percentile(values, 0.99):7.1f} ms"
                    )
                elapsed, events = await burst(admin, arrivals, args.burst)
                print(
                    f"  {args.burst} creations at once: last heard {elapsed:7.1f} ms after the "
                    f"first call, in {events} change event{'' if events == 1 else 's'}"
                )
                await watcher.close()
        finally:
            process.terminate()
            process.wait(timeout=30)


if __name__ == "__main__":
    asyncio.run(main())
