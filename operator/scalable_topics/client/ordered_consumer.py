"""What stream and checkpoint consumers share: a registration with the topic's controller,
and an Exclusive segment consumer on each segment the controller assigns.

Each assignment is the whole set: segments newly named are subscribed to (Exclusive; while the
previous owner has not let go the broker answers ``ConsumerBusy``, retried with backoff),
segments no longer named are closed, after their cumulative acknowledgements are made
durable, and their queued messages dropped (the new owner receives them again). Per-key order
comes from the brokers: a child segment is dispatched only once its parents are drained.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Coroutine
from typing import TYPE_CHECKING, Any

from ..protocol import ConsumerAssignment, InitialPosition, SegmentSubscriptionType
from .assignment_follower import AssignmentFollower
from .consumer_message import ReceivedMessage, until_closed
from .errors import ClientClosed, ClientError, Timeout
from .receive_queue import MessageSink, QueuedMessage, ReceiveQueue
from .segment_consumer import SegmentConsumer, SegmentSubscription
from .topic_watcher import TopicWatcher

if TYPE_CHECKING:
    from .client import Client

log = logging.getLogger(__name__)


def check_ordered_options(receive_queue_size: int, consumer_name: str) -> None:
    """ValueError naming the option that cannot be used."""
    if receive_queue_size < 1:
        raise ValueError(f"receive_queue_size must be at least 1, not {receive_queue_size}")
    if not consumer_name:
        raise ValueError("stream and checkpoint consumers need a consumer_name")


class OrderedTopicConsumer:
    def __init__(
        self,
        client: Client,
        watcher: TopicWatcher,
        subscription: str,
        consumer_name: str,
        *,
        receive_queue_size: int,
        sink: MessageSink | None = None,
    ) -> None:
        """``sink``: where messages go instead of this consumer's own receive queue (a
        namespace consumer's shared one, which then hands them out through :meth:`accept`)."""
        check_ordered_options(receive_queue_size, consumer_name)
        self.topic = watcher.topic
        self.subscription = subscription
        self.consumer_name = consumer_name
        self._client = client
        self._watcher = watcher
        self._receive_queue_size = receive_queue_size
        self._queue = ReceiveQueue()
        self._sink: MessageSink = self._queue if sink is None else sink
        self._segments: dict[int, SegmentConsumer] = {}
        self._background: set[asyncio.Task[None]] = set()
        self._closed = False
        self._follower = AssignmentFollower(
            client.pool,
            client.service_urls,
            topic=self.topic,
            subscription=subscription,
            consumer_name=consumer_name,
            on_assignment=self._on_assignment,
            on_end=self._sink.fail,
            operation_timeout=client.operation_timeout,
        )

    async def _start(self) -> None:
        await self._follower.start()

    @property
    def assigned_segments(self) -> list[int]:
        """The segments this consumer reads now."""
        return sorted(self._segments)

    # -- receiving ------------------------------------------------------------------------------

    async def receive(self, wait_seconds: float | None = None) -> ReceivedMessage:
        """The next message; Timeout if none came within ``wait_seconds`` (None: wait on),
        ClientClosed once the consumer is closed."""
        try:
            async with asyncio.timeout(wait_seconds):
                item = await self._queue.get()
        except TimeoutError:
            raise Timeout(f"no message from {self.topic} within {wait_seconds:g} s") from None
        return self.accept(item)

    def accept(self, item: QueuedMessage) -> ReceivedMessage:
        """The message of ``item``, taken from the receive queue, as the application gets it."""
        self._delivered(item)
        return ReceivedMessage.of(item.message, self.topic)

    def _delivered(self, item: QueuedMessage) -> None:
        """Hook: the application was handed ``item``."""

    def __aiter__(self) -> AsyncIterator[ReceivedMessage]:
        return until_closed(self.receive)

    # -- assignments ----------------------------------------------------------------------------

    def _on_assignment(self, assignment: ConsumerAssignment) -> None:
        if self._closed:
            return
        wanted = {segment.segment_id for segment in assignment.segments}
        log.debug(
            "%s: assigned %s (term %d, epoch %d)",
            self.consumer_name,
            sorted(wanted),
            assignment.term,
            assignment.layout_epoch,
        )
        for segment_id in sorted(wanted - self._segments.keys()):
            self._open(segment_id, assignment.layout_epoch)
        for segment_id in sorted(self._segments.keys() - wanted):
            segment = self._segments.pop(segment_id)
            self._spawn(segment.close())
            self._released(segment_id)

    def _open(self, segment_id: int, epoch: int) -> None:
        spec = SegmentSubscription(
            self.topic,
            segment_id,
            self.subscription,
            SegmentSubscriptionType.EXCLUSIVE,
            self.consumer_name,
            InitialPosition.EARLIEST,
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

    def _released(self, segment_id: int) -> None:
        """Hook: the segment went to another consumer (or was pruned)."""

    def on_end_of_segment(self, consumer: SegmentConsumer) -> None:
        """The controller moves on to the children with its next assignment."""

    def on_segment_gone(self, consumer: SegmentConsumer, error: ClientError | None) -> None:
        if self._segments.get(consumer.segment_id) is consumer:
            del self._segments[consumer.segment_id]
            self._released(consumer.segment_id)
        if error is not None:
            self._sink.fail(error)

    # -- closing --------------------------------------------------------------------------------

    async def close(self) -> None:
        """Close every segment consumer (acknowledgements made durable first), then leave the
        subscription: the registration is removed and the segments go to the others."""
        if self._closed:
            return
        self._closed = True
        self._client.untrack(self)
        segments = list(self._segments.values())
        self._segments.clear()
        self._sink.fail(ClientClosed(f"the consumer {self.consumer_name} was closed"))
        await asyncio.gather(*(s.close() for s in segments), return_exceptions=True)
        await self._follower.close()
        for task in list(self._background):
            task.cancel()
        await asyncio.gather(*self._background, return_exceptions=True)

    def _spawn(self, work: Coroutine[Any, Any, None]) -> None:
        task = asyncio.get_running_loop().create_task(work)
        self._background.add(task)
        task.add_done_callback(self._background.discard)
