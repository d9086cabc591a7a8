"""The connection pool: a connection attempt whose callers all stopped waiting leaves nothing
unretrieved behind (a broker down while the client shut a producer down once did)."""

from __future__ import annotations

import asyncio
import gc

import aiohttp
import pytest

from scalable_topics.client.errors import Timeout
from scalable_topics.client.pool import ConnectionPool
from support.eventually import eventually


async def test_an_attempt_nobody_waits_for_any_more_fails_quietly() -> None:
    accepted: list[asyncio.StreamWriter] = []

    async def hold(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        accepted.append(writer)  # accept the connection and never answer the upgrade

    server = await asyncio.start_server(hold, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    url = f"ws://127.0.0.1:{port}"
    try:
        async with aiohttp.ClientSession() as session:
            pool = ConnectionPool(session, client_name="test", auth_token=None, connect_seconds=0.3)
            waiter = asyncio.create_task(pool.get(url))
            await eventually(lambda: bool(accepted), "the attempt to reach the server")
            waiter.cancel()
            await asyncio.wait({waiter})
            await eventually(lambda: not pool._opening, "the abandoned attempt to end")
            gc.collect()  # where asyncio would report an exception nobody retrieved
            with pytest.raises(Timeout):  # a caller still waiting hears the failure
                await pool.get(url)
            await pool.close()
    finally:
        for writer in accepted:
            writer.close()
        server.close()
        await server.wait_closed()
