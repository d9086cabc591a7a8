"""One connection per broker URL, shared by everything a client opens on that broker.

Callers asking for the same URL at the same time share one connection attempt. A connection
that drops leaves the pool at once, so the next caller opens a fresh one; reconnect pacing is
the caller's (each producer, consumer and watch backs off on its own).
"""

from __future__ import annotations

import asyncio
import functools

import aiohttp

from .connection import BrokerConnection
from .errors import ClientClosed


class ConnectionPool:
    def __init__(
        self,
        session: aiohttp.ClientSession,
        *,
        client_name: str,
        auth_token: str | None,
        connect_seconds: float,
    ) -> None:
        self._session = session
        self._client_name = client_name
        self._auth_token = auth_token
        self._connect_seconds = connect_seconds
        self._opening: dict[str, asyncio.Task[BrokerConnection]] = {}
        self._open: dict[str, BrokerConnection] = {}
        self._closed = False

    async def get(self, url: str) -> BrokerConnection:
        """The open connection to ``url``, opening it if needed."""
        if self._closed:
            raise ClientClosed("the client is closed")
        connection = self._open.get(url)
        if connection is not None and connection.is_open:
            return connection
        opening = self._opening.get(url)
        if opening is None:
            opening = asyncio.get_running_loop().create_task(self._connect(url))
            self._opening[url] = opening
            opening.add_done_callback(functools.partial(self._opened, url))
        return await asyncio.shield(opening)

    def _opened(self, url: str, opening: asyncio.Task[BrokerConnection]) -> None:
        if self._opening.get(url) is opening:
            del self._opening[url]
        # Every caller still waiting hears the failure through its shield; one that stopped
        # waiting (cancelled, say, while a broker was down) does not, and then nobody would:
        # mark it heard here, or asyncio reports "Task exception was never retrieved".
        if not opening.cancelled():
            opening.exception()

    async def _connect(self, url: str) -> BrokerConnection:
        connection = await BrokerConnection.open(
            url,
            self._session,
            client_name=self._client_name,
            auth_token=self._auth_token,
            wait_seconds=self._connect_seconds,
        )
        if self._closed:
            await connection.close()
            raise ClientClosed("the client is closed")
        self._open[url] = connection
        connection.on_close(self._forget)
        return connection

    def _forget(self, connection: BrokerConnection) -> None:
        if self._open.get(connection.url) is connection:
            del self._open[connection.url]

    async def close(self) -> None:
        self._closed = True
        # What an opening failed with is its caller's to hear; closing only waits for it.
        openings = list(self._opening.values())
        for opening in openings:
            opening.cancel()
        if openings:
            await asyncio.wait(openings)
        for connection in list(self._open.values()):
            await connection.close()
        self._open.clear()
