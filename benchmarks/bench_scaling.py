"""Split and merge latency: from the request to a producer writing to the new segment.

One broker process and one controller process (``stctl controller``) on an embedded store, as
in standalone mode. The benchmark writes each request the way ``stctl topics split/merge`` and
``kubectl annotate`` do (an annotation on the ScalableTopic, from another store connection),
while a producer keeps writing to the segment being split or merged. The figure is the time from
the request to the producer's first durable receipt from a child segment, after it was refused
by the sealed parent and found the child in the committed layout (polling the store every 2 ms,
as a stand-in for a DAG watch push). Splits and merges alternate on one topic.
Figures only: nothing here asserts on timing.

    python benchmarks/bench_scaling.py [--operations 60] [--pause 0.5]
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import aiohttp
from bench_broker import Connection, percentile, start_broker

from scalable_topics.model.hashing import hash_key
from scalable_topics.model.layout import SegmentLayout
from scalable_topics.model.resources import ScalableTopic
from scalable_topics.model.scale_request import MERGE_ANNOTATION, SPLIT_ANNOTATION
from scalable_topics.protocol import (
    BatchMessage,
    ErrorCode,
    ProducerOpen,
    ProducerOpened,
    Send,
    SendError,
    SendReceipt,
    decode_frame,
    encode_frame,
)
from scalable_topics.store import EmbeddedStore

TOPIC = "bench/scaling"
KEY = "hot-key"


def start_controller(root: Path) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "scalable_topics.cli",
            "controller",
            "--store",
            f"embedded://{root / 'store.db'}",
            "--identity",
            "bench-controller",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )


async def layout_of(store: EmbeddedStore) -> SegmentLayout:
    topic = ScalableTopic.model_validate(await store.get(ScalableTopic.KIND, "bench", "scaling"))
    if not topic.status.segments or topic.status.phase != "Ready":
        raise LookupError("not ready")
    return SegmentLayout.from_status(topic.status.to_wire())


class Producer:
    """One producer at a time on the segment that owns KEY; reopened after each change."""

    def __init__(self, connection: Connection) -> None:
        self.connection = connection
        self.producer_id = 0
        self.sequence = 0

    async def open(self, segment_id: int) -> None:
        self.producer_id += 1
        request = ProducerOpen(
            next(self.connection.ids), self.producer_id, TOPIC, segment_id, "bench-producer"
        )
        await self.connection.ws.send_bytes(encode_frame(request))
        while True:  # skip what the broker says unasked (ProducerClosed of the last producer)
            reply = decode_frame((await self.connection.ws.receive()).data, 1 << 30)
            if getattr(reply, "request_id", None) == request.request_id:
                assert isinstance(reply, ProducerOpened), reply
                return

    async def send(self) -> bool:
        """One message; False when the segment is sealed."""
        self.sequence += 1
        message = Send(self.producer_id, self.sequence, (BatchMessage(b"x" * 100, KEY),))
        await self.connection.ws.send_bytes(encode_frame(message))
        while True:  # skip what the broker says unasked (ProducerClosed)
            reply = decode_frame((await self.connection.ws.receive()).data, 1 << 30)
            if isinstance(reply, SendReceipt):
                return True
            if isinstance(reply, SendError):
                assert reply.code is ErrorCode.SEGMENT_TERMINATED, reply
                return False


async def one_operation(store: EmbeddedStore, requests: EmbeddedStore, producer: Producer) -> float:
    layout = await layout_of(store)
    active = layout.active
    if len(active) == 1:
        annotation, value = SPLIT_ANNOTATION, str(active[0].segment_id)
    else:
        annotation, value = MERGE_ANNOTATION, f"{active[0].segment_id},{active[1].segment_id}"
    parent = layout.find_active(hash_key(KEY)).segment_id
    await producer.open(parent)
    started = time.perf_counter()
    await requests.patch(
        ScalableTopic.KIND, "bench", "scaling", {"metadata": {"annotations": {annotation: value}}}
    )
    for _ in itertools.count():  # keep writing to the parent until it is sealed
        if not await producer.send():
            break
        await asyncio.sleep(0.001)
    while True:
        try:
            layout = await layout_of(store)
        except LookupError:
            layout = None
        if layout is not None and layout.epoch > 0 and not layout.get(parent).is_active:
            break
        await asyncio.sleep(0.002)
    await producer.open(layout.find_active(hash_key(KEY)).segment_id)
    assert await producer.send()
    return time.perf_counter() - started


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--operations", type=int, default=60)
    parser.add_argument("--pause", type=float, default=0.5, help="seconds between operations")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as directory:
        root = Path(directory)
        broker, url = await start_broker(root, "batch")
        controller = start_controller(root)
        try:
            async with (
                await EmbeddedStore.open(root / "store.db") as store,
                await EmbeddedStore.open(root / "store.db") as requests,
                aiohttp.ClientSession() as http,
            ):
                await requests.create(
                    {
                        "apiVersion": "scalabletopics.dev/v1alpha1",
                        "kind": "ScalableTopic",
                        "metadata": {"name": "scaling", "namespace": "bench"},
                        "spec": {"initialSegments": 1, "subscriptions": [{"name": "sub"}]},
                    }
                )
                async with asyncio.timeout(60):
                    while True:
                        try:
                            await layout_of(store)
                            break
                        except (LookupError, Exception):
                            await asyncio.sleep(0.05)
                producer = Producer(await Connection.open(http, url))
                latencies = {"split": [], "merge": []}
                for _ in range(args.operations):
                    kind = "split" if len((await layout_of(store)).active) == 1 else "merge"
                    latencies[kind].append(await one_operation(store, requests, producer))
                    # Operations are seconds apart in practice: let the leader's follow-up pass
                    # (placement check, subscriptions, GC) finish, as it would between them.
                    await asyncio.sleep(args.pause)
        finally:
            controller.terminate()
            broker.terminate()
            controller.wait()
            broker.wait()
    for kind, values in latencies.items():
        millis = [v * 1000 for v in values]
        print(
            f"{kind:5} latency (request -> producer writing to the new segment), "
            f"{len(millis)} operations: p50 {percentile(millis, 0.5):.1f} ms, "
            f"p99 {percentile(millis, 0.99):.1f} ms, max {max(millis):.1f} ms"
        )


if __name__ == "__main__":
    asyncio.run(main())
