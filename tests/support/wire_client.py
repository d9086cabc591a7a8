"""A minimal protocol client for broker tests: requests matched by id, events queued."""

from __future__ import annotations

import asyncio
import base64
import itertools
import os
import socket
from collections import defaultdict
from typing import Any

import aiohttp

from scalable_topics.protocol import (
    PROTOCOL_VERSION,
    Ack,
    AckType,
    AcquireExclusive,
    BatchMessage,
    Command,
    Connect,
    Connected,
    ConsumerAssignment,
    ConsumerClosed,
    DeliveredMessage,
    EndOfSegment,
    Error,
    ExclusiveGranted,
    ExclusiveRevoked,
    Flow,
    InitialPosition,
    Message,
    MessageId,
    Nack,
    NamespaceUpdate,
    NamespaceWatchClose,
    Ping,
    ProducerAccessMode,
    ProducerClose,
    ProducerClosed,
    ProducerOpen,
    ProducerOpened,
    RegisterConsumer,
    RegistrationClosed,
    ReleaseExclusive,
    SegmentSubscriptionType,
    Send,
    SendError,
    SendReceipt,
    Subscribe,
    Success,
    UnregisterConsumer,
    WatchNamespace,
    decode_frame,
    encode_frame,
)
from scalable_topics.tasks import cancel_and_wait

TIMEOUT = 20.0


async def abandon_upgrade(url: str, path: str = "/ws") -> None:
    """Ask ``url`` (``http://host:port``) for a WebSocket upgrade and drop the TCP connection
    at once, before the server can answer."""
    _, writer = await _ask_upgrade(url, path)
    writer.transport.abort()


async def ping_and_leave(url: str, path: str = "/ws") -> None:
    """Open a WebSocket to ``url`` (``http://host:port``) and send, at once, Connect, many
    Pings (commands, each answered) and a WebSocket ping behind them; drop the TCP connection
    as soon as Connected comes: the server is then still busy with the commands, and reads the
    WebSocket ping after the connection is gone."""
    reader, writer = await _ask_upgrade(url, path)
    answer = await reader.readuntil(b"\r\n\r\n")
    assert answer.startswith(b"HTTP/1.1 101"), answer
    frames = [encode_frame(Connect(1, (PROTOCOL_VERSION,), "leaving"))]
    frames += [encode_frame(Ping())] * 300
    # Masked client frames, with the mask key 0: binary ones, then an empty ping.
    writer.write(b"".join(bytes((0x82, 0x80 | len(f))) + bytes(4) + f for f in frames))
    writer.write(b"\x89\x80" + bytes(4))
    await reader.readexactly(2)  # the first answer (Connected) has begun
    writer.transport.abort()


async def _ask_upgrade(url: str, path: str) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    host, port = url.removeprefix("http://").rsplit(":", 1)
    reader, writer = await asyncio.open_connection(host, int(port))
    key = base64.b64encode(os.urandom(16)).decode()
    writer.write(
        f"GET {path} HTTP/1.1\r\nHost: {host}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
        f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n".encode()
    )
    return reader, writer


class RequestFailed(Exception):
    def __init__(self, error: Error) -> None:
        super().__init__(f"{error.code}: {error.message}")
        self.code = error.code


class WireClient:
    def __init__(self) -> None:
        self._ids = itertools.count(1)
        self._pending: dict[int, asyncio.Future[Command]] = {}
        self._receipts: dict[tuple[int, int], asyncio.Future[Command]] = {}
        self.messages: dict[int, asyncio.Queue[DeliveredMessage | None]] = defaultdict(
            asyncio.Queue
        )
        self.closed = False
        self._sending: set[asyncio.Future[None]] = set()
        self.events: asyncio.Queue[Command] = asyncio.Queue()
        # Every SendReceipt, SendError and ProducerClosed, in the order they arrived.
        self.producer_answers: list[SendReceipt | SendError | ProducerClosed] = []
        self.unmatched_errors: asyncio.Queue[Error] = asyncio.Queue()
        # Every NamespaceUpdate, by watch id, in the order they arrived.
        self.namespace_updates: dict[int, asyncio.Queue[NamespaceUpdate]] = defaultdict(
            asyncio.Queue
        )
        self._session: aiohttp.ClientSession | None = None
        self._ws: aiohttp.ClientWebSocketResponse | None = None
        self._reader: asyncio.Task[None] | None = None

    @classmethod
    async def connect(cls, url: str, token: str | None = None) -> WireClient:
        client = cls()
        client._session = aiohttp.ClientSession()
        try:
            client._ws = await client._session.ws_connect(url + "/ws", max_msg_size=0)
            client._reader = asyncio.create_task(client._read())
            reply = await client.request(
                Connect(client.next_id(), (PROTOCOL_VERSION,), "tests", token)
            )
            assert isinstance(reply, Connected)
        except BaseException:
            await asyncio.shield(client.close())
            raise
        return client

    def next_id(self) -> int:
        return next(self._ids)

    async def close(self) -> None:
        try:
            if self._ws is not None:
                await self._ws.close()
        finally:
            if self._reader is not None:
                await cancel_and_wait(self._reader)
            if self._session is not None:
                await self._session.close()

    async def drop(self) -> None:
        """Drop the TCP connection without the WebSocket closing handshake (as a client that
        dies does), then release what the client holds."""
        assert self._ws is not None
        sock = self._ws.get_extra_info("socket")
        if sock is not None:
            sock.shutdown(socket.SHUT_RDWR)
        await self.close()

    async def send_raw(self, data: bytes) -> None:
        assert self._ws is not None
        await self._ws.send_bytes(data)

    async def send_command(self, command: Command) -> None:
        await self.send_raw(encode_frame(command))

    async def request(self, command: Any) -> Command:
        future: asyncio.Future[Command] = asyncio.get_running_loop().create_future()
        self._pending[command.request_id] = future
        await self.send_command(command)
        async with asyncio.timeout(TIMEOUT):
            reply = await future
        if isinstance(reply, Error):
            raise RequestFailed(reply)
        return reply

    async def start_request(self, command: Any) -> asyncio.Future[Command]:
        """Send a request answered later (a producer waiting for exclusive access, a watch
        waiting for a layout); the future resolves to its answer, an Error included."""
        future: asyncio.Future[Command] = asyncio.get_running_loop().create_future()
        self._pending[command.request_id] = future
        await self.send_command(command)
        return future

    # -- producers ------------------------------------------------------------------------------

    async def open_producer(
        self,
        producer_id: int,
        topic: str,
        segment_id: int,
        name: str | None = None,
        mode: ProducerAccessMode = ProducerAccessMode.SHARED,
        epoch: int | None = None,
    ) -> ProducerOpened:
        reply = await self.request(
            ProducerOpen(self.next_id(), producer_id, topic, segment_id, name, mode, epoch)
        )
        assert isinstance(reply, ProducerOpened)
        return reply

    async def close_producer(self, producer_id: int) -> None:
        await self.request(ProducerClose(self.next_id(), producer_id))

    def send_batch(
        self, producer_id: int, sequence_id: int, messages: list[BatchMessage]
    ) -> asyncio.Future[Command]:
        """Send a batch now; the future resolves to its SendReceipt or SendError."""
        future: asyncio.Future[Command] = asyncio.get_running_loop().create_future()
        self._receipts[(producer_id, sequence_id)] = future
        sending = asyncio.ensure_future(
            self.send_command(Send(producer_id, sequence_id, tuple(messages)))
        )
        self._sending.add(sending)
        sending.add_done_callback(self._sending.discard)
        return future

    async def send(
        self, producer_id: int, sequence_id: int, *messages: BatchMessage
    ) -> SendReceipt:
        async with asyncio.timeout(TIMEOUT):
            reply = await self.send_batch(producer_id, sequence_id, list(messages))
        if isinstance(reply, SendError):
            raise RequestFailed(Error(None, reply.code, reply.message))
        assert isinstance(reply, SendReceipt)
        return reply

    # -- consumers ------------------------------------------------------------------------------

    async def subscribe(
        self,
        consumer_id: int,
        topic: str,
        segment_id: int,
        subscription: str,
        kind: SegmentSubscriptionType,
        name: str = "consumer",
        permits: int = 1000,
        initial: InitialPosition = InitialPosition.EARLIEST,
        priority: int = 0,
    ) -> None:
        reply = await self.request(
            Subscribe(
                self.next_id(),
                consumer_id,
                topic,
                segment_id,
                subscription,
                kind,
                name,
                priority,
                initial,
                permits,
            )
        )
        assert isinstance(reply, Success)

    async def flow(self, consumer_id: int, permits: int) -> None:
        await self.send_command(Flow(consumer_id, permits))

    async def receive(self, consumer_id: int, timeout: float = TIMEOUT) -> DeliveredMessage:
        if self.closed and self.messages[consumer_id].empty():
            raise ConnectionError("the connection is closed")
        async with asyncio.timeout(timeout):
            message = await self.messages[consumer_id].get()
        if message is None:
            raise ConnectionError("the connection closed")
        return message

    async def receive_n(
        self, consumer_id: int, count: int, timeout: float = TIMEOUT
    ) -> list[DeliveredMessage]:
        return [await self.receive(consumer_id, timeout) for _ in range(count)]

    async def ack(
        self, consumer_id: int, *ids: MessageId, cumulative: bool = False, receipt: bool = True
    ) -> None:
        kind = AckType.CUMULATIVE if cumulative else AckType.INDIVIDUAL
        if receipt:
            await self.request(Ack(consumer_id, kind, tuple(ids), self.next_id()))
        else:
            await self.send_command(Ack(consumer_id, kind, tuple(ids)))

    async def nack(self, consumer_id: int, *ids: MessageId, delay_ms: int = 0) -> None:
        await self.send_command(Nack(consumer_id, tuple(ids), delay_ms))

    # -- stream / checkpoint consumer registrations ----------------------------------------------

    async def register_consumer(
        self, registration_id: int, topic: str, subscription: str, name: str
    ) -> None:
        reply = await self.request(
            RegisterConsumer(self.next_id(), registration_id, topic, subscription, name)
        )
        assert isinstance(reply, Success)

    async def unregister_consumer(self, registration_id: int) -> None:
        reply = await self.request(UnregisterConsumer(self.next_id(), registration_id))
        assert isinstance(reply, Success)

    # -- topic-wide exclusive producer grants ---------------------------------------------------

    async def acquire_exclusive(
        self,
        grant_id: int,
        topic: str,
        name: str,
        mode: ProducerAccessMode = ProducerAccessMode.EXCLUSIVE,
        epoch: int | None = None,
    ) -> ExclusiveGranted | Success:
        """ExclusiveGranted, or Success when a WaitForExclusive request waits (the grant then
        comes as an event)."""
        reply = await self.request(
            AcquireExclusive(self.next_id(), grant_id, topic, name, mode, epoch)
        )
        assert isinstance(reply, ExclusiveGranted | Success)
        return reply

    async def release_exclusive(self, grant_id: int) -> None:
        reply = await self.request(ReleaseExclusive(self.next_id(), grant_id))
        assert isinstance(reply, Success)

    # -- namespace watches ------------------------------------------------------------------------

    async def watch_namespace(
        self,
        watch_id: int,
        namespace: str,
        filters: dict[str, str] | None = None,
        current_hash: int | None = None,
    ) -> None:
        """Open a namespace watch (unanswered: its updates queue in ``namespace_updates``)."""
        await self.send_command(WatchNamespace(watch_id, namespace, filters or {}, current_hash))

    async def namespace_update(self, watch_id: int, timeout: float = TIMEOUT) -> NamespaceUpdate:
        async with asyncio.timeout(timeout):
            return await self.namespace_updates[watch_id].get()

    async def namespace_snapshot(self, watch_id: int) -> tuple[str, ...]:
        """The names of the next snapshot, its parts joined (each part checked sorted)."""
        names: list[str] = []
        while True:
            update = await self.namespace_update(watch_id)
            assert update.snapshot is not None, update
            names.extend(update.snapshot.topics)
            if update.snapshot.complete:
                assert names == sorted(names), names
                return tuple(names)

    async def close_namespace_watch(self, watch_id: int) -> None:
        reply = await self.request(NamespaceWatchClose(self.next_id(), watch_id))
        assert isinstance(reply, Success)

    async def next_event(self, kind: type[Command], timeout: float = TIMEOUT) -> Any:
        async with asyncio.timeout(timeout):
            while True:
                event = await self.events.get()
                if isinstance(event, kind):
                    return event

    # -- reading --------------------------------------------------------------------------------

    async def _read(self) -> None:
        try:
            await self._read_frames()
        finally:
            # The connection is gone: whoever waits for an answer gets an error now.
            self.closed = True
            for future in [*self._pending.values(), *self._receipts.values()]:
                if not future.done():
                    future.set_exception(ConnectionError("the connection closed"))
            for queue in self.messages.values():
                queue.put_nowait(None)

    async def _read_frames(self) -> None:
        assert self._ws is not None
        async for frame in self._ws:
            if frame.type is not aiohttp.WSMsgType.BINARY:
                continue
            command = decode_frame(frame.data, 1 << 30)
            match command:
                case Message():
                    for message in command.messages:
                        self.messages[command.consumer_id].put_nowait(message)
                case SendReceipt() | SendError():
                    self.producer_answers.append(command)
                    future = self._receipts.pop((command.producer_id, command.sequence_id), None)
                    if future is not None and not future.done():
                        future.set_result(command)
                case ProducerClosed():
                    self.producer_answers.append(command)
                    self.events.put_nowait(command)
                case NamespaceUpdate():
                    self.namespace_updates[command.watch_id].put_nowait(command)
                case (
                    ConsumerClosed()
                    | EndOfSegment()
                    | ConsumerAssignment()
                    | RegistrationClosed()
                    | ExclusiveRevoked()
                    | ExclusiveGranted(request_id=None)
                ):
                    self.events.put_nowait(command)
                case _:
                    request_id = getattr(command, "request_id", None)
                    future = self._pending.pop(request_id, None) if request_id is not None else None
                    if future is not None and not future.done():
                        future.set_result(command)
                    elif isinstance(command, Error):
                        self.unmatched_errors.put_nowait(command)
