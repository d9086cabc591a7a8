"""StreamConsumer end to end: real brokers and a controller, the public client API."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest
from client_cluster import ClientCluster, by_key, parse, produce

from scalable_topics.client import Timeout
from scalable_topics.client.stream_consumer import StreamConsumer

pytestmark = pytest.mark.slow

KEYS = [f"k{n}" for n in range(8)]


async def consume(
    consumer: StreamConsumer, received: list[tuple[str, int]], quiet: float = 2.0
) -> None:
    """Receive and acknowledge until nothing comes for ``quiet`` seconds."""
    while True:
        try:
            message = await consumer.receive(wait_seconds=quiet)
        except Timeout:
            return
        received.append(parse(message.payload))
        await consumer.acknowledge_cumulative(message)


async def consume_until(
    consumer: StreamConsumer, received: list[tuple[str, int]], done: Callable[[], bool]
) -> None:
    """Receive and acknowledge until ``done()``."""
    while not done():
        try:
            message = await consumer.receive(wait_seconds=0.2)
        except Timeout:
            continue
        received.append(parse(message.payload))
        await consumer.acknowledge_cumulative(message)


async def test_each_key_in_order_exactly_once_across_a_split_and_a_merge(
    cluster: ClientCluster,
) -> None:
    await cluster.create_topic("orders", initial=2, subscriptions=[("s", "Stream")])
    async with cluster.client() as client:
        consumer = await client.subscribe_stream("orders", "s", "c1")
        sent = await produce(client, "orders", KEYS, range(0, 10))
        first, _ = await cluster.active_ids("orders")
        await cluster.split("orders", first)
        sent += await produce(client, "orders", KEYS, range(10, 20))
        active = await cluster.active_ids("orders")
        await cluster.merge("orders", active[1], active[2])
        sent += await produce(client, "orders", KEYS, range(20, 30))

        received: list[tuple[str, int]] = []
        await consume(consumer, received)
        assert by_key(received) == by_key(sent)  # per-key order, nothing twice
        assert len(received) == len(sent)
        assert set(consumer.positions()) <= set(consumer.assigned_segments)


async def test_consumers_share_segments_and_one_leaving_hands_them_over(
    cluster: ClientCluster,
) -> None:
    await cluster.create_topic("orders", initial=4, subscriptions=[("s", "Stream")])
    async with cluster.client() as client:
        a = await client.subscribe_stream("orders", "s", "a")
        b = await client.subscribe_stream("orders", "s", "b")
        async with asyncio.timeout(10):
            while len(a.assigned_segments) != 2 or len(b.assigned_segments) != 2:
                await asyncio.sleep(0.05)
        assert set(a.assigned_segments).isdisjoint(b.assigned_segments)

        sent = await produce(client, "orders", KEYS, range(0, 10))
        from_a: list[tuple[str, int]] = []
        from_b: list[tuple[str, int]] = []

        # Until everything came: b may wait for a to let go of its segments first.
        def everything_came() -> bool:
            return len(from_a) + len(from_b) >= len(sent)

        async with asyncio.timeout(30):
            await asyncio.gather(
                consume_until(a, from_a, everything_came), consume_until(b, from_b, everything_came)
            )
        assert from_a and from_b
        await a.close()

        async with asyncio.timeout(10):
            while len(b.assigned_segments) != 4:
                await asyncio.sleep(0.05)
        sent += await produce(client, "orders", KEYS, range(10, 20))
        await consume(b, from_b)
        # Every message acknowledged once, each key in order: nothing acknowledged came back.
        assert sorted(from_a + from_b) == sorted(sent)
        for key, sequences in by_key(from_b).items():
            assert sequences == sorted(sequences), key


async def test_a_broker_killed_and_restarted_loses_nothing(cluster: ClientCluster) -> None:
    await cluster.create_topic("orders", initial=2, subscriptions=[("s", "Stream")])
    async with cluster.client(operation_timeout=20) as client:
        consumer = await client.subscribe_stream("orders", "s", "c1", receive_queue_size=20)
        sent = await produce(client, "orders", KEYS, range(0, 20))
        received: list[tuple[str, int]] = []
        for _ in range(len(sent) // 3):
            message = await consumer.receive(wait_seconds=10)
            received.append(parse(message.payload))
            await consumer.acknowledge_cumulative(message)

        for broker in cluster.brokers:
            broker.kill()
        await asyncio.gather(*(broker.start() for broker in cluster.brokers))

        await consume(consumer, received, quiet=3.0)
        assert by_key(received) == by_key(sent)
