"""One consumer on one segment's subscription, kept attached across broker failures.

Every topic consumer (queue, stream, checkpoint) is made of these. A segment consumer finds
its segment's broker in the DAG, subscribes, and feeds its owner's receive queue. When the
connection drops or the broker closes the consumer (it moved, it is restarting), it subscribes
again with backoff; ``SegmentNotFound`` (or a layout without the segment) means the segment
was pruned, and the consumer is done.

The broker delivers again, after a reconnect or a seek, whatever was delivered and not
acknowledged. So each session (and each seek) starts a new *generation*: messages still queued
from an older one are skipped when the application takes them, and their permits are not
given back (a new session or a seek starts from fresh permits). Acknowledgements are
remembered until they are durable (individual) or for good (the cumulative *floor*), so a
copy of a message the application has acknowledged is never handed out again, and a
cumulative acknowledgement the broker may have missed is sent again on the next session.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
from collections import Counter, deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from ..protocol import (
    Ack,
    AckType,
    Command,
    ConsumerClose,
    ConsumerClosed,
    DeliveredMessage,
    EndOfSegment,
    ErrorCode,
    Flow,
    InitialPosition,
    Message,
    MessageId,
    Nack,
    RedeliverUnacknowledged,
    Seek,
    SegmentSubscriptionType,
    Subscribe,
    Unsubscribe,
)
from ..tasks import cancel_and_wait
from .backoff import Backoff
from .connection import BrokerConnection, Channel
from .errors import ClientClosed, ClientError, ConnectionFailed, Timeout
from .pool import ConnectionPool
from .receive_queue import MessageSink, QueuedMessage
from .topic_layout import TopicLayout
from .topic_watcher import TopicWatcher

log = logging.getLogger(__name__)

# Ids per Ack request: a group well under any frame limit.
_MAX_ACKS_PER_REQUEST = 1000

# Refusals of Subscribe that a later attempt cannot overcome.
_FATAL_CODES = frozenset(
    {
        ErrorCode.TOPIC_NOT_FOUND,
        ErrorCode.SUBSCRIPTION_NOT_FOUND,
        ErrorCode.SUBSCRIPTION_TYPE_MISMATCH,
        ErrorCode.INVALID_REQUEST,
        ErrorCode.NOT_AUTHORIZED,
        ErrorCode.AUTHENTICATION_FAILED,
        ErrorCode.TOO_MANY_OPEN,
    }
)


class SegmentOwner(Protocol):
    def on_end_of_segment(self, consumer: SegmentConsumer) -> None:
        """The segment is sealed and every message of it is acknowledged."""

    def on_segment_gone(self, consumer: SegmentConsumer, error: ClientError | None) -> None:
        """The consumer stopped for good: pruned (``error`` None) or refused (``error``)."""


@dataclass(frozen=True)
class SegmentSubscription:
    """What a segment consumer subscribes to, and as whom."""

    topic: str
    segment_id: int
    subscription: str
    kind: SegmentSubscriptionType
    consumer_name: str
    initial_position: InitialPosition
    permits: int

    @property
    def is_ordered(self) -> bool:
        """Exclusive and Failover accept cumulative acknowledgements."""
        return self.kind in (SegmentSubscriptionType.EXCLUSIVE, SegmentSubscriptionType.FAILOVER)


class _Session:
    """One Subscribe on one connection: the handler its pushes go to."""

    def __init__(
        self, owner: SegmentConsumer, connection: BrokerConnection, consumer_id: int
    ) -> None:
        self.owner = owner
        self.connection = connection
        self.consumer_id = consumer_id
        self.over = asyncio.Event()

    @property
    def live(self) -> bool:
        return not self.over.is_set() and self.connection.is_open

    def on_push(self, command: Command) -> None:
        self.owner._on_push(self, command)

    def on_connection_lost(self, error: ClientError) -> None:
        self.over.set()

    def end(self) -> None:
        self.over.set()
        self.connection.detach(Channel.CONSUMER, self.consumer_id)


class _Pruned(Exception):
    pass


class SegmentConsumer:
    def __init__(
        self,
        spec: SegmentSubscription,
        *,
        pool: ConnectionPool,
        watcher: TopicWatcher,
        queue: MessageSink,
        owner: SegmentOwner,
        seen_at_epoch: int,
        operation_timeout: float,
    ) -> None:
        self.spec = spec
        self._pool = pool
        self._watcher = watcher
        self._queue = queue
        self._owner = owner
        # A layout at this epoch or newer that lacks the segment means it was pruned.
        self._seen_at_epoch = seen_at_epoch
        self._operation_timeout = operation_timeout
        self._generation = 0
        self._session: _Session | None = None
        self._subscribed = False
        self._state_changed = asyncio.Event()
        self._consumed = 0
        self._flow_at = max(1, spec.permits // 2)
        self._floor: MessageId | None = None
        self._acked: set[MessageId] = set()
        self._forget_when_dequeued: set[MessageId] = set()
        self._queued: Counter[MessageId] = Counter()
        self._held: list[QueuedMessage] | None = None
        # Individual acknowledgements waiting to be durable, in the order queued; the counts
        # say how many were ever queued and how many of those are durable.
        self._ack_queue: deque[MessageId] = deque()
        self._acks_queued = 0
        self._acks_durable = 0
        self._ack_sender: asyncio.Task[None] | None = None
        self._ack_refusals: deque[tuple[int, int, ClientError]] = deque(maxlen=16)
        self._background: set[asyncio.Task[None]] = set()
        self._task: asyncio.Task[None] | None = None
        self._gone: ClientError | None = None
        self.pruned = False
        self.ended = False

    @property
    def segment_id(self) -> int:
        return self.spec.segment_id

    @property
    def generation(self) -> int:
        return self._generation

    @property
    def floor(self) -> MessageId | None:
        """The highest message acknowledged cumulatively, if any."""
        return self._floor

    @property
    def is_gone(self) -> bool:
        return self._gone is not None

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(
            self._run(), name=f"consume {self.spec.topic} segment {self.segment_id}"
        )

    async def wait_subscribed(self) -> None:
        """Until the first Subscribe is answered; at once if the segment was pruned; the
        refusal if the broker refused for good."""
        while not self._subscribed:
            if self._gone is not None:
                if self.pruned:
                    return
                raise self._gone
            await self._state_changed.wait()

    # -- holding back (a checkpoint consumer's child after a seek) -------------------------------

    def hold(self) -> None:
        """Keep what arrives from now on out of the receive queue until :meth:`release`."""
        if self._held is None:
            self._held = []

    def release(self) -> None:
        held, self._held = self._held, None
        for item in held or ():
            self._queue.put(item)

    @property
    def is_held(self) -> bool:
        return self._held is not None

    # -- the session loop -----------------------------------------------------------------------

    async def _run(self) -> None:
        backoff = Backoff(maximum=2.0)
        while self._gone is None:
            try:
                session = await self._subscribe()
            except _Pruned:
                self._finish(None)
                return
            except ClientClosed as error:
                self._finish(error)
                return
            except ClientError as error:
                if error.code in _FATAL_CODES:
                    self._finish(error)
                    return
                # SegmentNotFound included: the broker may not have opened a segment placed on
                # it yet, or it moved; only the layout says a segment is gone (_Pruned above).
                log.debug("segment %s: subscribe failed: %s", self.segment_id, error)
                await asyncio.sleep(backoff.next_delay())
                continue
            backoff.reset()
            await session.over.wait()
            log.debug("segment %s: session %d over", self.segment_id, session.consumer_id)
            session.end()
            self._set_session(None)
            if self._gone is None:
                await asyncio.sleep(backoff.next_delay())

    async def _subscribe(self) -> _Session:
        url = await self._broker_url()
        connection = await self._pool.get(url)
        session = _Session(self, connection, connection.new_id(Channel.CONSUMER))
        # A new session: whatever is still queued from the old one is delivered again.
        self._generation += 1
        self._consumed = 0
        self._session = session
        connection.attach(Channel.CONSUMER, session.consumer_id, session)
        spec = self.spec
        try:
            await connection.request(
                Subscribe(
                    0,
                    session.consumer_id,
                    spec.topic,
                    spec.segment_id,
                    spec.subscription,
                    spec.kind,
                    spec.consumer_name,
                    0,
                    spec.initial_position,
                    spec.permits,
                ),
                wait_seconds=self._operation_timeout,
                # Taken after all, it would hold an Exclusive subscription (or a Key_Shared
                # hash range) for a consumer no one reads.
                undo=ConsumerClose(0, session.consumer_id),
            )
        except BaseException:
            session.end()
            self._session = None
            raise
        if self._floor is not None:
            # The broker may have missed the last cumulative ack when the old session dropped.
            with contextlib.suppress(ClientError):
                await connection.send(
                    Ack(session.consumer_id, AckType.CUMULATIVE, (self._floor,), None)
                )
        self._set_session(session)
        log.debug(
            "segment %s: %s subscribed as consumer %d on %s",
            self.segment_id,
            spec.consumer_name,
            session.consumer_id,
            connection.url,
        )
        return session

    async def _broker_url(self) -> str:
        segment_id = self.segment_id

        def placed_or_pruned(layout: TopicLayout) -> bool:
            node = layout.segments.get(segment_id)
            if node is None:
                return layout.epoch >= self._seen_at_epoch
            return node.broker_url is not None

        layout = await self._watcher.wait_for(placed_or_pruned)
        node = layout.segments.get(segment_id)
        if node is None or node.broker_url is None:
            raise _Pruned()
        return node.broker_url

    def _set_session(self, session: _Session | None) -> None:
        self._session = session
        self._subscribed = session is not None
        self._signal_state()

    def _signal_state(self) -> None:
        self._state_changed.set()
        self._state_changed = asyncio.Event()

    def _finish(self, error: ClientError | None) -> None:
        self.pruned = error is None
        self._gone = error or ClientClosed(f"segment {self.segment_id} was pruned")
        if self._session is not None:
            self._session.end()
        self._set_session(None)
        self._owner.on_segment_gone(self, error)

    # -- pushes ---------------------------------------------------------------------------------

    def _on_push(self, session: _Session, command: Command) -> None:
        if session is not self._session:
            return
        match command:
            case Message():
                for message in command.messages:
                    self._arrived(message)
            case EndOfSegment():
                self.ended = True
                self._owner.on_end_of_segment(self)
            case ConsumerClosed():
                log.info(
                    "segment %s: the broker closed the consumer: %s %s",
                    self.segment_id,
                    command.code,
                    command.message,
                )
                session.over.set()  # subscribe again, unless the layout says it is gone

    def _arrived(self, message: DeliveredMessage) -> None:
        item = QueuedMessage(self, self._generation, message)
        self._queued[item.message.message_id] += 1
        if self._held is not None:
            self._held.append(item)
        else:
            self._queue.put(item)

    def take(self, item: QueuedMessage) -> bool:
        message_id = item.message.message_id
        # Asked before the copy leaves the queue: an ack made durable while it was queued is
        # forgotten as the last copy goes, and the copy must still be dropped.
        acked = message_id in self._acked
        remaining = self._queued[message_id] - 1
        if remaining > 0:
            self._queued[message_id] = remaining
        else:
            del self._queued[message_id]
            if message_id in self._forget_when_dequeued:
                self._forget_when_dequeued.discard(message_id)
                self._acked.discard(message_id)
        if item.generation != self._generation or self._gone is not None:
            return False
        self._consumed += 1
        if self._consumed >= self._flow_at:
            permits, self._consumed = self._consumed, 0
            self._send_soon(lambda session: Flow(session.consumer_id, permits))
        if acked:
            return False
        return self._floor is None or message_id > self._floor

    # -- acknowledgements and redelivery ---------------------------------------------------------

    async def acknowledge(self, message_ids: Sequence[MessageId], *, durable: bool) -> None:
        """Individual acknowledgement. It is queued and sent in a group with the others: at
        once if no group is on its way, else when the one on its way is answered (so a busy
        consumer sends few Acks and a quiet one waits for nothing). With ``durable``, return
        once the broker has it on disk; otherwise at once. A group the broker did not answer
        is sent again on the next session, until the consumer is closed."""
        first = self._acks_queued
        self._acked.update(message_ids)
        self._ack_queue.extend(message_ids)
        self._acks_queued += len(message_ids)
        if self._ack_sender is None or self._ack_sender.done():
            self._ack_sender = asyncio.get_running_loop().create_task(self._send_acks())
        if durable:
            await self._acks_durable_through(first, self._acks_queued)

    async def flush_acknowledgements(self) -> None:
        """Until every individual acknowledgement queued so far is durable."""
        await self._acks_durable_through(0, self._acks_queued)

    async def _acks_durable_through(self, first: int, last: int) -> None:
        """Until the acknowledgements queued as numbers ``first + 1 .. last`` are durable;
        the broker's refusal if it refused any of them."""
        try:
            async with asyncio.timeout(self._operation_timeout):
                while self._acks_durable < last:
                    if self.pruned:
                        return  # every message of a pruned segment is acknowledged
                    if self._gone is not None:
                        raise self._gone
                    await self._state_changed.wait()
        except TimeoutError:
            raise Timeout(
                f"segment {self.segment_id}: acknowledgements not durable within "
                f"{self._operation_timeout:g} s (they are sent again on the next session)"
            ) from None
        for start, end, error in self._ack_refusals:
            if start < last and first < end:
                raise error

    async def _send_acks(self) -> None:
        """Send the queued acknowledgements, oldest first, a group per request."""
        queue = self._ack_queue
        while queue:
            try:
                session = await self._live_session()
            except ClientError:
                return  # closed or pruned: nothing left to acknowledge on
            ids = tuple(itertools.islice(queue, _MAX_ACKS_PER_REQUEST))
            ack = Ack(session.consumer_id, AckType.INDIVIDUAL, ids, 0)
            try:
                await session.connection.request(ack, wait_seconds=self._operation_timeout)
            except ConnectionFailed:
                await session.over.wait()
                continue
            except ClientError as error:
                if error.code is ErrorCode.UNKNOWN_CONSUMER:
                    session.over.set()  # the broker dropped it: subscribe again
                    continue
                if isinstance(error, Timeout):
                    continue
                log.warning("segment %s: acknowledgements refused: %s", self.segment_id, error)
                start = self._acks_durable
                self._ack_refusals.append((start, start + len(ids), error))
            for message_id in ids:
                queue.popleft()
                if message_id in self._queued:
                    self._forget_when_dequeued.add(message_id)
                else:
                    self._acked.discard(message_id)
            self._acks_durable += len(ids)
            self._signal_state()

    async def acknowledge_cumulative(self, message_id: MessageId, *, durable: bool) -> None:
        """Everything of this segment up to ``message_id``. Without ``durable`` the ack is
        sent and not waited for; it is sent again on the next session if that one drops."""
        if self._floor is not None and message_id <= self._floor:
            if not durable:
                return
        else:
            self._floor = message_id
        floor = self._floor
        assert floor is not None
        if durable:
            await self._request(
                lambda session: Ack(session.consumer_id, AckType.CUMULATIVE, (floor,), 0)
            )
            return
        session = self._session
        if self._subscribed and session is not None and session.live:
            with contextlib.suppress(ClientError):
                await session.connection.send(
                    Ack(session.consumer_id, AckType.CUMULATIVE, (floor,), None)
                )

    async def negative_acknowledge(self, message_ids: Sequence[MessageId], delay_ms: int) -> None:
        """Deliver these again after ``delay_ms``. If the session dropped meanwhile, the broker
        delivers them again anyway."""
        ids = tuple(message_ids)
        await self._send_now(lambda session: Nack(session.consumer_id, ids, delay_ms))

    async def redeliver_unacknowledged(self, message_ids: Sequence[MessageId]) -> None:
        ids = tuple(message_ids)
        await self._send_now(lambda session: RedeliverUnacknowledged(session.consumer_id, ids))

    async def seek(self, message_id: MessageId, floor: MessageId | None) -> None:
        """Make ``message_id``'s entry the next delivered, and skip what is at or below
        ``floor`` (the broker seeks whole entries; the floor cuts inside one). Queued messages
        are dropped and the permits granted afresh."""
        await self._request(lambda session: Seek(0, session.consumer_id, message_id, None))
        # The broker delivers nothing between the seek and the fresh permits below, so every
        # message queued until now predates the seek.
        self._generation += 1
        self._consumed = 0
        self._floor = floor
        self._acked.clear()
        self._forget_when_dequeued.clear()
        self.ended = False
        held = self._held
        if held is not None:
            held.clear()
        if floor is not None:
            await self._send_now(
                lambda session: Ack(session.consumer_id, AckType.CUMULATIVE, (floor,), None)
            )
        await self._send_now(lambda session: Flow(session.consumer_id, self.spec.permits))

    # -- closing --------------------------------------------------------------------------------

    async def close(self, *, unsubscribe: bool = False) -> None:
        """Detach (after making the cumulative floor durable); with ``unsubscribe``, delete
        the subscription on this segment as well."""
        if self._gone is None and self._ack_queue:
            with contextlib.suppress(ClientError):
                await self.flush_acknowledgements()
        if self._gone is None:
            self._gone = ClientClosed(f"the consumer of segment {self.segment_id} was closed")
        if self._ack_sender is not None:
            self._ack_sender.cancel()
        if self._task is not None:
            await cancel_and_wait(self._task)
        for task in list(self._background):
            task.cancel()
        session = self._session
        self._set_session(None)
        if session is None or not session.live:
            if unsubscribe:
                raise ConnectionFailed(
                    f"cannot unsubscribe from segment {self.segment_id}: it is not connected; "
                    "retry once its broker is reachable"
                )
            return
        connection = session.connection
        try:
            if self._floor is not None and self.spec.is_ordered:
                with contextlib.suppress(ClientError):
                    await connection.request(
                        Ack(session.consumer_id, AckType.CUMULATIVE, (self._floor,), 0),
                        wait_seconds=self._operation_timeout,
                    )
            command = Unsubscribe if unsubscribe else ConsumerClose
            try:
                await connection.request(
                    command(0, session.consumer_id), wait_seconds=self._operation_timeout
                )
            except ClientError:
                if unsubscribe:
                    raise
        finally:
            session.end()

    # -- helpers --------------------------------------------------------------------------------

    async def _live_session(self) -> _Session:
        while True:
            if self._gone is not None:
                raise self._gone
            session = self._session
            if self._subscribed and session is not None and session.live:
                return session
            await self._state_changed.wait()

    async def _request(self, make: Callable[[_Session], Command]) -> Command:
        """Send a request on the live session, again on the next one if the session drops
        first, within the client's operation timeout."""
        try:
            async with asyncio.timeout(self._operation_timeout):
                while True:
                    session = await self._live_session()
                    try:
                        return await session.connection.request(make(session))
                    except ConnectionFailed:
                        await session.over.wait()
                    except ClientError as error:
                        if error.code is not ErrorCode.UNKNOWN_CONSUMER:
                            raise
                        session.over.set()  # the broker dropped it: subscribe again
        except TimeoutError:
            raise Timeout(
                f"segment {self.segment_id}: no broker session within "
                f"{self._operation_timeout:g} s; is the segment's broker up?"
            ) from None

    async def _send_now(self, make: Callable[[_Session], Command]) -> None:
        """Fire and forget on the live session, if there is one: without it, the next session
        starts from the broker's own state, which makes the command moot."""
        session = self._session
        if not self._subscribed or session is None or not session.live:
            return
        with contextlib.suppress(ClientError):
            await session.connection.send(make(session))

    def _send_soon(self, make: Callable[[_Session], Command]) -> None:
        task = asyncio.get_running_loop().create_task(self._send_now(make))
        self._background.add(task)
        task.add_done_callback(self._background.discard)
