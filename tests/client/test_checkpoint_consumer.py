"""CheckpointConsumer end to end, and the checkpoint's serialized form."""

from __future__ import annotations

import pytest
from client_cluster import ClientCluster, by_key, parse, produce

from scalable_topics.client import Timeout
from scalable_topics.client.checkpoint import Checkpoint
from scalable_topics.client.checkpoint_consumer import CheckpointConsumer
from scalable_topics.protocol import MessageId

KEYS = [f"k{n}" for n in range(6)]


async def consume(
    consumer: CheckpointConsumer, received: list[tuple[str, int]], quiet: float = 1.5
) -> None:
    """Receive until nothing comes for ``quiet`` seconds after a checkpoint (which lets sealed
    parents drain, so that their children open)."""
    idle = 0
    while idle < 2:
        try:
            message = await consumer.receive(wait_seconds=quiet)
        except Timeout:
            await consumer.checkpoint()
            idle += 1
            continue
        idle = 0
        received.append(parse(message.payload))


def test_a_checkpoint_survives_its_bytes() -> None:
    checkpoint = Checkpoint(7, 5, {1: MessageId(1, 10, 2), 4: MessageId(4, 0, 0)})
    assert Checkpoint.from_bytes(checkpoint.to_bytes()) == checkpoint
    with pytest.raises(ValueError, match="format 9"):
        Checkpoint.from_bytes(b'{"version":9}')
    with pytest.raises(ValueError, match="not a checkpoint"):
        Checkpoint.from_bytes(b"\x00")


@pytest.mark.slow
async def test_every_message_once_in_key_order_across_a_split_and_a_merge(
    cluster: ClientCluster,
) -> None:
    await cluster.create_topic("orders", initial=2, subscriptions=[("c", "Checkpoint")])
    async with cluster.client() as client:
        consumer = await client.subscribe_checkpoint("orders", "c", "c1")
        sent = await produce(client, "orders", KEYS, range(0, 10))
        first, _ = await cluster.active_ids("orders")
        await cluster.split("orders", first)
        sent += await produce(client, "orders", KEYS, range(10, 20))
        active = await cluster.active_ids("orders")
        await cluster.merge("orders", active[1], active[2])
        sent += await produce(client, "orders", KEYS, range(20, 30))

        received: list[tuple[str, int]] = []
        await consume(consumer, received)
        assert by_key(received) == by_key(sent)
        assert len(received) == len(sent)


@pytest.mark.slow
async def test_seek_back_to_a_checkpoint_taken_before_a_split(cluster: ClientCluster) -> None:
    await cluster.create_topic("orders", initial=1, subscriptions=[("c", "Checkpoint")])
    async with cluster.client() as client:
        consumer = await client.subscribe_checkpoint("orders", "c", "c1")
        before = await produce(client, "orders", KEYS, range(0, 10))
        received: list[tuple[str, int]] = []
        await consume(consumer, received)
        assert by_key(received) == by_key(before)
        saved = (await consumer.checkpoint()).to_bytes()

        after = await produce(client, "orders", KEYS, range(10, 20))
        (parent,) = await cluster.active_ids("orders")
        await cluster.split("orders", parent)
        after += await produce(client, "orders", KEYS, range(20, 30))

        # Read some of what follows the checkpoint without taking another one: the parent
        # keeps its backlog, so it stays assigned while the children wait for it.
        for _ in range(len(KEYS) * 5):
            message = await consumer.receive(wait_seconds=10)
            assert parse(message.payload)[1] >= 10
        assert len(consumer.assigned_segments) == 3

        await consumer.seek(Checkpoint.from_bytes(saved))
        replayed: list[tuple[str, int]] = []
        await consume(consumer, replayed)
        # Everything after the checkpoint, from the sealed parent and then the children, once
        # each and in each key's order.
        assert by_key(replayed) == by_key(after)
        assert len(replayed) == len(after)
