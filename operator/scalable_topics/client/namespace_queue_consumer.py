"""A queue consumer of every topic of a namespace (matching property filters): one
QueueConsumer per topic of the set, all feeding one receive queue, messages acknowledged one by
one through the topic's consumer.

Each topic's consumer is the single-topic one, with its options: the same subscription and
consumer name on every topic, Shared or Key_Shared, acknowledgement timeouts, negative
acknowledgements and dead-lettering (to ``dead_letter_topic``, else ``<topic>-dlq`` of each
topic). Dead-letter topics in the namespace are topics of it like the others: without filters
that leave them out, this consumer reads them too.
"""

from __future__ import annotations

import secrets
from typing import TYPE_CHECKING

from ..protocol import InitialPosition, MessageId
from ..tasks import gather_settled
from .consumer_message import ReceivedMessage
from .namespace_consumer import NamespaceConsumer, RoutedMessage, TopicSet
from .queue_consumer import QueueConsumer, check_queue_options
from .receive_queue import QueuedMessage
from .topic_mux import Feed
from .topic_watcher import TopicWatcher

if TYPE_CHECKING:
    from .client import Client


class NamespaceQueueConsumer(NamespaceConsumer[QueueConsumer]):
    """Create with ``await client.subscribe_queue(subscription=..., namespace=...)``."""

    def __init__(
        self,
        client: Client,
        topic_set: TopicSet,
        subscription: str,
        *,
        consumer_name: str | None,
        key_ordered: bool,
        initial_position: InitialPosition,
        receive_queue_size: int,
        ack_timeout: float | None,
        nack_redelivery_delay: float,
        max_redeliveries: int | None,
        dead_letter_topic: str | None,
    ) -> None:
        check_queue_options(receive_queue_size, nack_redelivery_delay, max_redeliveries)
        super().__init__(client, topic_set, subscription)
        self.consumer_name = consumer_name or f"{client.client_name}-{secrets.token_hex(4)}"
        self._key_ordered = key_ordered
        self._initial_position = initial_position
        self._receive_queue_size = receive_queue_size
        self._ack_timeout = ack_timeout
        self._nack_delay = nack_redelivery_delay
        self._max_redeliveries = max_redeliveries
        self._dead_letter_topic = dead_letter_topic

    def _make(self, feed: Feed[QueueConsumer], watcher: TopicWatcher) -> QueueConsumer:
        return QueueConsumer(
            self._client,
            watcher,
            self.subscription,
            consumer_name=self.consumer_name,
            key_ordered=self._key_ordered,
            initial_position=self._initial_position,
            receive_queue_size=self._receive_queue_size,
            ack_timeout=self._ack_timeout,
            nack_redelivery_delay=self._nack_delay,
            max_redeliveries=self._max_redeliveries,
            sink=feed,
        )

    async def _start_consumer(self, consumer: QueueConsumer) -> None:
        await consumer._start(self._dead_letter_topic)

    async def _close_consumer(self, consumer: QueueConsumer, *, unsubscribe: bool) -> None:
        if unsubscribe:
            await consumer.unsubscribe()
        else:
            await consumer.close()

    def _deliver(self, feed: Feed[QueueConsumer], item: QueuedMessage) -> ReceivedMessage | None:
        consumer = feed.consumer
        assert consumer is not None, "a feed has its consumer before anything arrives"
        message = consumer.accept(item)
        return None if message is None else RoutedMessage.routed(message, feed)

    async def acknowledge(
        self, message: ReceivedMessage | MessageId, *, durable: bool = False
    ) -> bool:
        """Acknowledge one message (one this consumer handed out: ValueError for a bare
        MessageId), through its topic's consumer, as QueueConsumer.acknowledge does. False
        when that consumer is closed meanwhile (the topic left the set, or its consumer was
        opened again after a failure): nothing was acknowledged, and the message is delivered
        again."""
        routed = self._routed(message)
        consumer = routed.feed.consumer
        if not routed.feed.open or consumer is None:
            return False
        await consumer.acknowledge(routed, durable=durable)
        return True

    async def negative_acknowledge(self, message: ReceivedMessage) -> None:
        """Have the message delivered again, after a delay that grows with each redelivery
        (nothing to do when its topic's consumer is closed: it comes again anyway)."""
        routed = self._routed(message)
        consumer = routed.feed.consumer
        if routed.feed.open and consumer is not None:
            await consumer.negative_acknowledge(routed)

    async def flush_acknowledgements(self) -> None:
        """Return once every acknowledgement made so far, on every topic, is durable."""
        await gather_settled(
            *(f.consumer.flush_acknowledgements() for f in self._open_feeds() if f.consumer)
        )

    async def unsubscribe(self) -> None:
        """Close, and delete the subscription on every segment of every topic whose consumer
        is open (refused with ConsumerBusy while other consumers are attached); topics still
        retrying are left as they are."""
        await self._shut(unsubscribe=True)
