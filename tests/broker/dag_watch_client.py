"""A protocol v1 client for DAG watch tests: answers matched by request id, pushes queued per
watch id."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
from collections import defaultdict

import aiohttp

from scalable_topics.protocol import (
    PROTOCOL_VERSION,
    Command,
    Connect,
    Connected,
    Error,
    ErrorCode,
    Ping,
    Pong,
    Success,
    TopicUpdate,
    WatchClose,
    WatchClosed,
    WatchTopic,
    decode_frame,
    encode_frame,
)

TIMEOUT = 20.0

Push = TopicUpdate | WatchClosed


class Refused(Exception):
    def __init__(self, error: Error) -> None:
        super().__init__(f"{error.code}: {error.message}")
        self.code: ErrorCode = error.code
        self.message = error.message


class DagWatchClient:
    def __init__(self) -> None:
        self._ids = itertools.count(1)
        self._pending: dict[int, asyncio.Future[Command]] = {}
        self.pushes: dict[int, asyncio.Queue[Push]] = defaultdict(asyncio.Queue)
        self._pongs: asyncio.Queue[Pong] = asyncio.Queue()
        self._sending: set[asyncio.Future[None]] = set()
        self._session: aiohttp.ClientSession | None = None
        self._ws: aiohttp.ClientWebSocketResponse | None = None
        self._reader: asyncio.Task[None] | None = None

    @classmethod
    async def connect(cls, url: str) -> DagWatchClient:
        client = cls()
        client._session = aiohttp.ClientSession()
        client._ws = await client._session.ws_connect(url + "/ws", max_msg_size=0)
        client._reader = asyncio.create_task(client._read())
        reply = await client.request(Connect(client.next_id(), (PROTOCOL_VERSION,), "watch-tests"))
        assert isinstance(reply, Connected)
        return client

    def next_id(self) -> int:
        return next(self._ids)

    async def close(self) -> None:
        if self._ws is not None:
            await self._ws.close()
        if self._reader is not None:
            self._reader.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._reader  # its end fails the requests still waiting
        if self._session is not None:
            await self._session.close()

    async def send_command(self, command: Command) -> None:
        assert self._ws is not None
        await self._ws.send_bytes(encode_frame(command))

    def start_request(self, command: WatchTopic | WatchClose | Connect) -> asyncio.Future[Command]:
        future: asyncio.Future[Command] = asyncio.get_running_loop().create_future()
        self._pending[command.request_id] = future
        sending = asyncio.ensure_future(self.send_command(command))
        self._sending.add(sending)
        sending.add_done_callback(self._sending.discard)
        return future

    async def request(self, command: WatchTopic | WatchClose | Connect) -> Command:
        async with asyncio.timeout(TIMEOUT):
            reply = await self.start_request(command)
        if isinstance(reply, Error):
            raise Refused(reply)
        return reply

    async def watch(self, watch_id: int, topic: str) -> TopicUpdate:
        """Open a watch; its answer, the first TopicUpdate."""
        request_id = self.next_id()
        reply = await self.request(WatchTopic(request_id, watch_id, topic))
        assert isinstance(reply, TopicUpdate)
        assert (reply.watch_id, reply.request_id) == (watch_id, request_id)
        return reply

    def start_request_watch(self, watch_id: int, topic: str) -> asyncio.Future[Command]:
        """Send WatchTopic without waiting: the future resolves to its answer."""
        return self.start_request(WatchTopic(self.next_id(), watch_id, topic))

    async def close_watch(self, watch_id: int) -> None:
        reply = await self.request(WatchClose(self.next_id(), watch_id))
        assert isinstance(reply, Success)

    async def next_push(self, watch_id: int) -> Push:
        async with asyncio.timeout(TIMEOUT):
            return await self.pushes[watch_id].get()

    async def round_trip(self) -> None:
        """Ping and wait for the Pong: every frame the broker sent before it has arrived."""
        await self.send_command(Ping())
        async with asyncio.timeout(TIMEOUT):
            await self._pongs.get()

    async def _read(self) -> None:
        assert self._ws is not None
        try:
            async for frame in self._ws:
                if frame.type is not aiohttp.WSMsgType.BINARY:
                    continue
                command = decode_frame(frame.data, 1 << 30)
                match command:
                    case TopicUpdate(request_id=None) | WatchClosed():
                        self.pushes[command.watch_id].put_nowait(command)
                    case Pong():
                        self._pongs.put_nowait(command)
                    case _:
                        request_id = getattr(command, "request_id", None)
                        future = self._pending.pop(request_id, None)
                        if future is not None and not future.done():
                            future.set_result(command)
        finally:
            for future in self._pending.values():
                if not future.done():
                    future.set_exception(ConnectionError("the connection closed"))
