"""Addresses that never answer, for connect timeouts: deterministic on loopback.

``unaccepted_port``: a listening socket whose accept queue is full (backlog 0, filled by
connections nobody accepts); the kernel drops further SYNs, so a connect hangs as it does to a
blackholed host. ``silent_server``: a server that accepts TCP and never answers a byte, so a
client hangs in the TLS or WebSocket upgrade.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import AsyncIterator, Iterator

_FILLERS = 4  # more than a backlog of 0 queues, so the queue stays full


@contextlib.contextmanager
def unaccepted_port() -> Iterator[int]:
    listener = socket.socket()
    fillers: list[socket.socket] = []
    try:
        listener.bind(("127.0.0.1", 0))
        listener.listen(0)
        port = int(listener.getsockname()[1])
        for _ in range(_FILLERS):
            filler = socket.socket()
            filler.setblocking(False)
            with contextlib.suppress(BlockingIOError):
                filler.connect(("127.0.0.1", port))
            fillers.append(filler)
        yield port
    finally:
        for filler in fillers:
            filler.close()
        listener.close()


@contextlib.asynccontextmanager
async def silent_server() -> AsyncIterator[int]:
    held: list[asyncio.StreamWriter] = []

    async def hold(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        held.append(writer)  # read nothing, answer nothing

    server = await asyncio.start_server(hold, "127.0.0.1", 0)
    try:
        yield int(server.sockets[0].getsockname()[1])
    finally:
        for writer in held:
            writer.close()
        server.close()
        await server.wait_closed()
