"""Broker benchmark: one real broker process on loopback, driven over the wire protocol.

Prints, for one broker:
- produce -> consume throughput (msgs/s, MB/s) for 100 B and 1 KiB messages, with producer
  batches of 100 messages and several batches in flight, one Exclusive consumer acking;
- publish latency (send -> durable receipt) p50/p99 at a fixed 10,000 msgs/s, sent as a batch
  of 10 messages every millisecond.
Figures only: nothing here asserts on timing.

    python benchmarks/bench_broker.py [--messages 200000] [--sync batch|interval|none]
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import aiohttp

from scalable_topics.protocol import (
    PROTOCOL_VERSION,
    Ack,
    AckType,
    BatchMessage,
    Connect,
    Flow,
    Message,
    ProducerOpen,
    SegmentSubscriptionType,
    Send,
    SendReceipt,
    Subscribe,
    decode_frame,
    encode_frame,
)

TOPIC = "bench/stream"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


async def start_broker(root: Path, sync: str) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    process = subprocess.Popen(  # noqa: ASYNC220 - a long-lived child, started once
        [
            sys.executable,
            "-m",
            "scalable_topics.cli",
            "broker",
            "--data-dir",
            str(root / "data"),
            "--store",
            f"embedded://{root / 'store.db'}",
            "--port",
            str(port),
            "--sync",
            sync,
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    url = f"http://127.0.0.1:{port}"
    async with aiohttp.ClientSession() as http:
        for _ in range(600):
            try:
                async with http.get(url + "/healthz") as response:
                    if response.status == 200:
                        return process, url
            except aiohttp.ClientError:
                await asyncio.sleep(0.05)
    raise RuntimeError("the broker did not start")


class Connection:
    def __init__(self, ws: aiohttp.ClientWebSocketResponse) -> None:
        self.ws = ws
        self.ids = itertools.count(1)

    @classmethod
    async def open(cls, http: aiohttp.ClientSession, url: str) -> Connection:
        ws = await http.ws_connect(url.replace("http", "ws") + "/ws", max_msg_size=0)
        connection = cls(ws)
        await connection.call(Connect(next(connection.ids), (PROTOCOL_VERSION,), "bench"))
        return connection

    async def call(self, command: object) -> object:
        await self.ws.send_bytes(encode_frame(command))  # type: ignore[arg-type]
        return decode_frame((await self.ws.receive()).data, 1 << 30)


async def throughput(
    url: str, total: int, size: int, batch: int = 100, in_flight: int = 32
) -> tuple[float, float]:
    segment = f"/admin/v1/segments/bench/stream-{size}/0000-ffff-0"
    topic = f"bench/stream-{size}"
    async with aiohttp.ClientSession() as http:
        async with http.put(url + segment, json={"subscriptions": ["sub"]}) as response:
            assert response.status == 201, await response.text()
        producer = await Connection.open(http, url)
        consumer = await Connection.open(http, url)
        await producer.call(ProducerOpen(next(producer.ids), 1, topic, 0, "bench"))
        await consumer.call(
            Subscribe(
                next(consumer.ids),
                1,
                topic,
                0,
                "sub",
                SegmentSubscriptionType.EXCLUSIVE,
                "c",
                permits=20_000,
            )
        )
        payload = b"x" * size
        keys = [f"key-{i}" for i in range(1000)]
        batches = [
            tuple(BatchMessage(payload, keys[(b * batch + i) % 1000]) for i in range(batch))
            for b in range(64)
        ]
        start = time.perf_counter()

        async def produce() -> None:
            window = asyncio.Semaphore(in_flight)
            sent = 0
            receipts = asyncio.Event()
            acked = 0

            async def read_receipts() -> None:
                nonlocal acked
                async for frame in producer.ws:
                    command = decode_frame(frame.data, 1 << 30)
                    if isinstance(command, SendReceipt):
                        acked += batch
                        window.release()
                        if acked >= total:
                            receipts.set()
                            return

            reader = asyncio.create_task(read_receipts())
            for number in range(total // batch):
                await window.acquire()
                await producer.ws.send_bytes(
                    encode_frame(Send(1, sent, batches[number % len(batches)]))
                )
                sent += batch
            await receipts.wait()
            reader.cancel()

        async def consume() -> None:
            received = 0
            async for frame in consumer.ws:
                command = decode_frame(frame.data, 1 << 30)
                if isinstance(command, Message):
                    received += len(command.messages)
                    last = command.messages[-1].message_id
                    await consumer.ws.send_bytes(encode_frame(Ack(1, AckType.CUMULATIVE, (last,))))
                    await consumer.ws.send_bytes(encode_frame(Flow(1, len(command.messages))))
                    if received >= total:
                        return

        await asyncio.gather(produce(), consume())
        elapsed = time.perf_counter() - start
        await producer.ws.close()
        await consumer.ws.close()
    return total / elapsed, total * size / elapsed / 1e6


async def latency(
    url: str, seconds: float, rate: int = 10_000, batch: int = 10, size: int = 100
) -> list[float]:
    segment = "/admin/v1/segments/bench/latency/0000-ffff-0"
    async with aiohttp.ClientSession() as http:
        async with http.put(url + segment, json={"subscriptions": []}) as response:
            assert response.status == 201
        producer = await Connection.open(http, url)
        await producer.call(ProducerOpen(next(producer.ids), 1, "bench/latency", 0, "latency"))
        sent_at: dict[int, float] = {}
        latencies: list[float] = []
        batches = int(seconds * rate / batch)

        async def read_receipts() -> None:
            async for frame in producer.ws:
                command = decode_frame(frame.data, 1 << 30)
                if isinstance(command, SendReceipt):
                    latencies.append(time.perf_counter() - sent_at.pop(command.sequence_id))
                    if len(latencies) == batches:
                        return

        reader = asyncio.create_task(read_receipts())
        interval = batch / rate
        start = time.perf_counter()
        for number in range(batches):
            due = start + number * interval
            delay = due - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)
            sequence = number * batch
            sent_at[sequence] = time.perf_counter()
            messages = tuple(
                BatchMessage(b"y" * size, f"k{(sequence + i) % 100}") for i in range(batch)
            )
            await producer.ws.send_bytes(encode_frame(Send(1, sequence, messages)))
        await asyncio.wait_for(reader, 60)
        achieved = batches * batch / (time.perf_counter() - start)
        print(f"  offered {rate} msgs/s, achieved {achieved:,.0f} msgs/s")
        await producer.ws.close()
    return latencies


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


async def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--messages", type=int, default=200_000)
    parser.add_argument("--latency-seconds", type=float, default=5.0)
    parser.add_argument("--sync", default="batch", choices=["batch", "interval", "none"])
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as directory:
        process, url = await start_broker(Path(directory), args.sync)
        try:
            print(
                f"broker benchmark (one broker, loopback, sync={args.sync}, {os.cpu_count()} cores)"
            )
            for size in (100, 1024):
                msgs, mbs = await throughput(url, args.messages, size)
                print(
                    f"  produce->consume {size:>5} B messages, batches of 100: {msgs:>10,.0f} msgs/s {mbs:8.1f} MB/s"
                )
            values = await latency(url, args.latency_seconds)
            print(
                f"  publish latency at 10k msgs/s (batches of 10): p50 {percentile(values, 0.5) * 1000:.2f} ms, "
                f"p99 {percentile(values, 0.99) * 1000:.2f} ms, mean {statistics.fmean(values) * 1000:.2f} ms"
            )
        finally:
            process.terminate()
            process.wait(timeout=30)


if __name__ == "__main__":
    asyncio.run(main())
