"""The watchdog of one server-side WebSocket: it closes the connection when the peer does not
send Connect in time after the upgrade, and when the peer falls silent.

Once connected, a connection on which nothing arrived for ``ping_seconds`` is sent a WebSocket
ping; if nothing arrives within half that again (a pong, a frame), it is closed. Every client
library answers pings by itself, so this asks nothing of a client beyond RFC 6455.

aiohttp's own ``heartbeat`` is not used: in aiohttp 3.14 the peer's answer to a close the server
started (its close frame) arms the heartbeat timer again, and that timer keeps the whole closed
connection in memory (about 10 KiB) for a heartbeat and a half. Each connection a server closed
(a malformed frame, a wrong token, a connection that never sent Connect) then cost memory for
that long, which a client opening and failing connections in a loop turns into a leak. This
task is owned by its session, which stops it when the connection ends.
"""

from __future__ import annotations

import asyncio
import logging

from aiohttp import web

from .protocol import CloseCode
from .tasks import cancel_and_wait

log = logging.getLogger(__name__)

PING_SECONDS = 30.0  # what aiohttp's heartbeat was set to before


class Watchdog:
    def __init__(
        self,
        ws: web.WebSocketResponse,
        connect_seconds: float,
        ping_seconds: float = PING_SECONDS,
    ) -> None:
        self._ws = ws
        self._connect_seconds = connect_seconds
        self._ping_seconds = ping_seconds
        self._connected = False
        self._heard = False
        self._held = False  # the server is not reading: the peer's silence is not its own
        self._closing = False
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._watch(), name="ws watchdog")

    def heard(self) -> None:
        """Something arrived from the peer: a frame, a ping or a pong."""
        self._heard = True

    def hold(self, held: bool) -> None:
        """The server stopped reading the connection (backpressure), or reads again: a pong
        cannot be heard meanwhile, so silence does not count until it reads again."""
        self._held = held
        self._heard = True

    def connected(self) -> None:
        """The peer's Connect was accepted."""
        self._connected = True

    async def stop(self) -> None:
        """Stop watching; if the watchdog is closing the connection, let it finish that."""
        task, self._task = self._task, None
        if task is None:
            return
        # Not kept: the ended task holds its CancelledError, whose traceback holds the frame
        # of _watch and so this watchdog, a reference cycle that only the collector would free
        # (the broker runs it rarely), taking the connection with it.
        if self._closing:
            await asyncio.wait({task})
        else:
            await cancel_and_wait(task)

    async def _watch(self) -> None:
        await asyncio.sleep(self._connect_seconds)
        if not self._connected:
            await self._close(
                CloseCode.POLICY_VIOLATION, f"no Connect within {self._connect_seconds:g} s"
            )
            return
        while True:
            self._heard = False
            await asyncio.sleep(self._ping_seconds)
            if self._heard or self._held:
                continue
            try:
                await self._ws.ping()
            except ConnectionError:
                return  # the connection is going: its reader sees that too
            await asyncio.sleep(self._ping_seconds / 2)
            if not (self._heard or self._held):
                await self._close(
                    CloseCode.POLICY_VIOLATION,
                    f"no answer to a ping within {self._ping_seconds / 2:g} s",
                )
                return

    async def _close(self, code: CloseCode, reason: str) -> None:
        self._closing = True
        log.debug("closing a connection: %s", reason)
        # The session's reader, waiting in receive(), is woken by this and ends the session.
        await self._ws.close(code=code, message=reason.encode())
