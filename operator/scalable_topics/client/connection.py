"""One WebSocket to one broker, shared by every producer, consumer and watch that uses it.

The connection pairs answers with requests by ``request_id`` and hands every push (a message,
a receipt, a layout update, an assignment...) to the handler registered for the push's
producer, consumer, watch, registration or grant id. Handlers are plain callbacks, run on the
reader task: they must not block, so they queue what they receive and return.

When the WebSocket drops, every outstanding request fails with ConnectionFailed and every
handler hears ``connection_lost``; the owners reopen what they had on a new connection. A
broker that closes with 1008 (policy violation) during the handshake refused the token: that
is AuthenticationFailed, which nobody retries.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import itertools
import logging
from collections.abc import Callable, Coroutine
from enum import Enum
from typing import Any, Protocol

import aiohttp

from ..protocol import (
    DEFAULT_MAX_FRAME_BYTES,
    SUPPORTED_VERSIONS,
    CloseCode,
    Command,
    Connect,
    Connected,
    ConsumerAssignment,
    ConsumerClosed,
    EndOfSegment,
    Error,
    ErrorCode,
    ExclusiveGranted,
    ExclusiveRevoked,
    Message,
    NamespaceUpdate,
    Ping,
    Pong,
    ProducerClosed,
    ProtocolError,
    RegistrationClosed,
    SendError,
    SendReceipt,
    TopicUpdate,
    WatchClosed,
    decode_frame,
    encode_frame,
)
from ..tasks import cancel_and_wait
from .connect_errors import connect_failure
from .errors import (
    AuthenticationFailed,
    ClientError,
    ConnectionFailed,
    ConnectTimeout,
    Timeout,
    error_for,
)

log = logging.getLogger(__name__)

# aiohttp pings the broker this often and drops a connection that stops answering.
_HEARTBEAT_SECONDS = 15.0
# How long a request whose answer is ignored may take before it is given up on too.
_QUIET_REQUEST_SECONDS = 10.0


class Channel(Enum):
    """The id spaces of one connection (protocol section 3)."""

    PRODUCER = "producer"
    CONSUMER = "consumer"
    WATCH = "watch"
    NAMESPACE_WATCH = "namespace watch"
    REGISTRATION = "registration"
    GRANT = "grant"


class PushHandler(Protocol):
    def on_push(self, command: Command) -> None:
        """A push for this handler's id; called on the reader task, must not block."""

    def on_connection_lost(self, error: ClientError) -> None:
        """The connection dropped: everything opened on it is gone."""


def _route(command: Command) -> tuple[Channel, int] | None:
    """Which handler a broker push belongs to; None for answers to requests."""
    match command:
        case Message() | EndOfSegment() | ConsumerClosed():
            return Channel.CONSUMER, command.consumer_id
        case SendReceipt() | SendError() | ProducerClosed():
            return Channel.PRODUCER, command.producer_id
        case TopicUpdate(request_id=None) | WatchClosed():
            return Channel.WATCH, command.watch_id
        case NamespaceUpdate():
            return Channel.NAMESPACE_WATCH, command.watch_id
        case ConsumerAssignment() | RegistrationClosed():
            return Channel.REGISTRATION, command.registration_id
        case ExclusiveGranted(request_id=None) | ExclusiveRevoked():
            return Channel.GRANT, command.grant_id
    return None


class BrokerConnection:
    """An open, handshaken connection; make one with :meth:`open`."""

    def __init__(
        self, url: str, ws: aiohttp.ClientWebSocketResponse, session: aiohttp.ClientSession
    ) -> None:
        self.url = url
        self._ws = ws
        self._session = session
        self._request_ids = itertools.count(1)
        self._ids = {channel: itertools.count(1) for channel in Channel}
        self._pending: dict[int, asyncio.Future[Command]] = {}
        self._handlers: dict[tuple[Channel, int], PushHandler] = {}
        self._reader: asyncio.Task[None] | None = None
        self._lost: ClientError | None = None
        self._closed_listeners: list[Callable[[BrokerConnection], None]] = []
        self._background: set[asyncio.Task[Any]] = set()
        self._handshaken = False
        self.broker_name = ""
        self.protocol_version = 0  # the version the handshake agreed on
        self.max_frame_bytes = DEFAULT_MAX_FRAME_BYTES
        self.max_message_bytes = 0

    @classmethod
    async def open(
        cls,
        url: str,
        session: aiohttp.ClientSession,
        *,
        client_name: str,
        auth_token: str | None,
        wait_seconds: float,
    ) -> BrokerConnection:
        """Connect and handshake (TCP, TLS, the WebSocket upgrade and the protocol's Connect)
        within ``wait_seconds`` in all; ConnectionFailed (ConnectTimeout when out of time)
        naming the URL and the reason, or AuthenticationFailed (raised at once, never retried)."""
        connection: BrokerConnection | None = None
        try:
            async with asyncio.timeout(wait_seconds):
                ws = await session.ws_connect(
                    url.rstrip("/") + "/ws", max_msg_size=0, heartbeat=_HEARTBEAT_SECONDS
                )
                connection = cls(url, ws, session)
                connection._reader = asyncio.get_running_loop().create_task(
                    connection._read(), name=f"read {url}"
                )
                reply = await connection.request(
                    Connect(0, SUPPORTED_VERSIONS, client_name, auth_token),
                    wait_seconds=wait_seconds,
                )
        except BaseException as error:
            if connection is not None:
                await connection.close()
            if isinstance(error, TimeoutError):
                raise ConnectTimeout(
                    f"cannot connect to {url}: {connect_failure(error, wait_seconds)}"
                ) from None
            if isinstance(error, aiohttp.ClientError | OSError):
                raise ConnectionFailed(
                    f"cannot connect to {url}: {connect_failure(error, wait_seconds)}"
                ) from None
            raise
        assert isinstance(reply, Connected)
        connection._handshaken = True
        connection.broker_name = reply.broker_name
        connection.protocol_version = reply.protocol_version
        connection.max_frame_bytes = reply.max_frame_bytes
        connection.max_message_bytes = reply.max_message_bytes
        return connection

    @property
    def is_open(self) -> bool:
        return self._lost is None

    def new_id(self, channel: Channel) -> int:
        return next(self._ids[channel])

    def attach(self, channel: Channel, ident: int, handler: PushHandler) -> None:
        self._handlers[(channel, ident)] = handler

    def detach(self, channel: Channel, ident: int) -> None:
        self._handlers.pop((channel, ident), None)

    def on_close(self, listener: Callable[[BrokerConnection], None]) -> None:
        self._closed_listeners.append(listener)

    async def request(
        self, command: Any, *, wait_seconds: float = 30.0, undo: Any | None = None
    ) -> Command:
        """Send a request (its ``request_id`` is assigned here) and return the answer; an
        ``Error`` answer raises the matching ClientError. ``undo`` is the request's close
        (ConsumerClose for a Subscribe...): if the request is given up on (timed out or
        cancelled) the broker may still take it, so the undo is sent after it."""
        if self._lost is not None:
            raise self._lost
        request_id = next(self._request_ids)
        command = dataclasses.replace(command, request_id=request_id)
        future: asyncio.Future[Command] = asyncio.get_running_loop().create_future()
        self._pending[request_id] = future
        try:
            await self.send(command)
            async with asyncio.timeout(wait_seconds):
                reply = await future
        except (asyncio.CancelledError, TimeoutError) as given_up:
            if undo is not None:
                self.request_soon(undo)
            if isinstance(given_up, TimeoutError):
                raise Timeout(
                    f"{type(command).__name__} got no answer from {self.url} in {wait_seconds:g} s"
                ) from None
            raise
        finally:
            self._pending.pop(request_id, None)
        if isinstance(reply, Error):
            raise error_for(reply.code, reply.message)
        return reply

    def request_soon(self, command: Any) -> None:
        """Send a request in the background and ignore its answer: a close whose outcome
        changes nothing ("unknown id" means there was nothing to close). The broker handles
        one connection's requests in order, so it comes after every request sent before."""
        if self._lost is not None:
            return  # everything opened on this connection is gone with it

        async def request_quietly() -> None:
            with contextlib.suppress(ClientError):
                await self.request(command, wait_seconds=_QUIET_REQUEST_SECONDS)

        self._spawn(request_quietly())

    async def send(self, command: Command) -> None:
        """Send without waiting for an answer (Send, Flow, Ack without receipt...)."""
        if self._lost is not None:
            raise self._lost
        try:
            await self._ws.send_bytes(encode_frame(command))
        except (ConnectionError, aiohttp.ClientError, RuntimeError) as error:
            self._connection_lost(ConnectionFailed(f"lost the broker at {self.url}: {error}"))
            assert self._lost is not None
            raise self._lost from None

    async def close(self) -> None:
        self._connection_lost(ConnectionFailed(f"the connection to {self.url} was closed"))
        with contextlib.suppress(Exception):
            await self._ws.close()
        if self._reader is not None and self._reader is not asyncio.current_task():
            await cancel_and_wait(self._reader)

    # -- reading --------------------------------------------------------------------------------

    async def _read(self) -> None:
        lost: ClientError | None = None
        try:
            while True:
                frame = await self._ws.receive()
                if frame.type is aiohttp.WSMsgType.BINARY:
                    try:
                        command = decode_frame(frame.data, self.max_frame_bytes)
                    except ProtocolError as error:
                        lost = self._lost_with(
                            f"the broker sent a frame this client cannot read: {error}"
                        )
                        break
                    self._dispatch(command)
                elif frame.type is aiohttp.WSMsgType.CLOSE:
                    lost = self._closed_by_broker(frame.data, frame.extra or "")
                    break
                elif frame.type is aiohttp.WSMsgType.ERROR:
                    lost = self._lost_with(f"the connection failed: {self._ws.exception()}")
                    break
                elif frame.type in (aiohttp.WSMsgType.CLOSING, aiohttp.WSMsgType.CLOSED):
                    break
        except Exception as error:  # a handler bug must not leave requests hanging
            log.exception("reading from %s failed", self.url)
            lost = self._lost_with(f"reading from the broker failed: {error}")
        finally:
            self._connection_lost(lost or self._lost_with("the broker closed the connection"))
            with contextlib.suppress(Exception):
                await self._ws.close()

    def _lost_with(self, reason: str) -> ClientError:
        return ConnectionFailed(f"lost the broker at {self.url}: {reason}")

    def _closed_by_broker(self, code: int, reason: str) -> ClientError:
        said = f"the broker closed the connection with {code}" + (f" ({reason})" if reason else "")
        if code == CloseCode.POLICY_VIOLATION and not self._handshaken:
            return AuthenticationFailed(
                f"{self.url} refused the connection: {said}", ErrorCode.AUTHENTICATION_FAILED
            )
        return self._lost_with(said)

    def _dispatch(self, command: Command) -> None:
        route = _route(command)
        if route is None:
            if isinstance(command, Ping):
                self._send_soon(Pong())
                return
            request_id = getattr(command, "request_id", None)
            future = self._pending.get(request_id) if request_id is not None else None
            if future is not None and not future.done():
                future.set_result(command)
            elif isinstance(command, Error):
                log.warning("%s refused a frame: %s %s", self.url, command.code, command.message)
                if command.code.closes_connection:
                    self._connection_lost(error_for(command.code, command.message))
            return
        handler = self._handlers.get(route)
        if handler is not None:
            handler.on_push(command)

    def _send_soon(self, command: Command) -> None:
        async def send_quietly() -> None:
            with contextlib.suppress(ClientError):
                await self.send(command)

        self._spawn(send_quietly())

    def _spawn(self, work: Coroutine[Any, Any, None]) -> None:
        task = asyncio.get_running_loop().create_task(work)
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    def _connection_lost(self, error: ClientError) -> None:
        if self._lost is not None:
            return
        self._lost = error
        for future in self._pending.values():
            if not future.done():
                future.set_exception(error)
        handlers = list(self._handlers.values())
        self._handlers.clear()
        for handler in handlers:
            try:
                handler.on_connection_lost(error)
            except Exception:
                log.exception("a handler failed on losing %s", self.url)
        for listener in self._closed_listeners:
            listener(self)
