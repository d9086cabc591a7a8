"""A queue consumer: every segment of the topic at once, messages acknowledged one by one.

It attaches to every segment of the DAG, Active and Sealed (a sealed one is closed once its
EndOfSegment says it is drained), and to every segment that appears later, with one Shared
subscription per segment, or Key_Shared when ``key_ordered`` (the brokers then hold a child
back until its parents are drained, so each key's order holds across splits and merges).

On top of the brokers' redelivery it adds the client-side parts: acknowledgement timeouts,
growing delays for negative acknowledgements, and a dead-letter topic for messages delivered
too often.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
from collections import defaultdict
from collections.abc import AsyncIterator, Callable, Coroutine
from typing import TYPE_CHECKING, Any

from ..model.segment import SegmentState
from ..protocol import InitialPosition, MessageId, SegmentSubscriptionType
from ..tasks import TaskOwner
from .ack_timeouts import AckTimeouts
from .consumer_message import ReceivedMessage, message_id_of, until_closed
from .errors import ClientClosed, ClientError, NotFound, Timeout
from .receive_queue import MessageSink, QueuedMessage, ReceiveQueue
from .segment_consumer import SegmentConsumer, SegmentSubscription
from .topic_layout import TopicLayout
from .topic_watcher import TopicWatcher

if TYPE_CHECKING:
    from .client import Client
    from .producer import Producer

log = logging.getLogger(__name__)

# Negative acknowledgements wait longer each time a message comes back, up to this.
MAX_NACK_DELAY_SECONDS = 60.0
# Properties a dead-lettered message carries, naming where it came from.
ORIGIN_TOPIC_PROPERTY = "dlq-origin-topic"
ORIGIN_SUBSCRIPTION_PROPERTY = "dlq-origin-subscription"
ORIGIN_MESSAGE_ID_PROPERTY = "dlq-origin-message-id"


def check_queue_options(
    receive_queue_size: int, nack_redelivery_delay: float, max_redeliveries: int | None
) -> None:
    """ValueError naming the option that cannot be used."""
    if receive_queue_size < 1:
        raise ValueError(f"receive_queue_size must be at least 1, not {receive_queue_size}")
    if nack_redelivery_delay < 0:
        raise ValueError("nack_redelivery_delay is a number of seconds, at least 0")
    if max_redeliveries is not None and max_redeliveries < 1:
        raise ValueError(f"max_redeliveries must be at least 1, not {max_redeliveries}")


class QueueConsumer:
    """Create with ``await client.subscribe_queue(topic, subscription)``."""

    def __init__(
        self,
        client: Client,
        watcher: TopicWatcher,
        subscription: str,
        *,
        consumer_name: str | None,
        key_ordered: bool,
        initial_position: InitialPosition,
        receive_queue_size: int,
        ack_timeout: float | None,
        nack_redelivery_delay: float,
        max_redeliveries: int | None,
        sink: MessageSink | None = None,
    ) -> None:
        """``sink``: where messages go instead of this consumer's own receive queue (a
        namespace consumer's shared one, which then hands them out through :meth:`accept`)."""
        check_queue_options(receive_queue_size, nack_redelivery_delay, max_redeliveries)
        self.topic = watcher.topic
        self.subscription = subscription
        self.consumer_name = consumer_name or f"{client.client_name}-{secrets.token_hex(4)}"
        self._client = client
        self._watcher = watcher
        self._kind = (
            SegmentSubscriptionType.KEY_SHARED if key_ordered else SegmentSubscriptionType.SHARED
        )
        self._initial_position = initial_position
        self._receive_queue_size = receive_queue_size
        self._nack_delay = nack_redelivery_delay
        self._max_redeliveries = max_redeliveries
        self._queue = ReceiveQueue()
        self._sink: MessageSink = self._queue if sink is None else sink
        self._segments: dict[int, SegmentConsumer] = {}
        self._finished: set[int] = set()  # drained or pruned: never attached again
        self._ack_timeouts = (
            None if ack_timeout is None else AckTimeouts(ack_timeout, self._ack_timed_out)
        )
        self._dead_letters: Producer | None = None
        self._background = TaskOwner(f"queue consumer of {self.topic}", log)
        self._stop_listening: Callable[[], None] | None = None
        self._closed = False

    async def _start(self, dead_letter_topic: str | None) -> None:
        if self._max_redeliveries is not None:
            self._dead_letters = await self._dead_letter_producer(dead_letter_topic)
        layout = self._watcher.layout
        for segment_id in sorted(layout.segments):
            self._attach(segment_id, layout.epoch, self._initial_position)
        self._stop_listening = self._watcher.listen(self._on_layout)
        # Return once every subscription exists, so that "Latest" means "from now on".
        async with asyncio.timeout(self._client.operation_timeout):
            await asyncio.gather(*(s.wait_subscribed() for s in list(self._segments.values())))

    async def _dead_letter_producer(self, topic: str | None) -> Producer | None:
        try:
            return await self._client.create_producer(topic or f"{self.topic}-dlq")
        except NotFound:
            if topic is not None:
                raise NotFound(
                    f"the dead-letter topic {topic} does not exist; create it, or leave "
                    "dead_letter_topic out to use <topic>-dlq when that exists"
                ) from None
            log.warning(
                "%s has no %s-dlq topic: messages are redelivered without limit",
                self.topic,
                self.topic,
            )
            return None

    # -- receiving ------------------------------------------------------------------------------

    async def receive(self, wait_seconds: float | None = None) -> ReceivedMessage:
        """The next message; Timeout if none came within ``wait_seconds`` (None: wait on),
        ClientClosed once the consumer is closed."""
        try:
            async with asyncio.timeout(wait_seconds):
                while True:
                    message = self.accept(await self._queue.get())
                    if message is not None:
                        return message
        except TimeoutError:
            raise Timeout(f"no message from {self.topic} within {wait_seconds:g} s") from None

    def accept(self, item: QueuedMessage) -> ReceivedMessage | None:
        """The message of ``item``, taken from the receive queue, as the application gets it;
        None when it goes to the dead-letter topic instead."""
        message = ReceivedMessage.of(item.message, self.topic)
        if (
            self._dead_letters is not None
            and self._max_redeliveries is not None
            and message.redelivery_count >= self._max_redeliveries
        ):
            self._spawn(self._dead_letter(message))
            return None
        if self._ack_timeouts is not None:
            self._ack_timeouts.delivered(message.message_id)
        return message

    def __aiter__(self) -> AsyncIterator[ReceivedMessage]:
        return until_closed(self.receive)

    # -- acknowledging --------------------------------------------------------------------------

    async def acknowledge(
        self, message: ReceivedMessage | MessageId, *, durable: bool = False
    ) -> None:
        """Acknowledge one message: it is never handed out again by this consumer, and the
        broker has it with the next group of acknowledgements (sent at once when none is on
        its way). With ``durable``, return once the broker has it on disk;
        :meth:`flush_acknowledgements` waits for every acknowledgement so far."""
        message_id = message_id_of(message)
        if self._ack_timeouts is not None:
            self._ack_timeouts.settled(message_id)
        segment = self._segments.get(message_id.segment_id)
        if segment is None:
            if message_id.segment_id in self._finished:
                return  # drained or pruned: every message of it is acknowledged already
            raise ClientError(f"message {message_id} was not received from {self.topic}")
        await segment.acknowledge([message_id], durable=durable)

    async def flush_acknowledgements(self) -> None:
        """Return once every acknowledgement made so far is durable."""
        await asyncio.gather(*(s.flush_acknowledgements() for s in list(self._segments.values())))

    async def negative_acknowledge(self, message: ReceivedMessage) -> None:
        """Have the message delivered again, after a delay that grows with each redelivery."""
        message_id = message.message_id
        if self._ack_timeouts is not None:
            self._ack_timeouts.settled(message_id)
        segment = self._segments.get(message_id.segment_id)
        if segment is None:
            return
        delay = min(MAX_NACK_DELAY_SECONDS, self._nack_delay * 2**message.redelivery_count)
        await segment.negative_acknowledge([message_id], round(delay * 1000))

    def _ack_timed_out(self, message_ids: list[MessageId]) -> None:
        by_segment: dict[int, list[MessageId]] = defaultdict(list)
        for message_id in message_ids:
            by_segment[message_id.segment_id].append(message_id)
        for segment_id, ids in by_segment.items():
            segment = self._segments.get(segment_id)
            if segment is not None:
                self._spawn(segment.redeliver_unacknowledged(ids))

    async def _dead_letter(self, message: ReceivedMessage) -> None:
        assert self._dead_letters is not None
        properties = {
            **message.properties,
            ORIGIN_TOPIC_PROPERTY: self.topic,
            ORIGIN_SUBSCRIPTION_PROPERTY: self.subscription,
            ORIGIN_MESSAGE_ID_PROPERTY: str(message.message_id),
        }
        try:
            await self._dead_letters.send(
                message.payload,
                key=message.key,
                properties=properties,
                event_time_ms=message.event_time_ms,
            )
            await self.acknowledge(message.message_id)
        except ClientError as error:
            # Not acknowledged: the broker delivers it again, and it is dead-lettered then.
            log.warning("dead-lettering %s failed: %s", message.message_id, error)

    # -- the DAG --------------------------------------------------------------------------------

    def _on_layout(self, layout: TopicLayout) -> None:
        for segment_id in sorted(layout.segments):
            # Segments made after this consumer started hold only newer messages: all of them.
            self._attach(segment_id, layout.epoch, InitialPosition.EARLIEST)

    def _attach(self, segment_id: int, epoch: int, initial: InitialPosition) -> None:
        if self._closed or segment_id in self._segments or segment_id in self._finished:
            return
        spec = SegmentSubscription(
            self.topic,
            segment_id,
            self.subscription,
            self._kind,
            self.consumer_name,
            initial,
            self._receive_queue_size,
        )
        segment = SegmentConsumer(
            spec,
            pool=self._client.pool,
            watcher=self._watcher,
            queue=self._sink,
            owner=self,
            seen_at_epoch=epoch,
            operation_timeout=self._client.operation_timeout,
        )
        self._segments[segment_id] = segment
        segment.start()

    def on_end_of_segment(self, consumer: SegmentConsumer) -> None:
        node = self._watcher.layout.segments.get(consumer.segment_id)
        if node is not None and node.state is SegmentState.ACTIVE:
            return  # cannot be: only a sealed segment ends
        self._forget(consumer)
        self._spawn(consumer.close())

    def on_segment_gone(self, consumer: SegmentConsumer, error: ClientError | None) -> None:
        self._forget(consumer)
        if error is not None:
            self._sink.fail(error)

    def _forget(self, consumer: SegmentConsumer) -> None:
        if self._segments.get(consumer.segment_id) is consumer:
            del self._segments[consumer.segment_id]
            self._finished.add(consumer.segment_id)

    # -- closing --------------------------------------------------------------------------------

    async def close(self) -> None:
        """Detach from every segment; the subscription stays, with its unacknowledged
        messages, for the next consumer."""
        await self._shut(unsubscribe=False)

    async def unsubscribe(self) -> None:
        """Close and delete the subscription on every segment this consumer is attached to
        (refused with ConsumerBusy while other consumers are attached)."""
        await self._shut(unsubscribe=True)

    async def _shut(self, *, unsubscribe: bool) -> None:
        if self._closed:
            return
        self._closed = True
        self._client.untrack(self)
        if self._stop_listening is not None:
            self._stop_listening()
        if self._ack_timeouts is not None:
            self._ack_timeouts.close()
        segments = list(self._segments.values())
        self._segments.clear()
        self._sink.fail(ClientClosed(f"the consumer of {self.topic} was closed"))
        outcomes = await asyncio.gather(
            *(s.close(unsubscribe=unsubscribe) for s in segments), return_exceptions=True
        )
        await self._background.close()
        if self._dead_letters is not None:
            await self._dead_letters.close()
        for outcome in outcomes:
            if isinstance(outcome, BaseException):
                raise outcome

    def _spawn(self, work: Coroutine[Any, Any, None]) -> None:
        self._background.spawn(work, f"{self.topic} {self.subscription} background work")
