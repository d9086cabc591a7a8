"""``subscribe_queue`` and ``subscribe_stream`` with ``namespace=`` end to end: the real
namespace watch, real brokers and a controller; topics created through the admin API."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import pytest
from client_cluster import ClientCluster
from namespace_topics import (
    NAMESPACE,
    create_topics,
    parse,
    produce_each,
    qualified,
    receive_until,
)

from scalable_topics.client import (
    Client,
    NamespaceQueueConsumer,
    NamespaceStreamConsumer,
    QueueConsumer,
    SyncClient,
    SyncNamespaceQueueConsumer,
)
from scalable_topics.model.resources import ScalableTopic
from support.eventually import eventually

STREAM = [("s", "Stream")]


async def test_a_consumer_has_one_source_a_topic_or_a_namespace() -> None:
    async with Client("ws://127.0.0.1:1") as client:  # refused before anything connects
        with pytest.raises(ValueError, match="not both"):
            await client.subscribe_queue("orders", "s", namespace=NAMESPACE)
        with pytest.raises(ValueError, match="give the topic to consume, or namespace="):
            await client.subscribe_queue(subscription="s")
        with pytest.raises(ValueError, match="filters select topics of a namespace"):
            await client.subscribe_queue("orders", "s", filters={"team": "a"})  # type: ignore[call-overload]
        with pytest.raises(ValueError, match="give the subscription"):
            await client.subscribe_queue(namespace=NAMESPACE)
        with pytest.raises(ValueError, match="not both"):
            await client.subscribe_stream("orders", "s", "c1", namespace=NAMESPACE)  # type: ignore[call-overload]
        with pytest.raises(ValueError, match="need a consumer_name"):
            await client.subscribe_stream(subscription="s", namespace=NAMESPACE)
        with pytest.raises(ValueError, match="receive_queue_size"):
            await client.subscribe_queue(
                subscription="s", namespace=NAMESPACE, receive_queue_size=0
            )
        with pytest.raises(ValueError, match="invalid subscription"):
            await client.subscribe_queue(subscription="no spaces", namespace=NAMESPACE)


async def set_properties(cluster: ClientCluster, name: str, **properties: str) -> None:
    await cluster.store.patch(
        ScalableTopic.KIND, NAMESPACE, name, {"spec": {"properties": properties}}
    )


def payloads(messages: Sequence[object]) -> list[str]:
    return sorted(m.payload.decode() for m in messages)  # type: ignore[attr-defined]


@pytest.mark.slow
async def test_a_queue_consumer_of_a_namespace_reads_every_topic_and_one_created_later(
    cluster: ClientCluster,
) -> None:
    async with cluster.client() as client:
        await create_topics(client, ["a", "b"])
        await create_topics(client, ["default/elsewhere"])  # another namespace
        consumer = await client.subscribe_queue(subscription="billing", namespace=NAMESPACE)
        assert isinstance(consumer, NamespaceQueueConsumer)
        assert consumer.attached_topics == {qualified("a"), qualified("b")}
        sent = await produce_each(client, ["a", "b"], 5)
        received = await receive_until(consumer, sent, consumer.acknowledge)
        assert payloads(received) == sorted(sent)
        assert {m.topic for m in received} == {qualified("a"), qualified("b")}

        await create_topics(client, ["c"])  # created after the subscribe: a diff
        await eventually(lambda: qualified("c") in consumer.attached_topics, "c attached")
        later = await produce_each(client, ["c", "a"], 3, start=5)
        received = await receive_until(consumer, later, consumer.acknowledge)
        assert payloads(received) == sorted(later)

        # The single-topic consumer names its topic too.
        single = await client.subscribe_queue("shop/a", "audit")
        assert isinstance(single, QueueConsumer)
        assert (await single.receive(wait_seconds=30)).topic == qualified("a")


@pytest.mark.slow
async def test_filters_attach_only_the_topics_whose_properties_match(
    cluster: ClientCluster,
) -> None:
    async with cluster.client() as client:
        await create_topics(client, ["red-1", "red-2"], properties={"team": "red", "tier": "1"})
        await create_topics(client, ["blue"], properties={"team": "blue", "tier": "1"})
        consumer = await client.subscribe_queue(
            subscription="billing", namespace=NAMESPACE, filters={"team": "red", "tier": "1"}
        )
        assert consumer.attached_topics == {qualified("red-1"), qualified("red-2")}
        await produce_each(client, ["blue"], 5)
        sent = await produce_each(client, ["red-1", "red-2"], 5)
        received = await receive_until(consumer, sent, consumer.acknowledge)
        # Blue's messages were sent first: none of them came.
        assert payloads(received) == sorted(sent)
        assert consumer.filters == {"team": "red", "tier": "1"}


@pytest.mark.slow
async def test_a_stream_consumer_of_a_namespace_acknowledges_every_topic_cumulatively(
    cluster: ClientCluster,
) -> None:
    async with cluster.client() as client:
        await create_topics(client, ["a", "b"], subscriptions=STREAM)
        consumer = await client.subscribe_stream(
            subscription="s", consumer_name="c1", namespace=NAMESPACE
        )
        assert isinstance(consumer, NamespaceStreamConsumer)
        sent = await produce_each(client, ["a", "b"], 10)
        received = await receive_until(consumer, sent, lambda message: None)
        assert payloads(received) == sorted(sent)
        assert await consumer.acknowledge_cumulative(received[-1])
        await consumer.close()

        again = await client.subscribe_stream(
            subscription="s", consumer_name="c1", namespace=NAMESPACE
        )
        markers = await produce_each(client, ["a", "b"], 1, start=100)
        received = await receive_until(again, markers, lambda message: None)
        assert payloads(received) == sorted(markers)  # nothing acknowledged came again


@pytest.mark.slow
async def test_a_topic_moved_out_of_the_filter_mid_stream_keeps_what_was_acknowledged(
    cluster: ClientCluster,
) -> None:
    async with cluster.client() as client:
        await create_topics(
            client, ["a", "b"], subscriptions=STREAM, properties={"team": "red"}, segments=1
        )
        consumer = await client.subscribe_stream(
            subscription="s",
            consumer_name="c1",
            namespace=NAMESPACE,
            filters={"team": "red"},
            receive_queue_size=4,
        )
        sent = await produce_each(client, ["a"], 12)
        first = [await consumer.receive(wait_seconds=30) for _ in range(5)]
        assert [parse(m)[2] for m in first] == [0, 1, 2, 3, 4]
        assert await consumer.acknowledge_cumulative(first[-1])

        await set_properties(cluster, "a", team="blue")  # out of the filter
        await eventually(lambda: qualified("a") not in consumer.topics, "a let go")
        await set_properties(cluster, "a", team="red")  # and back
        rest = await receive_until(consumer, sent[5:], consumer.acknowledge_cumulative)
        assert [parse(m)[2] for m in rest] == list(range(5, 12))


@pytest.mark.slow
async def test_the_blocking_client_consumes_a_namespace(cluster: ClientCluster) -> None:
    async with cluster.client() as client:
        await create_topics(client, ["a", "b"])
        sent = await produce_each(client, ["a", "b"], 3)

    def consume() -> list[str]:
        with SyncClient(cluster.service_url) as client:
            consumer = client.subscribe_queue(subscription="billing", namespace=NAMESPACE)
            assert isinstance(consumer, SyncNamespaceQueueConsumer)
            assert consumer.attached_topics == {qualified("a"), qualified("b")}
            received = []
            for message in consumer:
                received.append(message.payload.decode())
                assert consumer.acknowledge(message)
                if len(received) == len(sent):
                    break
            consumer.close()
            return received

    assert sorted(await asyncio.to_thread(consume)) == sorted(sent)
