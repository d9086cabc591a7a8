"""A scripted broker on loopback that serves namespace watches from a set the test holds, for
tests of what the client's NamespaceWatcher does on the wire: which hash it sends, when it
watches again, what it makes of snapshots, diffs and ends. It speaks the protocol (Connect,
WatchNamespace, NamespaceWatchClose) and nothing else."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import aiohttp
from aiohttp import web
from aiohttp.test_utils import TestServer

from scalable_topics.protocol import (
    Command,
    Connect,
    Connected,
    Error,
    ErrorCode,
    NamespaceUpdate,
    NamespaceWatchClose,
    Success,
    TopicsDiff,
    TopicsSnapshot,
    WatchEnded,
    WatchNamespace,
    decode_frame,
    encode_frame,
    topic_set_hash,
)

WAIT = 30.0  # bounds a failing test only


class FakeBroker:
    def __init__(
        self, version: int = 2, name: str = "fake", topics: set[str] | None = None
    ) -> None:
        self.version = version
        self.name = name
        self.topics: set[str] = set(topics or ())
        self.part_size = 0  # > 0: snapshots are sent in parts of this many names
        self.refusal: WatchEnded | None = None  # the answer to every WatchNamespace, if set
        self.watches: asyncio.Queue[WatchNamespace] = asyncio.Queue()  # as they arrive
        self.closes: asyncio.Queue[NamespaceWatchClose] = asyncio.Queue()
        self.sent: list[NamespaceUpdate] = []
        self.open: dict[int, web.WebSocketResponse] = {}  # watch id: its socket
        self._sockets: set[web.WebSocketResponse] = set()
        self.server: TestServer | None = None

    @property
    def url(self) -> str:
        assert self.server is not None
        return f"ws://127.0.0.1:{self.server.port}"

    async def next_watch(self) -> WatchNamespace:
        async with asyncio.timeout(WAIT):
            return await self.watches.get()

    async def diff(self, added: tuple[str, ...] = (), removed: tuple[str, ...] = ()) -> None:
        """Change the set and push the diff to every open watch."""
        self.topics = (self.topics - set(removed)) | set(added)
        for watch_id, ws in list(self.open.items()):
            await self._send(ws, NamespaceUpdate(watch_id, diff=TopicsDiff(added, removed)))

    async def end(self, code: ErrorCode, message: str) -> None:
        """End every open watch."""
        for watch_id, ws in list(self.open.items()):
            del self.open[watch_id]
            await self._send(ws, NamespaceUpdate(watch_id, ended=WatchEnded(code, message)))

    async def drop(self) -> None:
        """Close every connection, as a broker that stopped would."""
        self.open.clear()
        for ws in list(self._sockets):
            await ws.close()

    async def _send(self, ws: web.WebSocketResponse, update: NamespaceUpdate) -> None:
        self.sent.append(update)
        await ws.send_bytes(encode_frame(update))

    async def _answer(self, ws: web.WebSocketResponse, command: Command) -> None:
        match command:
            case Connect():
                connected = Connected(command.request_id, self.version, self.name, 1 << 20, 1000)
                await ws.send_bytes(encode_frame(connected))
            case WatchNamespace():
                self.watches.put_nowait(command)
                if self.refusal is not None:
                    await self._send(ws, NamespaceUpdate(command.watch_id, ended=self.refusal))
                    return
                self.open[command.watch_id] = ws
                if command.current_hash != topic_set_hash(self.topics):
                    await self._snapshot(ws, command.watch_id)
            case NamespaceWatchClose():
                self.closes.put_nowait(command)
                if self.open.pop(command.watch_id, None) is None:
                    refusal = Error(command.request_id, ErrorCode.UNKNOWN_WATCH, "no such watch")
                    await ws.send_bytes(encode_frame(refusal))
                else:
                    await ws.send_bytes(encode_frame(Success(command.request_id)))

    async def _snapshot(self, ws: web.WebSocketResponse, watch_id: int) -> None:
        names = sorted(self.topics)
        size = self.part_size or max(len(names), 1)
        parts = [names[start : start + size] for start in range(0, len(names), size)] or [[]]
        for index, part in enumerate(parts):
            complete = index == len(parts) - 1
            snapshot = TopicsSnapshot(tuple(part), complete)
            await self._send(ws, NamespaceUpdate(watch_id, snapshot=snapshot))

    async def _websocket(self, request: web.Request) -> web.WebSocketResponse:
        ws = web.WebSocketResponse()
        await ws.prepare(request)
        self._sockets.add(ws)
        try:
            async for frame in ws:
                if frame.type is aiohttp.WSMsgType.BINARY:
                    await self._answer(ws, decode_frame(frame.data, 1 << 20))
        finally:
            self._sockets.discard(ws)
            for watch_id in [i for i, held in self.open.items() if held is ws]:
                del self.open[watch_id]
        return ws


@asynccontextmanager
async def fake_broker(
    version: int = 2, name: str = "fake", topics: set[str] | None = None
) -> AsyncIterator[FakeBroker]:
    broker = FakeBroker(version, name, topics)
    app = web.Application()
    app.router.add_get("/ws", broker._websocket)
    broker.server = TestServer(app)
    await broker.server.start_server()
    try:
        yield broker
    finally:
        await broker.server.close()
