"""Broker memory benchmark: the resident memory (RSS) of real broker processes under clients
that make them hold things, and what one unacknowledged message costs.

Prints:
- a broker's RSS before and after 400,000 messages of 1 KiB are produced through it; then,
  restarted on that data (so what streaming them through left in its allocator does not
  count), its RSS idle and while one consumer holds all 400,000 delivered and unacknowledged.
  That broker runs with --max-unacked-messages-per-consumer and -per-subscription at 400,000,
  so its one consumer may hold them (one consumer, limits raised, rather than eight consumers
  at the default 50,000: a subscription's default 200,000 would stop those at half);
- under the default limits, a consumer that never acks: it receives exactly 50,000;
- what tracemalloc counts per unacknowledged message in-process (Exclusive and Key_Shared);
- a slow disk: data on a tmpfs where the system has one, --sync batch, and FSYNC_DELAY added to
  each log fsync by wrapping the log's fsync function with a sleep in the broker process (the
  log looks it up at each call; the benchmark starts the broker through a small launcher that
  does this). Clients send from one connection as fast as they can for --seconds: four
  producers each keeping up to 500 sends unanswered (the SDK's window; together past the
  connection's limits, so the broker stops reading), one producer with no window at all
  (batches of 100 x 1 KiB, where the byte limit binds), and the same with small sends (where
  the counts bind: the broker closes the producer at 500 and refuses the rest). RSS is
  sampled as they run; for contrast, the window-less producer against a broker whose limits
  are lifted, stopped after --contrast-mib MiB sent.
Figures only: nothing here asserts on timing or memory.

    python benchmarks/bench_memory.py [--unacked 400000] [--seconds 8] [--contrast-mib 256]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import itertools
import os
import socket
import subprocess
import sys
import tempfile
import time
import tracemalloc
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path

import aiohttp

from scalable_topics.broker.config import BrokerConfig
from scalable_topics.broker.dispatch import Consumer
from scalable_topics.broker.segment import HostedSegment
from scalable_topics.broker.segment_meta import SegmentMeta
from scalable_topics.model.resources import ProducerAccessMode
from scalable_topics.protocol import (
    PROTOCOL_VERSION,
    BatchMessage,
    Command,
    Connect,
    DeliveredMessage,
    ErrorCode,
    InitialPosition,
    Message,
    ProducerClosed,
    ProducerOpen,
    SegmentSubscriptionType,
    Send,
    SendError,
    SendReceipt,
    Subscribe,
    decode_frame,
    encode_frame,
)

TOPIC = "bench/memory"
SEGMENT = "/admin/v1/segments/bench/memory/0000-ffff-0"
PAYLOAD = b"x" * 1024
BATCH = 100  # messages per Send: about 100 KiB frames
FSYNC_DELAY = 0.02  # seconds added to each log fsync: a slow disk's, or a busy network volume's
MiB = 1024 * 1024

# Runs stctl with the log's fsync slowed down: durable_fs.flush_to_disk is looked up at each
# call, so wrapping it before the broker starts slows every log fsync (not the other fsyncs).
SLOW_DISK_LAUNCHER = """
import sys, time
from scalable_topics.broker.storage import durable_fs
from scalable_topics.cli import main
delay, real = float(sys.argv[1]), durable_fs.flush_to_disk
def slow(fd):
    time.sleep(delay)
    real(fd)
durable_fs.flush_to_disk = slow
sys.exit(main(sys.argv[2:]))
"""


@contextlib.contextmanager
def scratch() -> Iterator[Path]:
    """A directory on a tmpfs where the system has one (Linux's /dev/shm), so the disk is
    only as slow as the benchmark makes it; removed afterwards."""
    shm = Path("/dev/shm")
    with tempfile.TemporaryDirectory(
        dir=shm if shm.is_dir() else None, prefix="bench-memory-"
    ) as directory:
        yield Path(directory)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def rss_bytes(pid: int) -> int | None:
    """The process's resident set (Linux: /proc/PID/status); None where that is not there."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None


def mib(value: int | None) -> str:
    return "n/a" if value is None else f"{value / MiB:.1f} MiB"


class Broker:
    def __init__(self, process: subprocess.Popen[bytes], url: str) -> None:
        self.process = process
        self.url = url

    def rss(self) -> int | None:
        return rss_bytes(self.process.pid)

    async def settled_rss(self) -> int | None:
        """RSS once the broker has had a moment to finish what it was doing."""
        await asyncio.sleep(1.0)
        return self.rss()

    async def metric(self, name: str) -> float:
        async with aiohttp.ClientSession() as http, http.get(self.url + "/metrics") as answer:
            text = await answer.text()
        for line in text.splitlines():
            if line.startswith(name + " "):
                return float(line.split()[1])
        raise KeyError(name)


@contextlib.asynccontextmanager
async def running_broker(
    root: Path, *flags: str, fsync_delay: float | None = None
) -> AsyncIterator[Broker]:
    port = free_port()
    stctl = ["broker", "--data-dir", str(root / "data"), "--store", f"embedded://{root}/store.db"]
    stctl += ["--port", str(port), *flags]
    if fsync_delay is None:
        command = [sys.executable, "-m", "scalable_topics.cli", *stctl]
    else:
        command = [sys.executable, "-c", SLOW_DISK_LAUNCHER, str(fsync_delay), *stctl]
    process = subprocess.Popen(  # noqa: ASYNC220 - a long-lived child, started once
        command,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    broker = Broker(process, f"http://127.0.0.1:{port}")
    try:
        async with aiohttp.ClientSession() as http:
            for _ in range(600):
                with contextlib.suppress(aiohttp.ClientError):
                    async with http.get(broker.url + "/healthz") as response:
                        if response.status == 200:
                            break
                await asyncio.sleep(0.05)
            else:
                raise RuntimeError("the broker did not start")
            async with http.put(
                broker.url + SEGMENT, json={"subscriptions": ["held", "capped"]}
            ) as response:
                assert response.status in (200, 201), await response.text()  # 200: reopened
        yield broker
    finally:
        process.terminate()
        process.wait(timeout=30)


class Wire:
    """One protocol connection: requests answered in turn, other frames to a handler."""

    def __init__(self, ws: aiohttp.ClientWebSocketResponse) -> None:
        self.ws = ws
        self.ids = itertools.count(1)

    @classmethod
    @contextlib.asynccontextmanager
    async def open(cls, url: str) -> AsyncIterator[Wire]:
        async with aiohttp.ClientSession() as http:
            ws = await http.ws_connect(url.replace("http", "ws") + "/ws", max_msg_size=0)
            wire = cls(ws)
            await wire.call(Connect(next(wire.ids), (PROTOCOL_VERSION,), "bench-memory"))
            try:
                yield wire
            finally:
                await ws.close()

    async def call(self, command: Command) -> Command:
        await self.ws.send_bytes(encode_frame(command))
        return decode_frame((await self.ws.receive()).data, 1 << 30)

    async def frames(self, handle: Callable[[Command], bool]) -> None:
        """Hand every frame to ``handle`` until it returns True or the connection ends."""
        async for frame in self.ws:
            if frame.type is aiohttp.WSMsgType.BINARY and handle(decode_frame(frame.data, 1 << 30)):
                return


def batch_of(first: int) -> tuple[BatchMessage, ...]:
    return tuple(BatchMessage(PAYLOAD, f"key-{(first + i) % 1000}") for i in range(BATCH))


async def produce(broker: Broker, total: int, window: int = 64) -> None:
    async with Wire.open(broker.url) as wire:
        await wire.call(ProducerOpen(next(wire.ids), 1, TOPIC, 0, "loader"))
        space = asyncio.Semaphore(window)
        answered = 0

        def on_frame(command: Command) -> bool:
            nonlocal answered
            if isinstance(command, SendReceipt | SendError):
                assert isinstance(command, SendReceipt), command
                answered += 1
                space.release()
            return answered * BATCH >= total

        reader = asyncio.create_task(wire.frames(on_frame))
        for first in range(0, total, BATCH):
            await space.acquire()
            await wire.ws.send_bytes(encode_frame(Send(1, first, batch_of(first))))
        await reader


async def hold(wire: Wire, subscription: str, permits: int, until: int) -> int:
    """Subscribe and take messages without acknowledging any, until ``until`` arrived or
    nothing came for two seconds; returns how many arrived."""
    subscribe = Subscribe(
        next(wire.ids),
        1,
        TOPIC,
        0,
        subscription,
        SegmentSubscriptionType.EXCLUSIVE,
        "holder",
        0,
        InitialPosition.EARLIEST,
        permits,
    )
    await wire.call(subscribe)
    received = 0
    while received < until:
        try:
            async with asyncio.timeout(2.0):
                frame = await wire.ws.receive()
        except TimeoutError:
            break
        if frame.type is not aiohttp.WSMsgType.BINARY:
            break
        command = decode_frame(frame.data, 1 << 30)
        if isinstance(command, Message):
            received += len(command.messages)
    return received


async def unacked_section(total: int) -> None:
    """Produce ``total`` messages, restart the broker on them (so what producing left in its
    allocator does not count), then hold them all unacknowledged."""
    limit = str(total)
    limits = (
        "--sync", "none",
        "--max-unacked-messages-per-consumer", limit,
        "--max-unacked-messages-per-subscription", limit,
    )  # fmt: skip
    with scratch() as root:
        async with running_broker(root, *limits) as broker:
            idle = await broker.settled_rss()
            started = time.perf_counter()
            await produce(broker, total)
            elapsed = time.perf_counter() - started
            produced = await broker.settled_rss()
            print(
                f"  producing {total:,} x 1 KiB (in {elapsed:.1f} s): RSS {mib(idle)} idle, "
                f"{mib(produced)} after (what streaming them through left in its allocator)"
            )
        async with running_broker(root, *limits) as broker:
            idle = await broker.settled_rss()
            async with Wire.open(broker.url) as holder:
                received = await hold(holder, "held", total + 1000, total)
                holding = await broker.settled_rss()
                grew = None if holding is None or idle is None else holding - idle
                per = "" if grew is None else f" ({grew / max(received, 1):.0f} B per message)"
                print(
                    f"  restarted on them, RSS idle {mib(idle)}; one consumer holding "
                    f"{received:,} unacknowledged (limits set to {total:,}): RSS {mib(holding)}, "
                    f"{mib(grew)} above idle{per}"
                )
    # The default limit, on a broker started with the defaults.
    with scratch() as root:
        async with running_broker(root, "--sync", "none") as broker:
            await produce(broker, 80_000)
            async with Wire.open(broker.url) as capped:
                received = await hold(capped, "capped", 80_000, 80_000)
                print(
                    "  default limits: a consumer with 80,000 permits that never acks received "
                    f"{received:,} of 80,000, then nothing for 2 s"
                )


async def traced_bytes_per_message(kind: SegmentSubscriptionType, total: int) -> float:
    """tracemalloc's count of what a subscription holds per delivered, unacknowledged message
    (in this process: a hosted segment, its log in a scratch directory)."""

    class Gate:
        def parents_drained(self, *_: object) -> bool:
            return True

        def mark_drained(self, *_: object) -> None:
            pass

        def listen(self, *_: object) -> Callable[[], None]:
            return lambda: None

    class Link:
        def __init__(self) -> None:
            self.received = 0
            self.all_in = asyncio.Event()

        async def deliver(self, messages: list[DeliveredMessage]) -> None:
            self.received += len(messages)
            if self.received >= total:
                self.all_in.set()

        async def end_of_segment(self) -> None:
            pass

        async def closed_by_broker(self, code: ErrorCode, message: str) -> None:
            pass

    with scratch() as root:
        config = BrokerConfig(
            data_dir=root,
            store_url="embedded:unused.db",
            sync="none",
            max_unacked_messages_per_consumer=0,
            max_unacked_messages_per_subscription=0,
        )
        meta = SegmentMeta("bench", "memory", 0, 0, 0xFFFF)
        segment = await HostedSegment.create(root / "seg", meta, ["sub"], config, Gate())
        try:
            await segment.open_producer("p", "p", ProducerAccessMode.SHARED, None, None)  # type: ignore[arg-type]
            for first in range(0, total, BATCH):
                await segment.publish("p", Send(1, first, batch_of(first)))
            link = Link()
            gc.collect()
            tracemalloc.start()
            try:
                before = tracemalloc.get_traced_memory()[0]
                segment.subscription("sub").add_consumer(Consumer(1, "c"), kind, link, total)
                await link.all_in.wait()
                gc.collect()
                return (tracemalloc.get_traced_memory()[0] - before) / total
            finally:
                tracemalloc.stop()
        finally:
            await segment.close()


async def flood(
    broker: Broker,
    seconds: float,
    producers: int,
    window: int | None,
    stop_after_bytes: int | None = None,
    batch: tuple[BatchMessage, ...] | None = None,
) -> None:
    """Send from one connection as fast as it goes for ``seconds``: ``producers`` producers in
    turn, each with at most ``window`` sends unanswered (None: no window at all). Prints RSS
    and what the broker reports."""
    idle = broker.rss()
    samples: list[int] = []
    most_in_flight = 0.0
    messages = batch_of(0) if batch is None else batch
    frame_bytes = len(encode_frame(Send(1, 0, messages)))
    async with Wire.open(broker.url) as wire:
        for producer_id in range(1, producers + 1):
            await wire.call(
                ProducerOpen(next(wire.ids), producer_id, TOPIC, 0, f"flood-{producer_id}")
            )
        unanswered = dict.fromkeys(range(1, producers + 1), 0)
        room = asyncio.Event()
        room.set()
        counts = {"receipts": 0, "refused": 0, "closed": 0}

        def on_frame(command: Command) -> bool:
            if isinstance(command, SendReceipt | SendError):
                unanswered[command.producer_id] -= 1
                counts["receipts" if isinstance(command, SendReceipt) else "refused"] += 1
                room.set()
            elif isinstance(command, ProducerClosed):
                counts["closed"] += 1
            return False

        reader = asyncio.create_task(wire.frames(on_frame))

        async def sample() -> None:
            nonlocal most_in_flight
            while True:
                await asyncio.sleep(0.25)
                rss = broker.rss()
                if rss is not None:
                    samples.append(rss)
                most_in_flight = max(
                    most_in_flight, await broker.metric("st_broker_publishes_in_flight")
                )

        sampler = asyncio.create_task(sample())
        started = time.perf_counter()
        sent = 0
        sequences = dict.fromkeys(range(1, producers + 1), 0)
        try:
            for producer_id in itertools.cycle(range(1, producers + 1)):
                if time.perf_counter() - started > seconds:
                    break
                if stop_after_bytes is not None and sent * frame_bytes >= stop_after_bytes:
                    break
                while window is not None and unanswered[producer_id] >= window:
                    room.clear()
                    await room.wait()
                unanswered[producer_id] += 1
                await wire.ws.send_bytes(
                    encode_frame(Send(producer_id, sequences[producer_id], messages))
                )
                sequences[producer_id] += len(messages)
                sent += 1
            elapsed = time.perf_counter() - started
        finally:
            sampler.cancel()
            await asyncio.gather(sampler, return_exceptions=True)
            reader.cancel()
            await asyncio.gather(reader, return_exceptions=True)
        pauses = await broker.metric("st_broker_publish_read_pauses_total")
        over = await broker.metric("st_broker_producers_over_limit_total")
    peak = max(samples, default=None)
    grew = None if peak is None or idle is None else peak - idle
    quarters = [samples[min(len(samples) - 1, len(samples) * q // 4)] for q in (1, 2, 3, 4)]
    print(
        f"    sent {sent:,} sends ({sent * frame_bytes / MiB:,.0f} MiB) in {elapsed:.1f} s; "
        f"{counts['receipts']:,} stored, {counts['refused']:,} refused, "
        f"{counts['closed']} producer closures"
    )
    print(
        f"    broker RSS: idle {mib(idle)}, peak {mib(peak)} ({mib(grew)} above idle); "
        f"most sends in flight {most_in_flight:,.0f}; read pauses {pauses:,.0f}; "
        f"producers closed for their limit {over:,.0f}"
    )
    if samples:
        print("    RSS at each quarter of the run: " + ", ".join(mib(rss) for rss in quarters))


async def slow_disk_section(seconds: float, contrast_mib: int) -> None:
    sync = ("--sync", "batch")
    print(f"  slow disk: tmpfs, --sync batch, {FSYNC_DELAY * 1000:.0f} ms added to each log fsync")
    with scratch() as root:
        async with running_broker(root, *sync, fsync_delay=FSYNC_DELAY) as broker:
            print("  4 producers on one connection, each keeping 500 sends unanswered (the SDK's):")
            await flood(broker, seconds, producers=4, window=500)
    with scratch() as root:
        async with running_broker(root, *sync, fsync_delay=FSYNC_DELAY) as broker:
            print("  1 producer with no window at all (sends without waiting for anything):")
            await flood(broker, seconds, producers=1, window=None)
    with scratch() as root:
        async with running_broker(root, *sync, fsync_delay=FSYNC_DELAY) as broker:
            print(
                "  the same with small sends (10 x 100 B), where the counts bind before the bytes:"
            )
            small = tuple(BatchMessage(b"y" * 100, f"k{i}") for i in range(10))
            await flood(broker, seconds, producers=1, window=None, batch=small)
    lifted = (
        "--max-pending-publishes-per-connection", "100000000",
        "--max-pending-publish-bytes-per-connection", str(1 << 50),
        "--max-pending-publishes-per-producer", "100000000",
    )  # fmt: skip
    with scratch() as root:
        async with running_broker(root, *sync, *lifted, fsync_delay=FSYNC_DELAY) as broker:
            print(
                f"  for contrast, the limits lifted: 1 producer, no window, {contrast_mib} MiB sent:"
            )
            await flood(
                broker, seconds * 10, producers=1, window=None, stop_after_bytes=contrast_mib * MiB
            )


async def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--unacked", type=int, default=400_000)
    parser.add_argument("--seconds", type=float, default=8.0)
    parser.add_argument("--contrast-mib", type=int, default=256)
    args = parser.parse_args()
    print(f"broker memory benchmark (loopback, {os.cpu_count()} cores)")
    await unacked_section(args.unacked)
    for kind in (SegmentSubscriptionType.EXCLUSIVE, SegmentSubscriptionType.KEY_SHARED):
        per_message = await traced_bytes_per_message(kind, args.unacked)
        print(
            f"  tracemalloc, {args.unacked:,} unacknowledged on one {kind.value} consumer: "
            f"{per_message:.0f} B per message, {per_message * args.unacked / MiB:.1f} MiB"
        )
    await slow_disk_section(args.seconds, args.contrast_mib)


if __name__ == "__main__":
    asyncio.run(main())
