"""Client benchmark: the public Python client against ``stctl standalone`` on loopback.

Prints:
- produce throughput: keyed 100 B messages over 1,000 keys with ``send_async`` (batching on,
  up to 10,000 messages unanswered), msgs/s;
- consume throughput: a QueueConsumer reading and acknowledging those messages, msgs/s;
- latency at a fixed rate: send -> durable receipt, and send -> received by a QueueConsumer,
  p50/p99 in milliseconds.
Figures only: nothing here asserts on timing.

    python benchmarks/bench_client.py [--messages 100000] [--rate 2000] [--seconds 5]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import tempfile
import time
from pathlib import Path

from standalone_service import start_standalone

from scalable_topics.client import Client

TOPIC = "default/bench"


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


async def produce_throughput(client: Client, messages: int) -> float:
    producer = await client.create_producer(TOPIC, batching_max_delay=0.002)
    payload = b"x" * 100
    started = time.perf_counter()
    futures = [await producer.send_async(payload, key=f"key-{n % 1000}") for n in range(messages)]
    await producer.flush()
    for future in futures:
        await future
    elapsed = time.perf_counter() - started
    await producer.close()
    return messages / elapsed


async def consume_throughput(client: Client, subscription: str, messages: int) -> float:
    consumer = await client.subscribe_queue(TOPIC, subscription, receive_queue_size=5000)
    started = time.perf_counter()
    for _ in range(messages):
        message = await consumer.receive()
        await consumer.acknowledge(message)
    await consumer.flush_acknowledgements()  # the figure includes making every ack durable
    elapsed = time.perf_counter() - started
    await consumer.close()
    return messages / elapsed


async def latency(client: Client, rate: int, seconds: float) -> tuple[list[float], list[float]]:
    """Send at ``rate`` msgs/s; per message: send -> receipt, send -> received."""
    consumer = await client.subscribe_queue(TOPIC, "latency", initial_position="Latest")
    producer = await client.create_producer(TOPIC, batching_max_delay=0.001)
    receipts: list[float] = []
    deliveries: list[float] = []
    total = int(rate * seconds)

    async def receive() -> None:
        for _ in range(total):
            message = await consumer.receive()
            sent = float(message.properties["sent"])
            deliveries.append((time.perf_counter() - sent) * 1000)
            await consumer.acknowledge(message)

    async def timed(future: asyncio.Future[object], sent: float) -> None:
        await future
        receipts.append((time.perf_counter() - sent) * 1000)

    receiving = asyncio.create_task(receive())
    timers = []
    started = time.perf_counter()
    for n in range(total):
        delay = started + n / rate - time.perf_counter()
        if delay > 0:
            await asyncio.sleep(delay)
        sent = time.perf_counter()
        future = await producer.send_async(
            b"y" * 100, key=f"key-{n % 1000}", properties={"sent": repr(sent)}
        )
        timers.append(asyncio.create_task(timed(future, sent)))  # type: ignore[arg-type]
    await asyncio.gather(*timers)
    await asyncio.wait_for(receiving, 60)
    await producer.close()
    await consumer.close()
    return receipts, deliveries


async def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--messages", type=int, default=100_000)
    parser.add_argument("--rate", type=int, default=2000)
    parser.add_argument("--seconds", type=float, default=5.0)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as directory:
        process, config = await start_standalone(Path(directory))
        try:
            async with Client.from_config(config) as client:
                admin = client.admin()
                await admin.create_topic(
                    TOPIC, initial_segments=4, subscriptions=[("bulk", "Queue")]
                )
                await admin.close()
                print(f"client benchmark (stctl standalone, 4 segments, {os.cpu_count()} cores)")
                rate = await produce_throughput(client, args.messages)
                print(
                    f"  produce {args.messages:,} x 100 B keyed, send_async: {rate:>10,.0f} msgs/s"
                )
                rate = await consume_throughput(client, "bulk", args.messages)
                print(f"  consume (QueueConsumer, individual acks):    {rate:>10,.0f} msgs/s")
                receipts, deliveries = await latency(client, args.rate, args.seconds)
                for name, values in (
                    ("send -> receipt", receipts),
                    ("send -> receive", deliveries),
                ):
                    print(
                        f"  {name} at {args.rate:,} msgs/s: p50 {percentile(values, 0.5):6.2f} ms"
                        f"  p99 {percentile(values, 0.99):6.2f} ms"
                    )
        finally:
            process.terminate()
            process.wait(timeout=30)


if __name__ == "__main__":
    asyncio.run(main())
