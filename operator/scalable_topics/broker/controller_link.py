"""A broker's connection to one controller endpoint: protocol v1 with the broker as client.

Requests are matched to their answers by request id (an Error answer raises
:class:`LinkRefused`); pushes that name a registration (ConsumerAssignment,
RegistrationClosed) or an exclusive producer grant (ExclusiveGranted without a request id,
ExclusiveRevoked) go to the listener registered for it. When the connection ends every
outstanding request fails with :class:`LinkLost` and every listener is told, so each relayed
registration or grant can find the topic's leader again.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
from typing import Protocol

import aiohttp

from ..protocol import (
    DEFAULT_MAX_FRAME_BYTES,
    SUPPORTED_VERSIONS,
    Command,
    Connect,
    Connected,
    ConsumerAssignment,
    Error,
    ErrorCode,
    ExclusiveGranted,
    ExclusiveRevoked,
    Ping,
    Pong,
    ProtocolError,
    RegistrationClosed,
    decode_frame,
    encode_frame,
)
from ..tasks import cancel_and_wait

log = logging.getLogger(__name__)

# Controllers serve the protocol at the same path as brokers.
CONTROLLER_WS_PATH = "/ws"
REQUEST_TIMEOUT = 30.0

Push = ConsumerAssignment | RegistrationClosed
GrantPush = ExclusiveGranted | ExclusiveRevoked


class LinkLost(Exception):
    """The connection to the controller could not be made, or ended."""


class LinkRefused(Exception):
    """The controller answered a request with an Error."""

    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message


class PushListener(Protocol):
    def pushed(self, push: Push) -> None: ...

    def lost(self) -> None: ...


class GrantListener(Protocol):
    def pushed(self, push: GrantPush) -> None: ...

    def lost(self) -> None: ...


class ControllerLink:
    def __init__(self, endpoint: str, ws: aiohttp.ClientWebSocketResponse) -> None:
        self.endpoint = endpoint
        self._ws = ws
        self._ids = itertools.count(1)
        self._pending: dict[int, asyncio.Future[Command]] = {}
        self._listeners: dict[int, PushListener] = {}
        self._grant_listeners: dict[int, GrantListener] = {}  # grant ids: their own id space
        self._reader: asyncio.Task[None] | None = None

    @classmethod
    async def open(
        cls,
        http: aiohttp.ClientSession,
        endpoint: str,
        client_name: str,
        token: str | None,
    ) -> ControllerLink:
        """Connect and handshake; LinkLost or LinkRefused when that fails."""
        url = endpoint.rstrip("/") + CONTROLLER_WS_PATH
        try:
            async with asyncio.timeout(REQUEST_TIMEOUT):
                ws = await http.ws_connect(url, heartbeat=30, max_msg_size=DEFAULT_MAX_FRAME_BYTES)
        except (aiohttp.ClientError, OSError, TimeoutError) as error:
            raise LinkLost(f"cannot reach the controller at {endpoint}: {error}") from error
        link = cls(endpoint, ws)
        link._reader = asyncio.get_running_loop().create_task(
            link._read(), name=f"controller link {endpoint}"
        )
        try:
            reply = await link.request(
                Connect(link.next_request_id(), SUPPORTED_VERSIONS, client_name, token)
            )
        except BaseException:
            await link.close()
            raise
        if not isinstance(reply, Connected):
            await link.close()
            raise LinkLost(f"the controller at {endpoint} answered Connect with {reply}")
        return link

    @property
    def closed(self) -> bool:
        return self._reader is None or self._reader.done()

    def next_request_id(self) -> int:
        return next(self._ids)

    def listen(self, registration_id: int, listener: PushListener) -> None:
        self._listeners[registration_id] = listener

    def unlisten(self, registration_id: int, listener: PushListener) -> None:
        if self._listeners.get(registration_id) is listener:
            del self._listeners[registration_id]

    def listen_grant(self, grant_id: int, listener: GrantListener) -> None:
        self._grant_listeners[grant_id] = listener

    def unlisten_grant(self, grant_id: int, listener: GrantListener) -> None:
        if self._grant_listeners.get(grant_id) is listener:
            del self._grant_listeners[grant_id]

    async def request(self, command: Command) -> Command:
        """Send a request and return its answer; LinkRefused for an Error answer, LinkLost
        when the connection ends or no answer comes within REQUEST_TIMEOUT (the link is then
        closed: the controller must not keep what this side gave up on)."""
        request_id = getattr(command, "request_id", None)
        if not isinstance(request_id, int):
            raise TypeError(f"{type(command).__name__} is not a request")
        if self.closed:
            raise LinkLost(f"the link to {self.endpoint} is closed")
        future: asyncio.Future[Command] = asyncio.get_running_loop().create_future()
        self._pending[request_id] = future
        try:
            await self._ws.send_bytes(encode_frame(command))
            async with asyncio.timeout(REQUEST_TIMEOUT):
                reply = await future
        except TimeoutError:
            await self.close()
            raise LinkLost(f"no answer from {self.endpoint} to {type(command).__name__}") from None
        except (ConnectionError, aiohttp.ClientError) as error:
            raise LinkLost(f"the link to {self.endpoint} failed: {error}") from error
        finally:
            self._pending.pop(request_id, None)
        if isinstance(reply, Error):
            raise LinkRefused(reply.code, reply.message)
        return reply

    async def close(self) -> None:
        await self._ws.close()
        if self._reader is not None:
            await cancel_and_wait(self._reader)

    async def _read(self) -> None:
        try:
            async for frame in self._ws:
                if frame.type is not aiohttp.WSMsgType.BINARY:
                    continue
                try:
                    command = decode_frame(frame.data)
                except ProtocolError as error:
                    log.warning("controller %s sent a bad frame: %s", self.endpoint, error)
                    if error.code.closes_connection:
                        return
                    continue
                await self._route(command)
        finally:
            lost = LinkLost(f"the link to the controller at {self.endpoint} ended")
            for future in self._pending.values():
                if not future.done():
                    future.set_exception(lost)
            listeners, self._listeners = self._listeners, {}
            for listener in listeners.values():
                listener.lost()
            grant_listeners, self._grant_listeners = self._grant_listeners, {}
            for grant_listener in grant_listeners.values():
                grant_listener.lost()
            with contextlib.suppress(Exception):
                await self._ws.close()

    async def _route(self, command: Command) -> None:
        match command:
            case ConsumerAssignment() | RegistrationClosed():
                listener = self._listeners.get(command.registration_id)
                if listener is not None:
                    listener.pushed(command)
            case ExclusiveRevoked() | ExclusiveGranted(request_id=None):
                grant_listener = self._grant_listeners.get(command.grant_id)
                if grant_listener is not None:
                    grant_listener.pushed(command)
            case Ping():
                with contextlib.suppress(ConnectionError):
                    await self._ws.send_bytes(encode_frame(Pong()))
            case Pong():
                pass
            case _:
                request_id = getattr(command, "request_id", None)
                future = self._pending.get(request_id) if isinstance(request_id, int) else None
                if future is not None and not future.done():
                    future.set_result(command)
                elif isinstance(command, Error):
                    log.warning(
                        "controller %s: %s: %s", self.endpoint, command.code, command.message
                    )
