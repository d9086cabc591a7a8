"""The namespace consumers against real brokers and a controller, their topic set scripted by
the test (ScriptedTopics in place of the namespace watch): each topic's consumer is the real
single-topic one."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Any

import pytest
from client_cluster import ClientCluster
from namespace_topics import (
    ScriptedTopics,
    create_topics,
    parse,
    produce_each,
    qualified,
    receive_until,
)

from scalable_topics.client import Client, NotAuthorized, NotFound, ReceivedMessage
from scalable_topics.client.namespace_queue_consumer import NamespaceQueueConsumer
from scalable_topics.client.namespace_stream_consumer import NamespaceStreamConsumer
from scalable_topics.protocol import InitialPosition, MessageId
from support.eventually import eventually

pytestmark = pytest.mark.slow

STREAM = [("s", "Stream")]


async def queue_consumer(
    client: Client, topics: ScriptedTopics, subscription: str = "billing", **options: Any
) -> NamespaceQueueConsumer:
    settings: dict[str, Any] = {
        "consumer_name": None,
        "key_ordered": False,
        "initial_position": InitialPosition.EARLIEST,
        "receive_queue_size": 1000,
        "ack_timeout": None,
        "nack_redelivery_delay": 1.0,
        "max_redeliveries": None,
        "dead_letter_topic": None,
        **options,
    }
    consumer = NamespaceQueueConsumer(client, topics, subscription, **settings)
    return await client._started(consumer, consumer._start())


async def stream_consumer(
    client: Client, topics: ScriptedTopics, name: str = "c1", receive_queue_size: int = 1000
) -> NamespaceStreamConsumer:
    consumer = NamespaceStreamConsumer(
        client, topics, "s", name, receive_queue_size=receive_queue_size
    )
    return await client._started(consumer, consumer._start())


def by_topic_and_key(messages: Sequence[ReceivedMessage]) -> dict[tuple[str, str], list[int]]:
    grouped: dict[tuple[str, str], list[int]] = defaultdict(list)
    for message in messages:
        topic, key, sequence = parse(message)
        assert message.topic == topic  # the topic subscribed to, never a segment's
        grouped[topic, key].append(sequence)
    return dict(grouped)


async def markers_only(
    consumer: NamespaceQueueConsumer | NamespaceStreamConsumer, client: Client, names: Sequence[str]
) -> None:
    """Send a marker to each topic and receive until every marker came: nothing else may
    come first (everything before was acknowledged)."""
    markers = await produce_each(client, names, 1, start=1_000_000)
    received = await receive_until(consumer, markers, lambda message: None)
    assert sorted(m.payload.decode() for m in received) == sorted(markers)


async def test_a_queue_consumer_receives_every_topic_of_the_set_and_acknowledges_through_each(
    cluster: ClientCluster,
) -> None:
    async with cluster.client() as client:
        await create_topics(client, ["a", "b", "c"])
        topics = ScriptedTopics(["a", "b", "c"])
        consumer = await queue_consumer(client, topics)
        assert consumer.attached_topics == {qualified(n) for n in "abc"}
        sent = await produce_each(client, ["a", "b", "c"], 10)
        received = await receive_until(consumer, sent, consumer.acknowledge)
        assert sorted(m.payload.decode() for m in received) == sorted(sent)
        by_topic_and_key(received)  # each names its topic
        await consumer.flush_acknowledgements()
        await consumer.close()
        assert topics.closed and topics.listeners == 0

        again = await queue_consumer(client, ScriptedTopics(["a", "b", "c"]))
        await markers_only(again, client, ["a", "b", "c"])


async def test_acknowledgements_take_the_message_itself_and_nacks_go_back_to_its_topic(
    cluster: ClientCluster,
) -> None:
    async with cluster.client() as client:
        await create_topics(client, ["a", "b"])
        consumer = await queue_consumer(
            client, ScriptedTopics(["a", "b"]), nack_redelivery_delay=0.05
        )
        [sent] = await produce_each(client, ["b"], 1)
        message = await consumer.receive(wait_seconds=30)
        assert message.payload.decode() == sent and message.topic == qualified("b")
        with pytest.raises(ValueError, match="MessageId cannot say which topic"):
            await consumer.acknowledge(message.message_id)
        with pytest.raises(ValueError, match="MessageId cannot say which topic"):
            await consumer.acknowledge(ReceivedMessage(b"x", None, {}, None, 0, MessageId(0, 0), 0))
        await consumer.negative_acknowledge(message)
        again = await consumer.receive(wait_seconds=30)
        assert (again.payload, again.topic, again.redelivery_count) == (
            message.payload,
            message.topic,
            1,
        )
        assert await consumer.acknowledge(again, durable=True)


async def test_a_topic_added_to_the_set_is_consumed_and_one_removed_is_let_go(
    cluster: ClientCluster,
) -> None:
    async with cluster.client() as client, cluster.client() as producing:
        await create_topics(producing, ["a", "b"])
        topics = ScriptedTopics(["a"])
        consumer = await queue_consumer(client, topics)
        topics.change(added=["b"])
        await eventually(lambda: qualified("b") in consumer.attached_topics, "b attached")
        sent = await produce_each(producing, ["a", "b"], 5)
        await receive_until(consumer, sent, consumer.acknowledge)

        topics.change(removed=["a"])
        assert consumer.topics == {qualified("b")}
        # Its consumer closed and its DAG watch too: nothing else of the client used it.
        await eventually(lambda: qualified("a") not in client._watchers, "a's watch closed")
        assert qualified("b") in client._watchers
        # a's subscription has no consumer left: another consumer of it gets a's messages.
        later = await produce_each(producing, ["a"], 3, start=5)
        other = await queue_consumer(client, ScriptedTopics(["a"]), consumer_name="other")
        received = await receive_until(other, later, other.acknowledge)
        assert sorted(m.payload.decode() for m in received) == sorted(later)


async def test_a_topic_that_cannot_be_subscribed_is_retried_without_stalling_the_others(
    cluster: ClientCluster,
) -> None:
    async with cluster.client() as client:
        await create_topics(client, ["a"])
        # "late" does not exist yet: its consumer fails (NotFound) and is retried.
        consumer = await queue_consumer(client, ScriptedTopics(["a", "late"]))
        assert consumer.attached_topics == {qualified("a")}
        assert isinstance(consumer.retrying_topics[qualified("late")], NotFound)
        sent = await produce_each(client, ["a"], 5)
        await receive_until(consumer, sent, consumer.acknowledge)

        await create_topics(client, ["late"])
        await eventually(lambda: qualified("late") in consumer.attached_topics, "late attached")
        assert consumer.retrying_topics == {}
        later = await produce_each(client, ["late", "a"], 3)
        await receive_until(consumer, later, consumer.acknowledge)


async def test_the_end_of_the_watch_is_raised_by_receive(cluster: ClientCluster) -> None:
    async with cluster.client() as client:
        await create_topics(client, ["a"])
        topics = ScriptedTopics(["a"])
        consumer = await queue_consumer(client, topics)
        topics.end(NotAuthorized("no role on namespace shop"))
        with pytest.raises(NotAuthorized, match="no role on namespace shop"):
            await consumer.receive(wait_seconds=30)


async def test_a_stream_consumer_keeps_each_keys_order_per_topic_and_acknowledges_every_topic(
    cluster: ClientCluster,
) -> None:
    async with cluster.client() as client:
        await create_topics(client, ["a", "b"], subscriptions=STREAM)
        consumer = await stream_consumer(client, ScriptedTopics(["a", "b"]))
        sent = await produce_each(client, ["a", "b"], 20)
        received = await receive_until(consumer, sent, lambda message: None)
        assert len(received) == len(sent)
        for (topic, key), sequences in by_topic_and_key(received).items():
            assert sequences == [n for n in range(20) if f"k{n % 3}" == key], (topic, key)

        # The last message's acknowledgement covers both topics.
        assert await consumer.acknowledge_cumulative(received[-1])
        durable = await consumer.flush_acknowledgements()
        assert set(durable) == {qualified("a"), qualified("b")}
        assert consumer.positions() == durable
        await consumer.close()

        again = await stream_consumer(client, ScriptedTopics(["a", "b"]))
        await markers_only(again, client, ["a", "b"])


async def test_a_topic_removed_mid_stream_has_its_acknowledgements_made_durable(
    cluster: ClientCluster,
) -> None:
    async with cluster.client() as client:
        await create_topics(client, ["a", "b"], subscriptions=STREAM, segments=1)
        topics = ScriptedTopics(["a", "b"])
        consumer = await stream_consumer(client, topics, receive_queue_size=4)
        sent = await produce_each(client, ["a"], 12)
        first = [await consumer.receive(wait_seconds=30) for _ in range(5)]
        assert [parse(m)[2] for m in first] == [0, 1, 2, 3, 4]
        await consumer.acknowledge_cumulative(first[-1])  # not waited for: sent
        topics.change(removed=["a"])
        topics.change(added=["a"])  # back: a new consumer, once the old one has closed
        rest = await receive_until(consumer, sent[5:], consumer.acknowledge_cumulative)
        # Everything acknowledged stayed acknowledged; what was queued came again, in order.
        assert [parse(m)[2] for m in rest] == list(range(5, 12))


async def test_a_topic_deleted_and_created_again_is_consumed_anew(cluster: ClientCluster) -> None:
    async with cluster.client() as client:
        await create_topics(client, ["a"])
        topics = ScriptedTopics(["a"])
        consumer = await queue_consumer(client, topics)
        old = await produce_each(client, ["a"], 3)
        await receive_until(consumer, old, lambda message: None)  # never acknowledged
        async with client.admin() as admin:
            await admin.delete_topic(qualified("a"))
            await eventually(lambda: _gone(admin, qualified("a")), "the topic deleted", timeout=60)
        await create_topics(client, ["a"])
        topics.change(added=["a"], removed=["a"])
        new = await produce_each(client, ["a"], 3, start=100)
        received = await receive_until(consumer, new, consumer.acknowledge)
        assert sorted(m.payload.decode() for m in received) == sorted(new)


async def _gone(admin: Any, topic: str) -> bool:
    try:
        await admin.describe_topic(topic)
    except NotFound:
        return True
    return False
