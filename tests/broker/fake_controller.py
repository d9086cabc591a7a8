"""A controller endpoint whose every answer the test writes: it records what brokers relay
to it and sends what the test tells it to, over a real WebSocket on loopback."""

from __future__ import annotations

import asyncio
from typing import Any

from aiohttp import WSMsgType, web
from aiohttp.test_utils import TestServer

from scalable_topics.protocol import (
    Command,
    Connect,
    Connected,
    Ping,
    Pong,
    decode_frame,
    encode_frame,
)

TIMEOUT = 20.0


class FakeController:
    def __init__(self) -> None:
        self.commands: asyncio.Queue[Command] = asyncio.Queue()
        self.disconnections: asyncio.Queue[None] = asyncio.Queue()
        self.connections = 0  # how many broker links it accepted
        self._ws: web.WebSocketResponse | None = None
        app = web.Application()
        app.router.add_get("/ws", self._serve)
        self._server = TestServer(app, host="127.0.0.1")

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.port}"

    async def start(self) -> None:
        await self._server.start_server()

    async def close(self) -> None:
        await self._server.close()

    async def next_command(self) -> Any:
        async with asyncio.timeout(TIMEOUT):
            return await self.commands.get()

    async def wait_disconnected(self) -> None:
        async with asyncio.timeout(TIMEOUT):
            await self.disconnections.get()

    async def send(self, command: Command) -> None:
        assert self._ws is not None, "no broker is connected"
        await self._ws.send_bytes(encode_frame(command))

    async def drop(self) -> None:
        """The connection breaks, as when the controller process dies."""
        assert self._ws is not None
        await self._ws.close()

    async def _serve(self, request: web.Request) -> web.WebSocketResponse:
        ws = web.WebSocketResponse()
        await ws.prepare(request)
        self._ws = ws
        self.connections += 1
        try:
            async for frame in ws:
                if frame.type is not WSMsgType.BINARY:
                    continue
                command = decode_frame(frame.data)
                if isinstance(command, Connect):
                    await ws.send_bytes(
                        encode_frame(Connected(command.request_id, 1, "fake", 1 << 20, 1 << 19))
                    )
                elif isinstance(command, Ping):
                    await ws.send_bytes(encode_frame(Pong()))
                else:
                    self.commands.put_nowait(command)
        finally:
            self.disconnections.put_nowait(None)
        return ws
