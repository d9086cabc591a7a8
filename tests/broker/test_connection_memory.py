"""Closed connections leave nothing behind in a broker: 2,000 connections opened and closed,
by the client or by the broker (before authentication too), and the broker's per-connection
state is back where it started.

What used to stay: aiohttp's WebSocket heartbeat timer, armed again by the client's answer to
a close the broker started, held each such connection (its WebSocketResponse, request
handler, parser and buffers: about 10 KiB) for 45 s after it closed. The broker now pings
from a watchdog its session owns (ws_watchdog.py). And the watchdog once kept its cancelled
task, whose exception's traceback held the watchdog: a reference cycle through the whole
connection, freed only by the garbage collector, which ``stctl broker`` runs rarely
(broker/app.py). So the connections run with the collector off, and what is counted is what
reference counting alone freed. The test counts live objects, which is exact; the bytes
tracemalloc sees in aiohttp and the broker's code only back it up, with a bound far below
what one retained connection costs.
"""

from __future__ import annotations

import asyncio
import gc
import tracemalloc
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import aiohttp
import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer
from aiohttp.web_protocol import RequestHandler

from scalable_topics.broker.app import SESSIONS_KEY
from scalable_topics.broker.session import Session
from scalable_topics.protocol import (
    PROTOCOL_VERSION,
    Connect,
    Connected,
    decode_frame,
    encode_frame,
)
from scalable_topics.store import EmbeddedStore
from scalable_topics.ws_watchdog import Watchdog
from support.eventually import eventually
from support.servers import broker_server

TOKEN = "s3cret"
CYCLES = 2000
TIMED_OUT = 100  # connections that never send Connect, left for the broker to close
CONNECT_TIMEOUT = 0.2
WAIT = 20.0  # bounds a failing test only
# Bytes a closed connection may leave in aiohttp's and the broker's code, on average: noise
# (interned strings, caches filling up); one retained connection costs about 10 KiB.
BYTES_PER_CONNECTION = 1024

Cycle = Callable[[aiohttp.ClientWebSocketResponse], Awaitable[None]]


async def answered(ws: aiohttp.ClientWebSocketResponse) -> aiohttp.WSMessage:
    return await ws.receive(timeout=WAIT)


async def connect_and_leave(ws: aiohttp.ClientWebSocketResponse) -> None:
    await ws.send_bytes(encode_frame(Connect(1, (PROTOCOL_VERSION,), "tests", TOKEN)))
    assert isinstance(decode_frame((await answered(ws)).data, 1 << 20), Connected)


async def leave_at_once(ws: aiohttp.ClientWebSocketResponse) -> None:
    pass  # closed by the client before authenticating


async def until_the_broker_closes(ws: aiohttp.ClientWebSocketResponse) -> None:
    while (message := await answered(ws)).type is not aiohttp.WSMsgType.CLOSE:
        assert message.type is aiohttp.WSMsgType.BINARY  # the Error frame first


async def send_garbage(ws: aiohttp.ClientWebSocketResponse) -> None:
    await ws.send_bytes(b"\xc1")
    await until_the_broker_closes(ws)


async def send_a_wrong_token(ws: aiohttp.ClientWebSocketResponse) -> None:
    await ws.send_bytes(encode_frame(Connect(1, (PROTOCOL_VERSION,), "tests", "wrong")))
    await until_the_broker_closes(ws)


async def send_text(ws: aiohttp.ClientWebSocketResponse) -> None:
    await ws.send_str("hello")
    await until_the_broker_closes(ws)


CYCLE_KINDS: list[Cycle] = [
    connect_and_leave,
    leave_at_once,
    send_garbage,
    send_a_wrong_token,
    send_text,
]


@pytest.fixture
async def server(tmp_path: Path, store: EmbeddedStore) -> AsyncIterator[TestServer]:
    served = broker_server(
        store, tmp_path / "broker", auth_token=TOKEN, auth_timeout=CONNECT_TIMEOUT
    )
    await served.start_server()
    try:
        yield served
    finally:
        await served.close()


async def run_cycles(url: str, count: int) -> None:
    async with aiohttp.ClientSession() as http:
        for index in range(count):
            async with http.ws_connect(url) as ws:
                await CYCLE_KINDS[index % len(CYCLE_KINDS)](ws)


async def time_out(url: str, count: int) -> None:
    """``count`` connections at once that never send Connect: the broker's watchdog closes them."""
    async with aiohttp.ClientSession() as http:

        async def silent() -> None:
            async with http.ws_connect(url) as ws:
                message = await answered(ws)
                assert (message.type, message.data) == (aiohttp.WSMsgType.CLOSE, 1008)

        await asyncio.gather(*(silent() for _ in range(count)))


def census(app: web.Application, server: TestServer) -> dict[str, int]:
    """The broker's per-connection state: what it registers, and what is alive of it (or
    garbage in a reference cycle, not collected yet)."""
    live = Counter(type(thing) for thing in gc.get_objects())
    assert server.runner is not None and server.runner.server is not None
    return {
        "registered sessions": len(app[SESSIONS_KEY]),
        "aiohttp's connections": len(server.runner.server.connections),
        "Session": live[Session],
        "Watchdog": live[Watchdog],
        "WebSocketResponse": live[web.WebSocketResponse],
        "RequestHandler": live[RequestHandler],
        "watchdog tasks": sum(1 for t in asyncio.all_tasks() if t.get_name() == "ws watchdog"),
    }


def traced_bytes(snapshot: tracemalloc.Snapshot) -> int:
    relevant = snapshot.filter_traces(
        [
            tracemalloc.Filter(True, "*/aiohttp/*"),
            tracemalloc.Filter(True, "*/scalable_topics/broker/*"),
            tracemalloc.Filter(True, "*/scalable_topics/ws_watchdog.py"),
            tracemalloc.Filter(True, "*/scalable_topics/protocol/*"),
        ]
    )
    return sum(stat.size for stat in relevant.statistics("filename"))


async def test_closed_connections_leave_nothing_behind(server: TestServer) -> None:
    app = server.app
    assert app is not None
    url = f"ws://127.0.0.1:{server.port}/ws"

    def idle() -> bool:
        return not app[SESSIONS_KEY] and not (server.runner and server.runner.server.connections)

    await run_cycles(url, 2 * len(CYCLE_KINDS))  # whatever is created once, on first use
    await time_out(url, 2)
    await eventually(idle, "the warm-up connections to end")
    gc.collect()
    before = census(app, server)
    tracemalloc.start()
    gc.disable()
    try:
        traced_before = traced_bytes(tracemalloc.take_snapshot())
        await run_cycles(url, CYCLES)
        await time_out(url, TIMED_OUT)
        await eventually(idle, "the broker to end every connection")
        after = census(app, server)
        gc.enable()
        gc.collect()  # asyncio's own transports are cycles: not counted, nor their bytes
        traced_after = traced_bytes(tracemalloc.take_snapshot())
    finally:
        gc.enable()
        tracemalloc.stop()
    assert after == before
    assert before["registered sessions"] == before["Session"] == 0
    growth = (traced_after - traced_before) / (CYCLES + TIMED_OUT)
    assert growth < BYTES_PER_CONNECTION, f"{growth:.0f} bytes left per closed connection"
