"""How a broker ends connections (docs/protocol.md, section 4): the close code on the wire for
each reason, and the timeouts that bound slow or silent peers, on a broker application on
loopback. The timeouts are short here; each test waits for the close, never for a time."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from scalable_topics.protocol import (
    PROTOCOL_VERSION,
    Command,
    Connect,
    Connected,
    Error,
    ErrorCode,
    Ping,
    WatchNamespace,
    decode_frame,
    encode_frame,
)
from scalable_topics.store import EmbeddedStore
from scalable_topics.ws_watchdog import Watchdog
from support.raw_websocket import (
    OPCODE_CLOSE,
    OPCODE_PING,
    OPCODE_PONG,
    client_frame,
    open_upgraded,
    read_frame,
)
from support.servers import broker_server

TOKEN = "s3cret"
MAX_FRAME = 4096
SLACK = 1024 * 1024  # what aiohttp still reads past the protocol's limit (broker/app.py)
WAIT = 20.0  # bounds a failing test only
SHORT = 0.3  # the timeouts under test


@pytest.fixture
async def server(tmp_path: Path, store: EmbeddedStore) -> AsyncIterator[TestServer]:
    served = broker_server(
        store,
        tmp_path / "broker",
        auth_token=TOKEN,
        max_frame_bytes=MAX_FRAME,
        handshake_timeout=SHORT,
        auth_timeout=SHORT,
        body_timeout=SHORT,
    )
    await served.start_server()
    try:
        yield served
    finally:
        await served.close()


def url_of(server: TestServer) -> str:
    return f"http://127.0.0.1:{server.port}"


async def connect(ws: aiohttp.ClientWebSocketResponse, token: str | None = TOKEN) -> Command:
    await ws.send_bytes(encode_frame(Connect(1, (PROTOCOL_VERSION,), "tests", token)))
    reply = await ws.receive(timeout=WAIT)
    return decode_frame(reply.data, 1 << 30)


async def until_closed(ws: aiohttp.ClientWebSocketResponse) -> tuple[list[ErrorCode], int, str]:
    """The codes of the Error frames the broker sent, then its close code and reason."""
    errors: list[ErrorCode] = []
    while True:
        message = await ws.receive(timeout=WAIT)
        if message.type is aiohttp.WSMsgType.CLOSE:
            return errors, message.data, message.extra
        assert message.type is aiohttp.WSMsgType.BINARY, message
        command = decode_frame(message.data, 1 << 30)
        assert isinstance(command, Error), command
        errors.append(command.code)


# What a client sends (after Connect when ``connected``), the Errors it hears, the close code.
CASES: dict[str, tuple[bool, list[bytes | str], list[ErrorCode], int]] = {
    "a text message": (True, ["hello"], [ErrorCode.MALFORMED_FRAME], 1003),
    "not msgpack": (True, [b"\xc1"], [ErrorCode.MALFORMED_FRAME], 1002),
    "an unknown command": (True, [b"\x91\x63"], [ErrorCode.UNKNOWN_COMMAND], 1002),
    "a command before Connect": (False, [encode_frame(Ping())], [ErrorCode.NOT_CONNECTED], 1002),
    "a second Connect": (
        True,
        [encode_frame(Connect(2, (PROTOCOL_VERSION,), "again", TOKEN))],
        [ErrorCode.UNEXPECTED_COMMAND],
        1002,
    ),
    "no common version": (
        False,
        [encode_frame(Connect(1, (99,), "future", TOKEN))],
        [ErrorCode.UNSUPPORTED_VERSION],
        1002,
    ),
    "a frame above max_frame_bytes": (
        True,
        [b"\x00" * (MAX_FRAME + 1)],
        [ErrorCode.FRAME_TOO_LARGE],
        1009,
    ),
    # aiohttp refuses it before the session sees it: no Error frame, the same close code.
    "a frame above aiohttp's limit": (True, [b"\x00" * (MAX_FRAME + SLACK + 1)], [], 1009),
    "a wrong token": (
        False,
        [encode_frame(Connect(1, (PROTOCOL_VERSION,), "t", "wrong"))],
        [ErrorCode.AUTHENTICATION_FAILED],
        1008,
    ),
    "no token": (
        False,
        [encode_frame(Connect(1, (PROTOCOL_VERSION,), "t", None))],
        [ErrorCode.AUTHENTICATION_FAILED],
        1008,
    ),
}


@pytest.mark.parametrize("case", list(CASES))
async def test_the_broker_closes_with_the_code_of_the_reason(server: TestServer, case: str) -> None:
    connected, frames, expected_errors, expected_code = CASES[case]
    async with (
        aiohttp.ClientSession() as http,
        http.ws_connect(url_of(server) + "/ws", max_msg_size=0) as ws,
    ):
        if connected:
            assert isinstance(await connect(ws), Connected)
        for frame in frames:
            if isinstance(frame, str):
                await ws.send_str(frame)
            else:
                await ws.send_bytes(frame)
        errors, code, reason = await until_closed(ws)
    assert (errors, code) == (expected_errors, expected_code)
    if expected_errors:
        assert reason == expected_errors[0].value or code == 1003


async def test_a_command_newer_than_the_negotiated_version_closes_the_connection(
    server: TestServer,
) -> None:
    """A client that agreed on version 1 and sends a version 2 command is refused as a peer
    that speaks version 1 would refuse it: UnknownCommand, close 1002."""
    async with (
        aiohttp.ClientSession() as http,
        http.ws_connect(url_of(server) + "/ws", max_msg_size=0) as ws,
    ):
        await ws.send_bytes(encode_frame(Connect(1, (1,), "old", TOKEN)))
        connected = decode_frame((await ws.receive(timeout=WAIT)).data, 1 << 30)
        assert isinstance(connected, Connected) and connected.protocol_version == 1
        await ws.send_bytes(encode_frame(WatchNamespace(1, "default", {})))
        errors, code, _ = await until_closed(ws)
    assert (errors, code) == ([ErrorCode.UNKNOWN_COMMAND], 1002)


async def test_a_client_that_closes_hears_1000(server: TestServer) -> None:
    async with aiohttp.ClientSession() as http:
        ws = await http.ws_connect(url_of(server) + "/ws")
        assert isinstance(await connect(ws), Connected)
        await ws.close()
        assert ws.close_code == 1000


async def test_a_broker_shutting_down_closes_with_1001(
    tmp_path: Path, store: EmbeddedStore
) -> None:
    served = broker_server(store, tmp_path / "broker")
    await served.start_server()
    async with aiohttp.ClientSession() as http:
        ws = await http.ws_connect(url_of(served) + "/ws")
        assert isinstance(await connect(ws, None), Connected)
        stopping = asyncio.create_task(served.close())
        message = await ws.receive(timeout=WAIT)
        await stopping
    assert (message.type, message.data, message.extra) == (
        aiohttp.WSMsgType.CLOSE,
        1001,
        "broker shutting down",
    )


async def test_a_half_sent_request_head_is_cut_off(server: TestServer) -> None:
    """A slow-loris: half a header, then nothing; the broker closes without answering, and a
    prompt request on another connection is served meanwhile."""
    reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
    try:
        writer.write(b"GET /ws HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: webso")
        await writer.drain()
        async with aiohttp.ClientSession() as http, http.get(url_of(server) + "/healthz") as ok:
            assert ok.status == 200
        async with asyncio.timeout(WAIT):
            assert await reader.read() == b""  # closed, nothing said
    finally:
        writer.close()


async def test_a_websocket_without_connect_is_closed_with_1008(server: TestServer) -> None:
    reader, writer = await open_upgraded(server.port)
    try:
        async with asyncio.timeout(WAIT):
            frame = await read_frame(reader)
        assert frame.opcode == OPCODE_CLOSE
        assert (frame.close_code, frame.close_reason) == (1008, f"no Connect within {SHORT:g} s")
    finally:
        writer.close()


@pytest.mark.parametrize(
    "path",
    ["/admin/v1/topics/default/orders", "/admin/v1/segments/default/orders/0000-ffff-0"],
    ids=["topic admin", "segment admin"],
)
async def test_a_request_body_sent_too_slowly_gets_408_and_the_connection_closes(
    server: TestServer, path: str
) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
    try:
        writer.write(
            f"PUT {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {TOKEN}\r\n"
            'Content-Type: application/json\r\nContent-Length: 40\r\n\r\n{"init'.encode()
        )
        await writer.drain()
        async with asyncio.timeout(WAIT):
            answer = await reader.read()  # to the end: the broker closes the connection
    finally:
        writer.close()
    assert answer.startswith(b"HTTP/1.1 408 "), answer
    assert b'"code": "RequestTimeout"' in answer


async def test_a_request_body_in_time_is_served(server: TestServer) -> None:
    async with (
        aiohttp.ClientSession(headers={"Authorization": f"Bearer {TOKEN}"}) as http,
        http.put(
            url_of(server) + "/admin/v1/segments/default/orders/0000-ffff-0",
            json={"subscriptions": ["sub"]},
        ) as response,
    ):
        assert response.status == 201


async def watched(request: web.Request) -> web.WebSocketResponse:
    """A server of the watchdog alone: connected at once, pinging every SHORT seconds."""
    ws = web.WebSocketResponse(autoping=False)
    await ws.prepare(request)
    watchdog = Watchdog(ws, connect_seconds=0, ping_seconds=SHORT)
    watchdog.connected()
    watchdog.start()
    try:
        async for _frame in ws:
            watchdog.heard()
    finally:
        await watchdog.stop()
    return ws


async def test_pongs_keep_a_connection_and_silence_closes_it() -> None:
    app = web.Application()
    app.router.add_get("/ws", watched)
    async with TestServer(app) as served:
        port = served.port
        assert port is not None
        reader, writer = await open_upgraded(port)
        try:
            async with asyncio.timeout(WAIT):
                for _ in range(3):
                    ping = await read_frame(reader)
                    assert ping.opcode == OPCODE_PING
                    writer.write(client_frame(OPCODE_PONG, ping.payload))
                    await writer.drain()
                closing = await read_frame(reader)  # the next ping goes unanswered
                while closing.opcode == OPCODE_PING:
                    closing = await read_frame(reader)
        finally:
            writer.close()
    assert (closing.opcode, closing.close_code) == (OPCODE_CLOSE, 1008)
    assert closing.close_reason == f"no answer to a ping within {SHORT / 2:g} s"
