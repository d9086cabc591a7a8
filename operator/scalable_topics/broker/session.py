"""One client connection: protocol v1 frames in, producers and consumers multiplexed.

The session reads frames in order. Requests that may take long (a WaitForExclusive producer,
a durable send, an ack with a receipt) run as tasks so the connection keeps serving its other
producers and consumers; a producer's receipts still go out in the order of its sends. A
frame the session cannot read gets an Error naming the problem; the connection closes only
for the errors after which it cannot continue (see ``ErrorCode.closes_connection``), with the
close code of ``close_code_for`` (1003 for a text message). A watchdog closes a connection
that sends no Connect in time or falls silent (``ws_watchdog.py``).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import time
from collections.abc import Coroutine
from dataclasses import dataclass, field
from typing import Any

from aiohttp import WSMsgType, web

from ..model.authorization import OPEN_ACCESS, Action
from ..model.position import BATCH_INDEX_LIMIT, Position
from ..model.resources import (
    MAX_SUBSCRIPTIONS_PER_TOPIC,
    namespace_problem,
    producer_name_problem,
    subscription_name_problem,
)
from ..protocol import (
    SUPPORTED_VERSIONS,
    Ack,
    AckType,
    AcquireExclusive,
    CloseCode,
    Command,
    Connect,
    Connected,
    ConsumerClose,
    ConsumerClosed,
    DeliveredMessage,
    EndOfSegment,
    Error,
    ErrorCode,
    Flow,
    Message,
    MessageId,
    Nack,
    NamespaceUpdate,
    NamespaceWatchClose,
    Ping,
    Pong,
    ProducerClose,
    ProducerClosed,
    ProducerOpen,
    ProducerOpened,
    ProtocolError,
    RedeliverUnacknowledged,
    RegisterConsumer,
    ReleaseExclusive,
    Seek,
    Send,
    SendError,
    SendReceipt,
    Subscribe,
    Success,
    UnregisterConsumer,
    Unsubscribe,
    WatchClose,
    WatchEnded,
    WatchNamespace,
    WatchTopic,
    close_code_for,
    decode_frame,
    encode_frame,
    negotiate_version,
    speaks,
)
from ..protocol.limits import MAX_NAMESPACE_WATCH_FILTERS
from ..tasks import report_failure
from ..tokens import Authenticated, Authenticator, TokenRefused
from ..ws_watchdog import Watchdog
from .config import BrokerConfig
from .connection_limits import ConnectionLimits
from .consumer_relay import ConsumerRelay
from .controller_links import ConnectionLinks, ControllerLinks
from .dispatch import Consumer, DispatchError
from .errors import BrokerError
from .inflight import ConnectionPublishes, PublishCounters
from .namespace_watch import NamespaceWatch, NamespaceWatchRegistry
from .producer_grant_relay import ProducerGrantRelay
from .registry import SegmentRegistry, split_topic
from .segment import HostedSegment, SegmentError
from .subscription import Subscription
from .topic_watch import TopicWatch, TopicWatchHub

log = logging.getLogger(__name__)

_names = itertools.count(1)
# Closures remembered per connection, for the late sends of the producers the broker closed:
# a client can have producers closed at will (past their in-flight limit), so the record is
# bounded; a send for a producer closed longer ago is refused as UnknownProducer.
_CLOSED_PRODUCERS_KEPT = 1024
_dispatch_ids = itertools.count(
    1
)  # sessions number their consumers freely; dispatchers need unique ids


class _RequestFailed(BrokerError):
    pass


@dataclass(eq=False)
class _Producer:
    producer_id: int
    name: str
    segment: HostedSegment
    session: Session
    # Resolved once its ProducerOpen is answered: True with ProducerOpened, False with a
    # refusal (or none). A producer may be fenced while it is admitted, before it is told.
    announced: asyncio.Future[bool]
    last_receipt: asyncio.Future[None] | None = None
    closed: bool = False
    in_flight: int = 0  # sends read and not answered yet
    refusing: tuple[ErrorCode, str] | None = None  # past its in-flight limit: closing

    def settle_announcement(self, opened: bool) -> None:
        if not self.announced.done():
            self.announced.set_result(opened)

    async def closed_by_broker(self, code: ErrorCode, message: str) -> None:
        if self.closed:
            return
        self.closed = True
        self.session.forget_producer(self.producer_id, self, code, message)
        self.session.announce_closed(self, ProducerClosed(self.producer_id, code, message))


@dataclass(eq=False)
class _Consumer:
    consumer_id: int
    dispatch_id: int  # unique within the subscription, across sessions
    segment: HostedSegment
    subscription: Subscription
    session: Session
    closed: bool = field(default=False)

    async def deliver(self, messages: list[DeliveredMessage]) -> None:
        await self.session.send(Message(self.consumer_id, tuple(messages)))

    async def end_of_segment(self) -> None:
        last = self.segment.last_entry_id  # -1 for a segment sealed empty: None on the wire
        await self.session.send(EndOfSegment(self.consumer_id, None if last < 0 else last))

    async def closed_by_broker(self, code: ErrorCode, message: str) -> None:
        if self.closed:
            return
        self.closed = True
        self.session.forget_consumer(self.consumer_id, self)
        await self.session.send(ConsumerClosed(self.consumer_id, code, message))


class Session:
    def __init__(
        self,
        ws: web.WebSocketResponse,
        config: BrokerConfig,
        registry: SegmentRegistry,
        *,
        topic_watches: TopicWatchHub,
        controller_links: ControllerLinks,
        publish_counters: PublishCounters | None = None,
        authenticator: Authenticator | None = None,
        limits: ConnectionLimits | None = None,
        namespace_watches: NamespaceWatchRegistry | None = None,
    ) -> None:
        self._ws = ws
        self._config = config
        self._authenticator = authenticator or Authenticator(config.auth_token)
        self._authenticated = Authenticated(OPEN_ACCESS, None)  # replaced at Connect
        self._expiry: asyncio.TimerHandle | None = None
        self._registry = registry
        self._version: int | None = None
        self._producers: dict[int, _Producer] = {}
        # Producers the broker closed (fenced, segment terminated, past their in-flight limit):
        # why, for their late sends, which are answered after the producer's last answer.
        self._closed_producers: dict[int, tuple[ErrorCode, str, _Producer]] = {}
        self._publishes = ConnectionPublishes(
            config.max_pending_publishes_per_connection,
            config.max_pending_publish_bytes_per_connection,
            publish_counters or PublishCounters(),
            config.max_pending_requests_per_connection,
        )
        self._opening: dict[int, asyncio.Task[None]] = {}
        self._consumers: dict[int, _Consumer] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self._closing = False
        self._topic_watches = topic_watches
        self._watches: dict[int, TopicWatch] = {}
        self._namespace_registry = namespace_watches
        self._namespace_watches: dict[int, NamespaceWatch] = {}  # an id space of their own
        self._controller_links = controller_links
        self._links: ConnectionLinks | None = None  # this connection's, once a relay needs one
        self._consumer_relay: ConsumerRelay | None = None
        self._grant_relay: ProducerGrantRelay | None = None
        self._watchdog = Watchdog(ws, config.auth_timeout)
        self._limits = limits or ConnectionLimits.of(config)

    # -- the read loop --------------------------------------------------------------------------

    async def serve(self) -> None:
        self._watchdog.start()
        try:
            ending = await self._read()
            await self._watchdog.stop()
            if ending is not None:
                code, reason = ending
                await self._ws.close(code=code, message=reason.encode())
        finally:
            await self._watchdog.stop()
            await self._release()

    async def going_away(self) -> None:
        """The broker is shutting down: close with 1001, which ends the read loop."""
        await self._ws.close(code=CloseCode.GOING_AWAY, message=b"broker shutting down")

    async def _read(self) -> tuple[CloseCode, str] | None:
        """Serve frames until the peer closes (None) or a frame ends the connection: then the
        close code and reason to close with, the Error naming the problem sent already."""
        async for frame in self._ws:
            self._watchdog.heard()
            if frame.type is WSMsgType.BINARY:
                fatal = await self._handle_bytes(frame.data)
                if fatal is not None:
                    return close_code_for(fatal) or CloseCode.PROTOCOL_ERROR, fatal.value
            elif frame.type is WSMsgType.TEXT:
                await self.send(
                    Error(
                        None, ErrorCode.MALFORMED_FRAME, "frames must be binary WebSocket messages"
                    )
                )
                return CloseCode.UNSUPPORTED_DATA, "binary messages only"
            elif frame.type is WSMsgType.PING:
                try:
                    await self._ws.pong(frame.data)
                except ConnectionError:
                    return None  # the client went away before its ping was answered
            elif frame.type is WSMsgType.ERROR:
                return None  # aiohttp closed it (1009 for a message above its size limit)
            if self._publishes.full:
                # At an in-flight limit the next frame stays unread (TCP backpressure); the
                # peer's silence meanwhile is the broker's doing.
                self._watchdog.hold(True)
                try:
                    await self._publishes.room()
                finally:
                    self._watchdog.hold(False)
        return None

    async def _handle_bytes(self, data: bytes) -> ErrorCode | None:
        """Handle one frame; the error code when the connection must close."""
        try:
            command = decode_frame(data, self._config.max_frame_bytes)
        except ProtocolError as error:
            await self.send(Error.from_protocol_error(error))
            return error.code if error.code.closes_connection else None
        if self._version is None and not isinstance(command, Connect):
            await self.send(
                Error(None, ErrorCode.NOT_CONNECTED, f"{type(command).__name__} before Connect")
            )
            return ErrorCode.NOT_CONNECTED
        if self._version is not None and not speaks(self._version, command):
            await self.send(
                Error(
                    _request_id(command),
                    ErrorCode.UNKNOWN_COMMAND,
                    f"{type(command).__name__} is not part of protocol version {self._version}",
                )
            )
            return ErrorCode.UNKNOWN_COMMAND
        try:
            await self._dispatch(command)
        except Exception as error:
            answer = _failure_answer(command, error)
            await self.send(answer)
            return answer.code if answer.code.closes_connection else None
        return None

    def _authorize(self, command: Command) -> None:
        """Refuse a command that opens something on a topic the principal may not use."""
        asked = _topic_action(command)
        if asked is None:
            return
        action, topic = asked
        if self._authenticated.expired():
            raise _RequestFailed(ErrorCode.AUTHENTICATION_FAILED, "the token has expired")
        namespace, _ = split_topic(topic)
        refusal = self._authenticated.principal.refusal(action, namespace)
        if refusal is not None:
            raise _RequestFailed(ErrorCode.NOT_AUTHORIZED, refusal)

    def _spawn_expiry(self) -> None:
        self._expiry = None
        self._spawn(self._token_expired())

    async def _token_expired(self) -> None:
        await self.send(Error(None, ErrorCode.AUTHENTICATION_FAILED, "the token has expired"))
        await self._ws.close(code=CloseCode.POLICY_VIOLATION, message=b"the token has expired")

    async def _dispatch(self, command: Command) -> None:
        self._authorize(command)
        if isinstance(command, _OPENS):
            self._limits.check_room(self.open_handles, type(command).__name__)
        match command:
            case Connect():
                await self._connect(command)
            case Send():
                self._send(command)
            case Flow():
                consumer = self._consumer(command.consumer_id)
                consumer.subscription.add_permits(consumer.dispatch_id, command.permits)
            case Ack():
                self._spawn_request(command, self._ack(command))
            case Nack():
                consumer = self._consumer(command.consumer_id)
                consumer.subscription.nack(
                    consumer.dispatch_id,
                    self._positions(consumer, command.message_ids),
                    command.redelivery_delay_ms / 1000,
                )
            case RedeliverUnacknowledged():
                consumer = self._consumer(command.consumer_id)
                positions = (
                    self._positions(consumer, command.message_ids) if command.message_ids else None
                )
                consumer.subscription.redeliver_unacknowledged(consumer.dispatch_id, positions)
            case ProducerOpen():
                self._open_producer(command)
            case ProducerClose():
                await self._close_producer(command)
            case Subscribe():
                await self._subscribe(command)
            case ConsumerClose():
                consumer = self._consumer(command.consumer_id)
                self._detach(consumer)
                await self.send(Success(command.request_id))
            case Unsubscribe():
                await self._unsubscribe(command)
            case Seek():
                self._spawn_request(command, self._seek(command))
            case Ping():
                await self.send(Pong())
            case Pong():
                pass
            case WatchTopic():
                self._watch_topic(command)
            case WatchClose():
                await self._close_watch(command)
            case WatchNamespace():
                await self._watch_namespace(command)
            case NamespaceWatchClose():
                await self._close_namespace_watch(command)
            case RegisterConsumer():
                if self._consumer_relay is None:
                    self._consumer_relay = ConsumerRelay(self._connection_links(), self.send)
                await self._consumer_relay.register(command)
            case UnregisterConsumer():
                if self._consumer_relay is None:
                    raise _RequestFailed(
                        ErrorCode.UNKNOWN_REGISTRATION,
                        f"registration id {command.registration_id} is not open on this connection",
                    )
                await self._consumer_relay.unregister(command)
            case AcquireExclusive():
                if self._grant_relay is None:
                    self._grant_relay = ProducerGrantRelay(self._connection_links(), self.send)
                await self._grant_relay.acquire(command)
            case ReleaseExclusive():
                if self._grant_relay is None:
                    raise _RequestFailed(
                        ErrorCode.UNKNOWN_GRANT,
                        f"grant id {command.grant_id} is not open on this connection",
                    )
                await self._grant_relay.release(command)
            case _:
                raise _RequestFailed(
                    ErrorCode.UNEXPECTED_COMMAND,
                    f"{type(command).__name__} is sent by brokers, not clients",
                )

    # -- connection -----------------------------------------------------------------------------

    async def _connect(self, command: Connect) -> None:
        if self._version is not None:
            raise _RequestFailed(
                ErrorCode.UNEXPECTED_COMMAND, "the connection is already established"
            )
        try:
            authenticated = self._authenticator.authenticate(command.auth_token)
        except TokenRefused as error:
            raise _RequestFailed(ErrorCode.AUTHENTICATION_FAILED, str(error)) from None
        version = negotiate_version(command.protocol_versions)
        if version is None:
            raise _RequestFailed(
                ErrorCode.UNSUPPORTED_VERSION,
                f"this broker speaks protocol versions {list(SUPPORTED_VERSIONS)}, "
                f"the client offered {list(command.protocol_versions)}",
            )
        self._version = version
        self._authenticated = authenticated
        if authenticated.expires_at is not None:
            # A connection lives no longer than its token: the client reconnects with a new one.
            loop = asyncio.get_running_loop()
            delay = max(0.0, authenticated.expires_at - time.time())
            self._expiry = loop.call_later(delay, self._spawn_expiry)
        self._watchdog.connected()
        await self.send(
            Connected(
                command.request_id,
                version,
                self._config.identity,
                self._config.max_frame_bytes,
                self._config.max_message_bytes,
            )
        )

    # -- producers ------------------------------------------------------------------------------

    def _open_producer(self, command: ProducerOpen) -> None:
        if command.producer_id in self._producers or command.producer_id in self._opening:
            raise _RequestFailed(
                ErrorCode.ID_IN_USE,
                f"producer id {command.producer_id} is in use on this connection",
            )
        if command.producer_name:  # none or empty: the broker names it
            problem = producer_name_problem(command.producer_name)
            if problem is not None:
                raise _RequestFailed(ErrorCode.INVALID_REQUEST, f"producer_name: {problem}")
        segment = self._segment(command.topic, command.segment_id)
        name = command.producer_name or f"{self._config.identity}-{next(_names)}"
        announced = asyncio.get_running_loop().create_future()
        producer = _Producer(command.producer_id, name, segment, self, announced)
        self._closed_producers.pop(command.producer_id, None)
        task = self._spawn(self._admit(command, producer))
        # Refused, or cancelled (the connection ended, even before it ran): never announced.
        task.add_done_callback(lambda _: producer.settle_announcement(False))
        self._opening[command.producer_id] = task
        # Not a pending request: a WaitForExclusive admission may wait for frames of this
        # connection (a producer it closes); --max-open-per-connection bounds these.

    async def _admit(self, command: ProducerOpen, producer: _Producer) -> None:
        """Open the producer and answer; ``producer.announced`` is settled True here once
        ProducerOpened is out, False by the task's end otherwise."""
        try:
            grant = await producer.segment.open_producer(
                producer, producer.name, command.access_mode, command.producer_epoch, producer
            )
        except SegmentError as error:
            await self.send(Error(command.request_id, error.code, str(error)))
            return
        finally:
            self._opening.pop(command.producer_id, None)
        if self._closing:
            await producer.segment.close_producer(producer)
            return
        if not producer.closed:
            self._producers[command.producer_id] = producer
        # else fenced while it was admitted: it is told it opened, then that it closed.
        last = producer.segment.highest_sequence_id(producer.name)
        await self.send(
            ProducerOpened(
                command.request_id, producer.name, grant.epoch, None if last < 0 else last
            )
        )
        producer.settle_announcement(True)

    async def _close_producer(self, command: ProducerClose) -> None:
        opening = self._opening.pop(command.producer_id, None)
        if opening is not None:
            opening.cancel()
            await self.send(Success(command.request_id))
            return
        producer = self._producers.pop(command.producer_id, None)
        if producer is None:
            raise _RequestFailed(
                ErrorCode.UNKNOWN_PRODUCER, f"producer id {command.producer_id} is not open"
            )
        producer.closed = True
        await producer.segment.close_producer(producer)
        await self.send(Success(command.request_id))

    def _send(self, command: Send) -> None:
        size = self._publishes.received(command)
        producer = self._producers.get(command.producer_id)
        if producer is None:
            # Answered per batch, so the producer can match the refusal to what it sent.
            closed = self._closed_producers.get(command.producer_id)
            if closed is None:
                message = f"producer id {command.producer_id} is not open"
                self._refuse(command, size, ErrorCode.UNKNOWN_PRODUCER, message, None)
                return
            code, message, producer = closed
            producer.last_receipt = self._refuse(
                command, size, code, message, producer.last_receipt
            )
            return
        if producer.refusing is None and (
            producer.in_flight >= self._config.max_pending_publishes_per_producer
        ):
            self._over_limit(producer, command, size)
            return
        if producer.refusing is not None:
            code, message = producer.refusing
            producer.last_receipt = self._refuse(
                command, size, code, message, producer.last_receipt
            )
            return
        previous = producer.last_receipt
        producer.in_flight += 1
        producer.last_receipt = self._answer(
            self._publish(producer, command, previous), size, producer
        )

    def _over_limit(self, producer: _Producer, command: Send, size: int) -> None:
        """A send came past the producer's in-flight limit: refuse it and every later one, and
        close the producer once its earlier sends are answered. Refusing only the excess sends
        would let a later one be stored before a refused one, which deduplication would then
        drop as already seen; a closed producer is opened again and resends in order."""
        limit = self._config.max_pending_publishes_per_producer
        code = ErrorCode.SERVICE_NOT_READY
        message = (
            f"producer {producer.name!r} sent past its limit of {limit} sends in flight "
            "(sends unanswered): the broker closed it; open it again and keep at most "
            f"{limit} sends unanswered"
        )
        producer.refusing = (code, message)
        self._publishes.producer_over_limit()
        refused = self._refuse(command, size, code, message, producer.last_receipt)
        producer.last_receipt = refused
        self._spawn(self._close_over_limit(producer, refused))

    async def _close_over_limit(self, producer: _Producer, refused: asyncio.Future[None]) -> None:
        """Close the producer once every send before the refused one is answered, and the
        refusal too; sends that arrive meanwhile are refused in turn, after it."""
        await refused
        if self._producers.get(producer.producer_id) is not producer or producer.refusing is None:
            return  # closed meanwhile (fenced, terminated, or the connection ended)
        code, message = producer.refusing
        producer.closed = True
        self.forget_producer(producer.producer_id, producer, code, message)
        try:
            # Before ProducerClosed: an exclusive producer that reopens finds its access free.
            await producer.segment.close_producer(producer)
        except Exception:
            log.exception("closing producer %r on %s failed", producer.name, producer.segment.key)
        await self.send(ProducerClosed(producer.producer_id, code, message))

    def _refuse(
        self,
        command: Send,
        size: int,
        code: ErrorCode,
        message: str,
        after: asyncio.Future[None] | None,
    ) -> asyncio.Future[None]:
        """Answer a send with SendError once ``after`` (the producer's previous answer) is
        out; returns the future of this answer."""

        async def refuse() -> None:
            if after is not None:
                await after
            await self.send(SendError(command.producer_id, command.sequence_id, code, message))

        return self._answer(refuse(), size, None)

    def _answer(
        self, answering: Coroutine[Any, Any, None], size: int, producer: _Producer | None
    ) -> asyncio.Future[None]:
        """Run the task answering a send; returns the future of its answer. The send stops
        counting as in flight when the task ends, whichever way: at its end, so the producer's
        next answer goes out in the same turn of the loop, or, for a task cancelled before it
        started, in its done callback."""
        answered: asyncio.Future[None] = asyncio.get_running_loop().create_future()

        def settle() -> None:
            if answered.done():
                return
            if producer is not None:
                producer.in_flight -= 1
            self._publishes.answered(size)
            answered.set_result(None)

        async def answer() -> None:
            try:
                await answering
            finally:
                settle()

        task = asyncio.get_running_loop().create_task(answer())
        self._tasks.add(task)

        def done(task: asyncio.Task[None]) -> None:
            self._task_done(task)
            if not answered.done():  # cancelled before it started: answer() never ran
                answering.close()
                settle()

        task.add_done_callback(done)
        return answered

    async def _publish(
        self, producer: _Producer, command: Send, previous: asyncio.Future[None] | None
    ) -> None:
        reply: Command
        try:
            message_id, duplicate = await producer.segment.publish(producer, command)
            reply = SendReceipt(command.producer_id, command.sequence_id, message_id, duplicate)
        except SegmentError as error:
            reply = SendError(command.producer_id, command.sequence_id, error.code, str(error))
        except Exception as error:
            log.exception("publish failed on %s", producer.segment.key)
            reply = SendError(
                command.producer_id, command.sequence_id, ErrorCode.INTERNAL_ERROR, str(error)
            )
        if previous is not None:
            # Receipts in the order of the producer's sends. Shielded: cancelling this task
            # must not cancel the previous send's answer, which its own task settles (and with
            # it the in-flight counts).
            await asyncio.shield(previous)
        await self.send(reply)

    # -- consumers ------------------------------------------------------------------------------

    async def _subscribe(self, command: Subscribe) -> None:
        if command.consumer_id in self._consumers:
            raise _RequestFailed(
                ErrorCode.ID_IN_USE,
                f"consumer id {command.consumer_id} is in use on this connection",
            )
        problem = subscription_name_problem(command.subscription)
        if problem is not None:
            raise _RequestFailed(ErrorCode.INVALID_REQUEST, f"subscription: {problem}")
        segment = self._segment(command.topic, command.segment_id)
        try:
            subscription = await segment.create_subscription(
                command.subscription,
                command.initial_position,
                limit=MAX_SUBSCRIPTIONS_PER_TOPIC,
            )
            consumer = _Consumer(
                command.consumer_id, next(_dispatch_ids), segment, subscription, self
            )
            self._consumers[command.consumer_id] = consumer
            subscription.add_consumer(
                Consumer(consumer.dispatch_id, command.consumer_name, command.priority),
                command.subscription_type,
                consumer,
                command.permits,
            )
        except BrokerError as error:
            self._consumers.pop(command.consumer_id, None)
            raise _RequestFailed(error.code, str(error)) from None
        except DispatchError as error:
            self._consumers.pop(command.consumer_id, None)
            raise _RequestFailed(ErrorCode.CONSUMER_BUSY, str(error)) from None
        await self.send(Success(command.request_id))

    async def _unsubscribe(self, command: Unsubscribe) -> None:
        consumer = self._consumer(command.consumer_id)
        if consumer.subscription.consumer_count > 1:
            raise _RequestFailed(
                ErrorCode.CONSUMER_BUSY,
                f"subscription {consumer.subscription.name!r} has other consumers; close them first",
            )
        self._detach(consumer)
        await consumer.segment.delete_subscription(consumer.subscription.name)
        await self.send(Success(command.request_id))

    async def _ack(self, command: Ack) -> None:
        consumer = self._consumer(command.consumer_id)
        positions = self._positions(consumer, command.message_ids)
        await consumer.subscription.ack(
            consumer.dispatch_id,
            positions,
            command.ack_type is AckType.CUMULATIVE,
        )
        if command.request_id is not None:
            await self.send(Success(command.request_id))

    async def _seek(self, command: Seek) -> None:
        consumer = self._consumer(command.consumer_id)
        if command.message_id is not None:
            await consumer.subscription.seek(
                self._positions(consumer, (command.message_id,))[0].entry_id
            )
        elif command.timestamp_ms is not None:
            await consumer.segment.seek_by_timestamp(
                consumer.subscription.name, command.timestamp_ms
            )
        await self.send(Success(command.request_id))

    # -- DAG watches ----------------------------------------------------------------------------

    def _watch_topic(self, command: WatchTopic) -> None:
        if command.watch_id in self._watches:
            raise _RequestFailed(
                ErrorCode.ID_IN_USE, f"watch id {command.watch_id} is in use on this connection"
            )
        namespace, name = split_topic(command.topic)
        self._watches[command.watch_id] = self._topic_watches.watch(
            namespace, name, command.watch_id, command.request_id, self.send, self.forget_watch
        )

    async def _close_watch(self, command: WatchClose) -> None:
        watch = self._watches.pop(command.watch_id, None)
        if watch is None:
            raise _RequestFailed(
                ErrorCode.UNKNOWN_WATCH, f"watch id {command.watch_id} is not open"
            )
        self._topic_watches.release(watch)
        await watch.close()  # no update for it follows the Success
        await self.send(Success(command.request_id))

    # -- namespace watches ----------------------------------------------------------------------

    async def _watch_namespace(self, command: WatchNamespace) -> None:
        """Open a namespace watch. Unanswered on success; every refusal is a NamespaceUpdate
        carrying WatchEnded (never an Error), after which the watch id is not open."""
        watch_id = command.watch_id
        open_already = self._namespace_watches.pop(watch_id, None)
        if open_already is not None:
            assert self._namespace_registry is not None  # it opened the watch
            # One WatchEnded for the id ends both: the client must not take the open watch's
            # later updates for the refused one's, nor the refusal for the open one's end.
            self._namespace_registry.end(
                open_already,
                ErrorCode.ID_IN_USE,
                f"namespace watch id {watch_id} was opened again while open: both are ended",
            )
            return
        try:
            self._namespace_watches[watch_id] = self._open_namespace_watch(command)
        except BrokerError as refusal:
            if refusal.code.closes_connection:
                raise
            ended = WatchEnded(refusal.code, str(refusal))
            await self.send(NamespaceUpdate(watch_id, ended=ended))
        except Exception as error:
            # A bug costs this watch, answered as every refusal of one is.
            log.exception("opening namespace watch %d failed", watch_id)
            ended = WatchEnded(ErrorCode.INTERNAL_ERROR, f"internal error: {error}")
            await self.send(NamespaceUpdate(watch_id, ended=ended))

    def _open_namespace_watch(self, command: WatchNamespace) -> NamespaceWatch:
        problem = namespace_problem(command.namespace)
        if problem is not None:
            raise _RequestFailed(ErrorCode.INVALID_REQUEST, problem)
        if len(command.filters) > MAX_NAMESPACE_WATCH_FILTERS:
            raise _RequestFailed(
                ErrorCode.INVALID_REQUEST,
                f"a namespace watch takes at most {MAX_NAMESPACE_WATCH_FILTERS} filters, "
                f"not {len(command.filters)}",
            )
        if self._authenticated.expired():
            raise _RequestFailed(ErrorCode.AUTHENTICATION_FAILED, "the token has expired")
        refusal = self._authenticated.principal.refusal(Action.READ, command.namespace)
        if refusal is not None:
            raise _RequestFailed(ErrorCode.NOT_AUTHORIZED, refusal)
        self._limits.check_room(self.open_handles, type(command).__name__)
        if self._namespace_registry is None:
            raise _RequestFailed(
                ErrorCode.SERVICE_NOT_READY, "this broker serves no namespace watch"
            )
        return self._namespace_registry.watch(
            command.namespace,
            command.filters,
            command.watch_id,
            command.current_hash,
            self.send,
            self.forget_namespace_watch,
            self._config.max_frame_bytes,
        )

    async def _close_namespace_watch(self, command: NamespaceWatchClose) -> None:
        watch = self._namespace_watches.pop(command.watch_id, None)
        if watch is None or self._namespace_registry is None:
            raise _RequestFailed(
                ErrorCode.UNKNOWN_WATCH, f"namespace watch id {command.watch_id} is not open"
            )
        self._namespace_registry.release(watch)
        await watch.close()  # no update of it follows the Success
        await self.send(Success(command.request_id))

    def forget_namespace_watch(self, watch: NamespaceWatch) -> None:
        if self._namespace_watches.get(watch.watch_id) is watch:
            del self._namespace_watches[watch.watch_id]

    # -- helpers --------------------------------------------------------------------------------

    @property
    def open_handles(self) -> int:
        """What ``--max-open-per-connection`` bounds: producers (opening ones included),
        consumers, watches, relayed registrations and grants, read from their tables."""
        relayed = sum(
            relay.open_count
            for relay in (self._consumer_relay, self._grant_relay)
            if relay is not None
        )
        held = len(self._producers) + len(self._opening) + len(self._consumers)
        return held + len(self._watches) + len(self._namespace_watches) + relayed

    def _connection_links(self) -> ConnectionLinks:
        """This connection's links to controllers, shared by its consumer and grant relays."""
        if self._links is None:
            self._links = self._controller_links.for_connection()
        return self._links

    def _segment(self, topic: str, segment_id: int) -> HostedSegment:
        try:
            return self._registry.find(topic, segment_id)
        except SegmentError as error:
            raise _RequestFailed(error.code, str(error)) from None

    def _consumer(self, consumer_id: int) -> _Consumer:
        consumer = self._consumers.get(consumer_id)
        if consumer is None:
            raise _RequestFailed(
                ErrorCode.UNKNOWN_CONSUMER, f"consumer id {consumer_id} is not subscribed"
            )
        return consumer

    def _positions(self, consumer: _Consumer, message_ids: tuple[MessageId, ...]) -> list[Position]:
        positions: list[Position] = []
        for message_id in message_ids:
            segment_id, entry_id, batch_index = message_id
            if segment_id != consumer.segment.key.segment_id:
                raise _RequestFailed(
                    ErrorCode.INVALID_REQUEST,
                    f"message id {message_id} belongs to segment {segment_id}, "
                    f"consumer {consumer.consumer_id} reads segment {consumer.segment.key.segment_id}",
                )
            if batch_index >= BATCH_INDEX_LIMIT:
                # No batch holds that many messages, and the dispatcher's bookkeeping would
                # take such an index for another message's.
                raise _RequestFailed(
                    ErrorCode.INVALID_REQUEST,
                    f"message id {message_id} has batch index {batch_index}: a batch holds "
                    f"fewer than {BATCH_INDEX_LIMIT} messages",
                )
            positions.append(Position(entry_id, batch_index))
        if not positions:
            raise _RequestFailed(ErrorCode.INVALID_REQUEST, "the request names no message")
        return positions

    def _detach(self, consumer: _Consumer) -> None:
        consumer.closed = True
        self._consumers.pop(consumer.consumer_id, None)
        consumer.subscription.remove_consumer(consumer.dispatch_id)

    def forget_producer(
        self, producer_id: int, producer: _Producer, code: ErrorCode, message: str
    ) -> None:
        """The broker closed ``producer``: remember why, for its late sends. A producer closed
        while it is admitted (not announced yet) is remembered too: it is told it opened."""
        registered = self._producers.get(producer_id)
        if registered is producer:
            del self._producers[producer_id]
        elif registered is not None or producer.announced.done():
            return  # closed already, its id taken again since
        self._closed_producers.pop(producer_id, None)  # re-inserted as the newest
        self._closed_producers[producer_id] = (code, message, producer)
        if len(self._closed_producers) > _CLOSED_PRODUCERS_KEPT:
            del self._closed_producers[next(iter(self._closed_producers))]

    def forget_watch(self, watch: TopicWatch) -> None:
        if self._watches.get(watch.watch_id) is watch:
            del self._watches[watch.watch_id]

    def forget_consumer(self, consumer_id: int, consumer: _Consumer) -> None:
        if self._consumers.get(consumer_id) is consumer:
            del self._consumers[consumer_id]

    def announce_closed(self, producer: _Producer, closed: ProducerClosed) -> None:
        """Send ``closed`` without holding up the caller, in the producer's story's order:
        after ProducerOpened (never for a producer whose open was refused), and after the
        answer to every Send already taken, so the producer knows exactly which of its
        batches were stored (and which go to the children)."""
        answered = producer.last_receipt

        async def send_in_order() -> None:
            if not await asyncio.shield(producer.announced):
                return  # it never began, so it does not end
            if answered is not None:
                await asyncio.shield(answered)  # the answer's own task completes it
            await self.send(closed)

        self._spawn(send_in_order())

    def _spawn(self, work: Coroutine[Any, Any, None]) -> asyncio.Task[None]:
        """Run ``work`` as a task of this connection: cancelled and awaited when it ends, and
        a failure logged (so none is left for asyncio to report unretrieved)."""
        task = asyncio.get_running_loop().create_task(work)
        self._tasks.add(task)
        task.add_done_callback(self._task_done)
        return task

    def _task_done(self, task: asyncio.Task[None]) -> None:
        self._tasks.discard(task)
        report_failure(task, log, "a connection's task")

    def _spawn_request(self, command: Command, work: Coroutine[Any, Any, None]) -> None:
        """Run a client's request (an acknowledgement, a seek) as a task: it counts towards
        the connection's pending requests until it ends, and its failure is answered as an
        Error for the request, as a request served in the read loop is."""

        async def answered() -> None:
            try:
                await work
            except Exception as error:
                await self.send(_failure_answer(command, error))

        self._publishes.request_started(self._spawn(answered()))

    async def send(self, command: Command) -> None:
        if self._ws.closed:
            return
        try:
            await self._ws.send_bytes(encode_frame(command))
        except ConnectionError:
            log.debug("peer went away while sending %s", type(command).__name__)

    async def _release(self) -> None:
        """The connection ended: producers close, consumers leave (their pending messages go
        back for redelivery), requests in flight are abandoned."""
        self._closing = True
        if self._expiry is not None:
            self._expiry.cancel()
        for task in list(self._opening.values()):
            task.cancel()
        for producer in list(self._producers.values()):
            producer.closed = True
            with contextlib.suppress(Exception):
                await producer.segment.close_producer(producer)
        self._producers.clear()
        for consumer in list(self._consumers.values()):
            with contextlib.suppress(Exception):
                self._detach(consumer)
        for watch in list(self._watches.values()):
            self._topic_watches.release(watch)
            watch.cancel()
        self._watches.clear()
        namespace_watches = list(self._namespace_watches.values())
        self._namespace_watches.clear()
        for namespace_watch in namespace_watches:
            if self._namespace_registry is not None:
                self._namespace_registry.release(namespace_watch)
            await namespace_watch.cancel()
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        try:
            if tasks:
                await asyncio.wait(tasks)  # their failures are logged as they end
        finally:
            if self._links is not None:
                # Last: it awaits, and the handler may be cancelled meanwhile. The
                # registrations and a holder's grant stay with their controllers for the
                # grace period.
                with contextlib.suppress(Exception):
                    await self._links.close()


# The commands that open something a connection then holds (bounded by open_handles).
_OPENS = (ProducerOpen, Subscribe, WatchTopic, RegisterConsumer, AcquireExclusive)


def _topic_action(command: Command) -> tuple[Action, str] | None:
    """What a command that opens something on a topic asks of the principal, and the topic."""
    match command:
        case ProducerOpen(topic=topic) | AcquireExclusive(topic=topic):
            return Action.PRODUCE, topic
        case Subscribe(topic=topic) | RegisterConsumer(topic=topic):
            return Action.CONSUME, topic
        case WatchTopic(topic=topic):
            return Action.READ, topic
    return None  # acts on what this connection opened, or on nothing


def _failure_answer(command: Command, error: Exception) -> Error:
    """The Error answering ``command``, which failed with ``error``. A bug (anything but a
    BrokerError) is logged with its traceback: it must cost one request, not the connection or
    the broker."""
    if isinstance(error, BrokerError):
        return Error(_request_id(command), error.code, str(error))
    log.exception("%s failed", type(command).__name__, exc_info=error)
    return Error(_request_id(command), ErrorCode.INTERNAL_ERROR, f"internal error: {error}")


def _request_id(command: Command) -> int | None:
    request_id = getattr(command, "request_id", None)
    return request_id if isinstance(request_id, int) else None
