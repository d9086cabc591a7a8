"""A stream consumer of every topic of a namespace (matching property filters): one
StreamConsumer per topic of the set, all feeding one receive queue, acknowledged cumulatively
across the topics.

The shared queue hands out messages in the order they arrived, each topic's segments in their
order, so each key keeps its order within its topic as with a single topic. Acknowledging a
message cumulatively acknowledges, on every topic, everything handed out before it (the
position vector at that message: per topic and segment, the highest message handed out;
delivery_ledger.py). A topic leaving the set has its acknowledgements made durable before its
consumer closes; what it had queued and not handed out is dropped, and comes again to the
subscription's next consumer of the topic.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..protocol import MessageId
from ..tasks import gather_settled
from .consumer_message import ReceivedMessage
from .delivery_ledger import DeliveryLedger
from .namespace_consumer import NamespaceConsumer, RoutedMessage, TopicSet
from .ordered_consumer import check_ordered_options
from .receive_queue import QueuedMessage
from .stream_consumer import StreamConsumer
from .topic_mux import Feed
from .topic_watcher import TopicWatcher

if TYPE_CHECKING:
    from .client import Client

# Per topic (namespace/name), per segment: a message.
TopicVectors = dict[str, dict[int, MessageId]]


class NamespaceStreamConsumer(NamespaceConsumer[StreamConsumer]):
    """Create with ``await client.subscribe_stream(subscription=..., consumer_name=...,
    namespace=...)``."""

    def __init__(
        self,
        client: Client,
        topic_set: TopicSet,
        subscription: str,
        consumer_name: str,
        *,
        receive_queue_size: int,
    ) -> None:
        check_ordered_options(receive_queue_size, consumer_name)
        super().__init__(client, topic_set, subscription)
        self.consumer_name = consumer_name
        self._receive_queue_size = receive_queue_size
        self._ledger: DeliveryLedger[Feed[StreamConsumer]] = DeliveryLedger()

    def _make(self, feed: Feed[StreamConsumer], watcher: TopicWatcher) -> StreamConsumer:
        return StreamConsumer(
            self._client,
            watcher,
            self.subscription,
            self.consumer_name,
            receive_queue_size=self._receive_queue_size,
            sink=feed,
        )

    async def _start_consumer(self, consumer: StreamConsumer) -> None:
        await consumer._start()

    async def _close_consumer(self, consumer: StreamConsumer, *, unsubscribe: bool) -> None:
        # Everything acknowledged on the topic is durable before its segments go.
        try:
            await consumer.flush_acknowledgements()
        finally:
            await consumer.close()

    def _deliver(self, feed: Feed[StreamConsumer], item: QueuedMessage) -> ReceivedMessage:
        consumer = feed.consumer
        assert consumer is not None, "a feed has its consumer before anything arrives"
        message = consumer.accept(item)
        return RoutedMessage.routed(message, feed, self._ledger.record(feed, message.message_id))

    async def acknowledge_cumulative(
        self, message: ReceivedMessage | MessageId, *, durable: bool = False
    ) -> bool:
        """Acknowledge, on every topic, everything this consumer handed out up to ``message``
        (one it handed out: ValueError for a bare MessageId). With ``durable``, return once
        the brokers have it on disk. False when part of it could not be acknowledged: a
        segment moved to another consumer of its topic, or a topic's consumer closed meanwhile
        (it left the set); those messages are delivered again."""
        routed = self._routed(message)
        vector = self._ledger.cover(routed.number)
        outcomes = await gather_settled(
            *(_acknowledge_topic(feed, segments, durable) for feed, segments in vector.items())
        )
        return all(outcomes)

    async def flush_acknowledgements(self) -> TopicVectors:
        """Make the cumulative acknowledgements so far durable on every topic; returns the
        position vector now durable, per topic (as StreamConsumer.flush_acknowledgements)."""
        consumers = [(f.topic, f.consumer) for f in self._open_feeds() if f.consumer]
        vectors = await gather_settled(*(c.flush_acknowledgements() for _, c in consumers))
        return {t: v for (t, _), v in zip(consumers, vectors, strict=True) if v}

    def positions(self) -> TopicVectors:
        """The position vector: per topic attached now, per segment it reads, the last message
        acknowledged."""
        vectors = {f.topic: f.consumer.positions() for f in self._open_feeds() if f.consumer}
        return {topic: vector for topic, vector in vectors.items() if vector}

    @property
    def assigned_segments(self) -> dict[str, list[int]]:
        """Per topic attached now, the segments this consumer reads."""
        return {f.topic: f.consumer.assigned_segments for f in self._open_feeds() if f.consumer}


async def _acknowledge_topic(
    feed: Feed[StreamConsumer], segments: dict[int, MessageId], durable: bool
) -> bool:
    consumer = feed.consumer
    if not feed.open or consumer is None:
        return False
    outcomes = await gather_settled(
        *(consumer.acknowledge_cumulative(m, durable=durable) for m in segments.values())
    )
    return all(outcomes)
