"""Namespace watches on a broker: the snapshot, the hash-matched re-watch, and many watchers.

In the benchmark's own process, over the ScalableTopic informer of an embedded store holding
``--topics`` topics that match a filter (and a tenth as many that do not), a namespace watch
registry (broker/namespace_watch.py) as a broker runs it:

- the time from opening a watch to its snapshot frames being handed to the socket (encoded, as
  the session hands them to aiohttp): for the first watch of its filter set (the set is read
  from the cache, filtered, sorted, hashed and encoded) and for another watch of the same set
  (which shares it); the frames and bytes;
- the bytes the broker sends for a re-watch whose hash matches the set (the aim: none).

Then one ``stctl broker`` process on that store, and ``--watchers`` WebSocket connections to
it, each opening one namespace watch on a namespace of ``--watched-topics`` topics (half of
them with a filter): the broker's RSS and CPU seconds for opening the watchers (the
connections were opened before), and for each of five topic creations fanned out to all of
them, the time until every watcher has its diff (the store's change feed polls every 20 ms and
watches coalesce for 50 ms, so this is mostly waiting) and the broker's CPU seconds it took. On
the wire, the bytes a hash-matched re-watch of the large namespace receives before the diff of
the next change (the aim: none).

Figures only: nothing here asserts on timing.

    python benchmarks/bench_namespace_watch.py [--topics 10000] [--watchers 1000]
        [--watched-topics 1000]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import aiohttp

TESTS = Path(__file__).resolve().parents[1] / "tests"
if str(TESTS) not in sys.path:
    sys.path.insert(0, str(TESTS))

from scalable_topics.broker.namespace_watch import NamespaceWatchRegistry  # noqa: E402
from scalable_topics.broker.open_files import raise_open_files_limit  # noqa: E402
from scalable_topics.model.resources import API_VERSION, ScalableTopic  # noqa: E402
from scalable_topics.protocol import (  # noqa: E402
    DEFAULT_MAX_FRAME_BYTES,
    PROTOCOL_VERSION,
    Command,
    Connect,
    Connected,
    NamespaceUpdate,
    WatchNamespace,
    decode_frame,
    encode_frame,
    topic_set_hash,
)
from scalable_topics.store import EmbeddedStore  # noqa: E402
from scalable_topics.store.informers import Informers  # noqa: E402
from support.broker_process import BrokerProcess  # noqa: E402

BIG, WATCHED = "big", "watched"
PROD = {"env": "prod"}
CREATE_CONCURRENCY = 64
REPEATS = 20
ROUNDS = 5
WAIT = 120.0  # bounds a stuck step only
MIB = 1024 * 1024
TICKS = os.sysconf("SC_CLK_TCK")


def topic(namespace: str, name: str, properties: dict[str, str]) -> dict[str, Any]:
    return {
        "apiVersion": API_VERSION,
        "kind": ScalableTopic.KIND,
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"initialSegments": 1, "properties": properties},
    }


async def create_topics(store: EmbeddedStore, objects: list[dict[str, Any]]) -> None:
    queue = iter(objects)

    async def work() -> None:
        for obj in queue:
            await store.create(obj)

    await asyncio.gather(*(work() for _ in range(CREATE_CONCURRENCY)))


def rss_bytes(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError(f"no VmRSS for process {pid}")


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS  # utime + stime


# -- in the benchmark's process ------------------------------------------------------------------


class Socket:
    """Where a session would hand a watch's frames: encodes them, counts them, and notes when
    a complete snapshot has been handed over."""

    def __init__(self) -> None:
        self.frames = 0
        self.bytes = 0
        self.snapshot_at: float | None = None
        self.done = asyncio.Event()

    async def send(self, command: Command) -> None:
        frame = encode_frame(command)
        self.frames += 1
        self.bytes += len(frame)
        if isinstance(command, NamespaceUpdate) and command.snapshot and command.snapshot.complete:
            self.snapshot_at = time.perf_counter()
            self.done.set()


async def snapshot_seconds(registry: NamespaceWatchRegistry, watch_id: int) -> tuple[float, Socket]:
    socket = Socket()
    started = time.perf_counter()
    watch = registry.watch(BIG, PROD, watch_id, None, socket.send, lambda _: None, 5 << 20)
    async with asyncio.timeout(WAIT):
        await socket.done.wait()
    assert socket.snapshot_at is not None
    registry.release(watch)
    await watch.close()
    return socket.snapshot_at - started, socket


async def in_process(store: EmbeddedStore, big: list[str]) -> None:
    informers = Informers(store, "scalable-topics")
    informers.start()
    await informers.wait_synced()
    registry = NamespaceWatchRegistry(informers.topics)
    await registry.start()
    try:
        cold = []
        for watch_id in range(REPEATS):
            seconds, socket = await snapshot_seconds(registry, watch_id)
            cold.append(seconds)
        keeper = Socket()
        kept = registry.watch(BIG, PROD, 999, None, keeper.send, lambda _: None, 5 << 20)
        await keeper.done.wait()
        warm = [(await snapshot_seconds(registry, 1000 + i))[0] for i in range(REPEATS)]

        matched = Socket()
        rewatch = registry.watch(
            BIG, PROD, 2000, topic_set_hash(big), matched.send, lambda _: None, 5 << 20
        )
        await asyncio.sleep(0.5)  # anything the opening would send has gone by now
        registry.release(rewatch)
        await rewatch.close()
        registry.release(kept)
        await kept.close()
    finally:
        await registry.stop()
        await informers.stop()
    print(f"snapshot of {len(big):,} matching topics at the broker (in-process, {REPEATS} runs)")
    print(
        f"  first watch of its filter set: median {statistics.median(cold) * 1000:6.1f} ms, "
        f"max {max(cold) * 1000:6.1f} ms"
    )
    print(
        f"  another watch of the same set: median {statistics.median(warm) * 1000:6.1f} ms, "
        f"max {max(warm) * 1000:6.1f} ms"
    )
    print(
        f"  {socket.frames} frame(s), {socket.bytes:,} bytes "
        f"(frames up to {DEFAULT_MAX_FRAME_BYTES:,} bytes)"
    )
    print(f"re-watch with the set's hash: {matched.frames} frames, {matched.bytes} bytes sent")


# -- a broker process ----------------------------------------------------------------------------


class Tally:
    """Diffs received by a set of watchers, and a wait for a count of them."""

    def __init__(self) -> None:
        self.diffs = 0
        self._target = 0
        self._reached = asyncio.Event()

    def add(self) -> None:
        self.diffs += 1
        if self.diffs >= self._target:
            self._reached.set()

    async def wait_for(self, target: int) -> None:
        self._target = target
        if self.diffs >= target:
            return
        self._reached.clear()
        async with asyncio.timeout(WAIT):
            await self._reached.wait()


class Watcher:
    """One client connection with one namespace watch; counts the diffs it receives."""

    def __init__(self, ws: aiohttp.ClientWebSocketResponse, tally: Tally) -> None:
        self.ws = ws
        self.tally = tally
        self.snapshot = asyncio.Event()
        self.diffs = 0
        self.bytes_before_diff = 0
        self.reader: asyncio.Task[None] | None = None

    async def open(self, namespace: str, filters: dict[str, str], current: int | None) -> None:
        await self.ws.send_bytes(encode_frame(Connect(1, (PROTOCOL_VERSION,), "bench", None)))
        reply = decode_frame((await self.ws.receive(timeout=WAIT)).data, 1 << 30)
        assert isinstance(reply, Connected), reply
        self.reader = asyncio.create_task(self._read())
        await self.ws.send_bytes(encode_frame(WatchNamespace(1, namespace, filters, current)))

    async def _read(self) -> None:
        async for frame in self.ws:
            if frame.type is not aiohttp.WSMsgType.BINARY:
                continue
            update = decode_frame(frame.data, 1 << 30)
            assert isinstance(update, NamespaceUpdate) and update.ended is None, update
            if update.snapshot is not None:
                self.bytes_before_diff += len(frame.data)
                if update.snapshot.complete:
                    self.snapshot.set()
            elif update.diff is not None:
                if not self.diffs:
                    self.snapshot.set()  # a hash-matched watch: no snapshot came
                self.diffs += 1
                self.tally.add()

    async def close(self) -> None:
        await self.ws.close()
        if self.reader is not None:
            self.reader.cancel()
            await asyncio.wait({self.reader})


async def broker_process(root: Path, store: EmbeddedStore, watchers: int, big: list[str]) -> None:
    broker = BrokerProcess(root, f"embedded://{root / 'store.db'}")
    await broker.start()
    assert broker.process is not None
    pid = broker.process.pid
    url = broker.ws_url + "/ws"
    connector = aiohttp.TCPConnector(limit=0)
    opened: list[Watcher] = []
    try:
        async with aiohttp.ClientSession(connector=connector) as http:
            sockets = [await http.ws_connect(url, max_msg_size=0) for _ in range(watchers)]
            tally = Tally()
            opened = [Watcher(ws, tally) for ws in sockets]
            await asyncio.sleep(1)
            rss_before, cpu_before = rss_bytes(pid), cpu_seconds(pid)
            started = time.perf_counter()
            for index, watcher in enumerate(opened):
                await watcher.open(WATCHED, PROD if index % 2 else {}, None)
            for watcher in opened:
                async with asyncio.timeout(WAIT):
                    await watcher.snapshot.wait()
            open_seconds = time.perf_counter() - started
            cpu_open = cpu_seconds(pid) - cpu_before
            await asyncio.sleep(1)
            rss_after = rss_bytes(pid)

            idle_from = cpu_seconds(pid)
            await asyncio.sleep(2)
            idle_per_second = (cpu_seconds(pid) - idle_from) / 2
            latencies, cpus = [], []
            for round_ in range(ROUNDS):
                cpu_from = cpu_seconds(pid)
                created = time.perf_counter()
                await store.create(topic(WATCHED, f"new-{round_}", PROD))
                await tally.wait_for(watchers * (round_ + 1))
                latencies.append(time.perf_counter() - created)
                cpus.append(cpu_seconds(pid) - cpu_from)

            matched_tally = Tally()
            matched = Watcher(await http.ws_connect(url, max_msg_size=0), matched_tally)
            await matched.open(BIG, PROD, topic_set_hash(big))
            await asyncio.sleep(0.5)
            await store.create(topic(BIG, "one-more", PROD))
            await matched_tally.wait_for(1)
            await matched.close()
            for watcher in opened:
                await watcher.close()
    finally:
        broker.stop()
    print(f"{watchers:,} watchers on one broker process, one connection each")
    print(
        f"  opening them: {open_seconds:.2f} s until every snapshot arrived, broker CPU "
        f"{cpu_open:.2f} s; broker RSS {rss_before / MIB:.1f} -> {rss_after / MIB:.1f} MiB "
        f"({(rss_after - rss_before) / watchers:,.0f} B per watcher)"
    )
    print(
        f"  one topic created, fanned out to all {watchers:,} (median of {ROUNDS}): "
        f"{statistics.median(latencies) * 1000:.0f} ms until all had the diff, broker CPU "
        f"{statistics.median(cpus) * 1000:.0f} ms (idle: {idle_per_second * 1000:.0f} ms/s)"
    )
    print(
        f"  re-watch of {len(big):,} topics with the set's hash, on the wire: "
        f"{matched.bytes_before_diff} bytes before the next diff"
    )


async def main(topics: int, watchers: int, watched_topics: int) -> None:
    raise_open_files_limit()
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        async with await EmbeddedStore.open(root / "store.db", synchronous="OFF") as store:
            big = [f"topic-{index:06}" for index in range(topics)]
            objects = [topic(BIG, name, PROD) for name in big]
            objects += [topic(BIG, f"other-{i:06}", {"env": "dev"}) for i in range(topics // 10)]
            objects += [
                topic(WATCHED, f"t-{i:05}", PROD if i % 2 else {}) for i in range(watched_topics)
            ]
            started = time.perf_counter()
            await create_topics(store, objects)
            print(f"{len(objects):,} topics created in {time.perf_counter() - started:.1f} s")
            await in_process(store, big)
            await broker_process(root, store, watchers, big)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--topics", type=int, default=10_000)
    parser.add_argument("--watchers", type=int, default=1000)
    parser.add_argument("--watched-topics", type=int, default=1000)
    arguments = parser.parse_args()
    asyncio.run(main(arguments.topics, arguments.watchers, arguments.watched_topics))
