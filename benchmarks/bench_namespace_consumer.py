"""Namespace consumer benchmark: the multi-topic queue and stream consumers against
``stctl standalone`` on loopback (an embedded store, a controller and a broker; the token of
its client configuration). Prints:

- start: ``subscribe_queue(namespace=...)`` over N topics (``--topics``), seconds until every
  topic's consumer has subscribed, and the client's memory for it (tracemalloc, per topic);
- throughput: M messages (``--messages``) spread over the topics, drained and acknowledged one
  by one by a namespace queue consumer subscribed before they were sent, then again from the
  start, acknowledged cumulatively (each message), by a namespace stream consumer subscribed
  after, msgs/s; beside it, the same count from one topic by a single-topic queue consumer
  subscribed before they were sent;
- attach latency: topics created one at a time after the subscribe (``--creations``), from
  the admin create call returning to the consumer holding that topic's consumer open,
  p50/p99 in milliseconds (the namespace watch's diff, then DAG watch and subscribe);
- the delivery ledger's memory per message handed out and not yet acknowledged.
Figures only: nothing here asserts on timing.

    python benchmarks/bench_namespace_consumer.py [--topics 50] [--messages 20000]
        [--creations 30]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import tempfile
import time
import tracemalloc
from collections.abc import Awaitable, Callable
from pathlib import Path

from standalone_service import start_standalone

from scalable_topics.client import Client, NamespaceQueueConsumer, NamespaceStreamConsumer
from scalable_topics.client.admin import Admin
from scalable_topics.client.delivery_ledger import DeliveryLedger
from scalable_topics.protocol import MessageId

NAMESPACE = "bench"
SINGLE = "default/single"
WAIT_SECONDS = 120.0


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


async def until(check: Callable[[], Awaitable[bool]], interval: float) -> None:
    """Poll ``check``: the figures need no event, only a bound on the wait."""
    async with asyncio.timeout(WAIT_SECONDS):
        while True:
            if await check():
                return
            await asyncio.sleep(interval)


async def create_ready(admin: Admin, topics: list[str]) -> None:
    for topic in topics:
        await admin.create_topic(topic, 1, subscriptions=[("s", "Stream")])
    for topic in topics:

        async def ready(topic: str = topic) -> bool:
            return (await admin.describe_topic(topic))["phase"] == "Ready"

        await until(ready, 0.05)


async def produce(client: Client, topics: list[str], messages: int) -> None:
    producers = [await client.create_producer(topic) for topic in topics]
    for index in range(messages):
        await producers[index % len(producers)].send_async(b"x" * 100, key=f"k{index % 100}")
    for producer in producers:
        await producer.close()


async def drain_queue(consumer: NamespaceQueueConsumer, messages: int) -> float:
    started = time.perf_counter()
    for _ in range(messages):
        await consumer.acknowledge(await consumer.receive(WAIT_SECONDS))
    return messages / (time.perf_counter() - started)


async def drain_stream(consumer: NamespaceStreamConsumer, messages: int) -> float:
    started = time.perf_counter()
    for _ in range(messages):
        await consumer.acknowledge_cumulative(await consumer.receive(WAIT_SECONDS))
    return messages / (time.perf_counter() - started)


async def attach_latency(
    admin: Admin, consumer: NamespaceQueueConsumer, creations: int
) -> list[float]:
    latencies = []
    for index in range(creations):
        topic = f"{NAMESPACE}/late-{index}"
        await admin.create_topic(topic, 1)
        returned = time.perf_counter()

        async def attached(topic: str = topic) -> bool:
            return topic in consumer.attached_topics

        await until(attached, 0.001)
        latencies.append((time.perf_counter() - returned) * 1000)
    return latencies


def ledger_bytes_per_entry(entries: int) -> float:
    ledger: DeliveryLedger[str] = DeliveryLedger()
    ids = [MessageId(index % 4, index) for index in range(entries)]
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    for message_id in ids:
        ledger.record("bench/t", message_id)
    after = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    return (after - before) / entries


async def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--topics", type=int, default=50)
    parser.add_argument("--messages", type=int, default=20_000)
    parser.add_argument("--creations", type=int, default=30)
    args = parser.parse_args()
    topics = [f"{NAMESPACE}/t{index}" for index in range(args.topics)]
    with tempfile.TemporaryDirectory() as directory:
        process, config = await start_standalone(Path(directory))
        try:
            async with Client.from_config(config) as client, Admin.from_config(config) as admin:
                await create_ready(admin, [*topics, SINGLE])
                print(f"namespace consumer benchmark (stctl standalone, {os.cpu_count()} cores)")

                tracemalloc.start()
                before = tracemalloc.get_traced_memory()[0]
                started = time.perf_counter()
                queue = await client.subscribe_queue(subscription="q", namespace=NAMESPACE)
                elapsed = time.perf_counter() - started
                held = tracemalloc.get_traced_memory()[0] - before
                tracemalloc.stop()
                print(
                    f"  subscribe over {args.topics} topics: {elapsed:6.2f} s until all "
                    f"subscribed; client memory {held / args.topics / 1024:6.1f} KiB per topic"
                )

                await produce(client, topics, args.messages)
                rate = await drain_queue(queue, args.messages)
                print(f"  namespace queue consumer, {args.messages} messages: {rate:8.0f} msgs/s")
                stream = await client.subscribe_stream(
                    subscription="s", consumer_name="bench", namespace=NAMESPACE
                )
                rate = await drain_stream(stream, args.messages)
                print(f"  namespace stream consumer (cumulative ack each): {rate:8.0f} msgs/s")
                await stream.close()

                # Subscribed before producing, as the namespace queue consumer was.
                single = await client.subscribe_queue(SINGLE, "q")
                await produce(client, [SINGLE], args.messages)
                started = time.perf_counter()
                for _ in range(args.messages):
                    await single.acknowledge(await single.receive(WAIT_SECONDS))
                rate = args.messages / (time.perf_counter() - started)
                print(f"  single-topic queue consumer, same count: {rate:8.0f} msgs/s")
                await single.close()

                latencies = await attach_latency(admin, queue, args.creations)
                print(
                    f"  topic created -> attached, {args.creations} one at a time: "
                    f"p50 {percentile(latencies, 0.5):7.1f} ms  "
                    f"p99 {percentile(latencies, 0.99):7.1f} ms"
                )
                await queue.close()
            print(
                f"  delivery ledger: {ledger_bytes_per_entry(100_000):5.0f} bytes per message "
                "handed out and not yet acknowledged"
            )
        finally:
            process.terminate()
            process.wait(timeout=30)


if __name__ == "__main__":
    asyncio.run(main())
