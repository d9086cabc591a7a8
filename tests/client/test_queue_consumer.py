"""QueueConsumer end to end: real brokers and a controller, the public client API."""

from __future__ import annotations

import asyncio
from collections import Counter

import pytest
from client_cluster import ClientCluster, by_key, parse, produce

from scalable_topics.client import Timeout
from scalable_topics.client.queue_consumer import ORIGIN_MESSAGE_ID_PROPERTY, QueueConsumer

pytestmark = pytest.mark.slow

KEYS = [f"k{n}" for n in range(8)]


async def drain(consumer: QueueConsumer, quiet: float = 1.0) -> list[tuple[str, int]]:
    """Receive and acknowledge until nothing comes for ``quiet`` seconds."""
    received = []
    while True:
        try:
            message = await consumer.receive(wait_seconds=quiet)
        except Timeout:
            return received
        received.append(parse(message.payload))
        await consumer.acknowledge(message)


async def test_every_message_once_across_a_split_and_a_merge(cluster: ClientCluster) -> None:
    await cluster.create_topic("orders", initial=2)
    async with cluster.client() as client:
        consumer = await client.subscribe_queue("orders", "billing")
        sent = await produce(client, "orders", KEYS, range(0, 10))
        first, _ = await cluster.active_ids("orders")
        await cluster.split("orders", first)
        sent += await produce(client, "orders", KEYS, range(10, 20))
        active = await cluster.active_ids("orders")
        await cluster.merge("orders", active[1], active[2])
        sent += await produce(client, "orders", KEYS, range(20, 30))

        received = await drain(consumer)
        assert Counter(received) == Counter(sent)  # each exactly once
        assert len(received) == len(sent)
        await consumer.close()

        # Everything was acknowledged durably: a new consumer of the subscription gets nothing.
        again = await client.subscribe_queue("orders", "billing")
        assert await drain(again, quiet=0.5) == []


async def test_negative_acknowledgements_redeliver_with_a_growing_count(
    cluster: ClientCluster,
) -> None:
    await cluster.create_topic("orders", initial=1)
    async with cluster.client() as client:
        consumer = await client.subscribe_queue("orders", "s", nack_redelivery_delay=0.05)
        await produce(client, "orders", ["a"], range(1))
        counts = []
        for _ in range(3):
            message = await consumer.receive(wait_seconds=5)
            counts.append(message.redelivery_count)
            assert parse(message.payload) == ("a", 0)
            await consumer.negative_acknowledge(message)
        message = await consumer.receive(wait_seconds=5)
        await consumer.acknowledge(message)
        assert counts == [0, 1, 2]
        assert message.redelivery_count == 3
        with pytest.raises(Timeout):
            await consumer.receive(wait_seconds=0.5)


async def test_unacknowledged_messages_come_back_after_the_ack_timeout(
    cluster: ClientCluster,
) -> None:
    await cluster.create_topic("orders", initial=2)
    async with cluster.client() as client:
        consumer = await client.subscribe_queue("orders", "s", ack_timeout=0.5)
        sent = await produce(client, "orders", ["a", "b"], range(2))
        first = [await consumer.receive(wait_seconds=5) for _ in sent]  # none acknowledged
        assert {m.redelivery_count for m in first} == {0}
        again = [await consumer.receive(wait_seconds=5) for _ in sent]
        assert {m.message_id for m in again} == {m.message_id for m in first}
        assert {m.redelivery_count for m in again} == {1}
        for message in again:
            await consumer.acknowledge(message)
        with pytest.raises(Timeout):
            await consumer.receive(wait_seconds=1.0)


async def test_key_ordered_keeps_each_keys_order_across_a_split(cluster: ClientCluster) -> None:
    await cluster.create_topic("orders", initial=1)
    async with cluster.client() as client:
        # The subscription exists before the split, so the children get it at Earliest.
        await (await client.subscribe_queue("orders", "s", key_ordered=True)).close()
        sent = await produce(client, "orders", KEYS, range(0, 15))
        (parent,) = await cluster.active_ids("orders")
        await cluster.split("orders", parent)
        sent += await produce(client, "orders", KEYS, range(15, 30))

        # The parent's backlog and the children are read at once; the brokers hold the
        # children back until the parent is drained.
        consumer = await client.subscribe_queue(
            "orders", "s", key_ordered=True, receive_queue_size=10
        )
        received = await drain(consumer)
        assert by_key(received) == by_key(sent)


async def test_a_message_delivered_too_often_goes_to_the_dead_letter_topic(
    cluster: ClientCluster,
) -> None:
    await cluster.create_topic("orders", initial=1)
    await cluster.create_topic("orders-dlq", initial=1)
    async with cluster.client() as client:
        dead = await client.subscribe_queue("orders-dlq", "inspect")
        consumer = await client.subscribe_queue(
            "orders", "s", nack_redelivery_delay=0.05, max_redeliveries=2
        )
        await produce(client, "orders", ["poison", "fine"], range(1))
        seen: list[tuple[str, int]] = []
        async with asyncio.timeout(10):
            while len(seen) < 3:
                message = await consumer.receive()
                key, _ = parse(message.payload)
                seen.append((key, message.redelivery_count))
                if key == "poison":
                    await consumer.negative_acknowledge(message)
                else:
                    await consumer.acknowledge(message)
        assert sorted(seen) == [("fine", 0), ("poison", 0), ("poison", 1)]

        # The third delivery is dead-lettered as the application asks for the next message,
        # and acknowledged on the original subscription: it never comes back.
        waiting = asyncio.create_task(consumer.receive(wait_seconds=3))
        letter = await dead.receive(wait_seconds=10)
        assert parse(letter.payload) == ("poison", 0)
        assert letter.key == "poison"
        assert letter.properties[ORIGIN_MESSAGE_ID_PROPERTY].startswith("0:")
        await dead.acknowledge(letter)
        with pytest.raises(Timeout):
            await waiting


async def test_a_message_acknowledged_across_a_reconnect_is_not_handed_out_again(
    cluster: ClientCluster,
) -> None:
    """Received on a session that then dropped, acknowledged while the consumer reconnects:
    the broker sends the message again on the new session, and the consumer drops it once the
    acknowledgement it sent there is answered."""
    await cluster.create_topic("orders", initial=1)
    async with cluster.client() as client:
        consumer = await client.subscribe_queue("orders", "billing")
        producer = await client.create_producer("orders")
        for sequence in range(20):
            await producer.send(f"k:{sequence}".encode(), key="k")
        received = [await consumer.receive(wait_seconds=10) for _ in range(20)]
        [node] = (await client.watch("orders")).layout.segments.values()
        assert node.broker_url is not None
        await (await client.pool.get(node.broker_url)).close()  # the session drops
        for message in received:
            await consumer.acknowledge(message)  # sent on the next session
        await consumer.flush_acknowledgements()
        assert await drain(consumer, quiet=2.0) == []
