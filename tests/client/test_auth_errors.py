"""A token the brokers refuse reaches the application at once as a typed error
(AuthenticationFailed, NotAuthorized), never retried until an operation timeout.

The assertions are on the exception's type: had the client retried, the operation would have
ended in Timeout after the client's operation timeout instead."""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import aiohttp
import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from scalable_topics.client import (
    AuthenticationFailed,
    Client,
    ConnectionFailed,
    NotAuthorized,
    Unauthorized,
)
from scalable_topics.client.admin import Admin
from scalable_topics.client.connection import BrokerConnection
from scalable_topics.protocol import (
    Connect,
    Connected,
    Error,
    ErrorCode,
    WatchTopic,
    decode_frame,
    encode_frame,
)
from scalable_topics.store import EmbeddedStore
from support.servers import broker_server

TOKEN = "s3cret"
EXIT_TIMEOUT = 60.0  # bounds a failing test only


@pytest.fixture
async def broker_url(tmp_path: Path, store: EmbeddedStore) -> AsyncIterator[str]:
    served = broker_server(store, tmp_path / "broker", auth_token=TOKEN)
    await served.start_server()
    try:
        yield f"ws://127.0.0.1:{served.port}"
    finally:
        await served.close()


@pytest.mark.parametrize("token", ["wrong", None], ids=["wrong token", "no token"])
async def test_a_refused_token_fails_creating_a_producer_with_authentication_failed(
    broker_url: str, token: str | None
) -> None:
    async with Client(broker_url, auth_token=token) as client:
        with pytest.raises(AuthenticationFailed) as refused:
            await client.create_producer("orders")
    assert refused.value.code is ErrorCode.AUTHENTICATION_FAILED
    assert isinstance(refused.value, Unauthorized)  # what callers caught before


async def test_a_refused_token_fails_admin_calls_with_authentication_failed(
    broker_url: str,
) -> None:
    async with Admin(broker_url, "wrong") as admin:
        with pytest.raises(AuthenticationFailed):
            await admin.list_topics()


FrameHandler = Callable[[web.WebSocketResponse, object], Awaitable[None]]


async def fake_broker(answer: FrameHandler) -> TestServer:
    """A broker of one behaviour: ``answer`` gets every frame the client sends."""

    async def websocket(request: web.Request) -> web.WebSocketResponse:
        ws = web.WebSocketResponse()
        await ws.prepare(request)
        async for frame in ws:
            if frame.type is aiohttp.WSMsgType.BINARY:
                await answer(ws, decode_frame(frame.data, 1 << 20))
        return ws

    app = web.Application()
    app.router.add_get("/ws", websocket)
    server = TestServer(app)
    await server.start_server()
    return server


async def refuse_watches(ws: web.WebSocketResponse, command: object) -> None:
    if isinstance(command, Connect):
        await ws.send_bytes(encode_frame(Connected(command.request_id, 1, "fake", 1 << 20, 1000)))
    elif isinstance(command, WatchTopic):
        error = Error(command.request_id, ErrorCode.NOT_AUTHORIZED, "not for you")
        await ws.send_bytes(encode_frame(error))


async def close_on_connect(ws: web.WebSocketResponse, command: object) -> None:
    """Close with 1008 and no Error frame, as a proxy enforcing a policy might."""
    if isinstance(command, Connect):
        await ws.close(code=1008, message=b"policy")


async def connect_then_close(ws: web.WebSocketResponse, command: object) -> None:
    if isinstance(command, Connect):
        await ws.send_bytes(encode_frame(Connected(command.request_id, 1, "fake", 1 << 20, 1000)))
    else:
        await ws.close(code=1008, message=b"policy")


async def test_not_authorized_for_a_request_fails_it_with_not_authorized() -> None:
    server = await fake_broker(refuse_watches)
    try:
        async with Client(f"ws://127.0.0.1:{server.port}") as client:
            with pytest.raises(NotAuthorized) as refused:
                await client.create_producer("orders")
        assert refused.value.code is ErrorCode.NOT_AUTHORIZED
    finally:
        await server.close()


async def test_a_1008_close_during_the_handshake_is_authentication_failed() -> None:
    server = await fake_broker(close_on_connect)
    try:
        async with Client(f"ws://127.0.0.1:{server.port}") as client:
            with pytest.raises(AuthenticationFailed, match=r"closed the connection with 1008"):
                await client.create_producer("orders")
    finally:
        await server.close()


async def test_a_1008_close_after_the_handshake_is_a_lost_connection() -> None:
    server = await fake_broker(connect_then_close)
    try:
        async with aiohttp.ClientSession() as http:
            connection = await BrokerConnection.open(
                f"ws://127.0.0.1:{server.port}",
                http,
                client_name="tests",
                auth_token=None,
                wait_seconds=20,
            )
            try:
                with pytest.raises(ConnectionFailed, match=r"with 1008 \(policy\)"):
                    await connection.request(WatchTopic(0, 1, "default/orders"), wait_seconds=20)
            finally:
                await connection.close()
    finally:
        await server.close()


async def test_stctl_produce_with_a_wrong_token_exits_1_naming_the_failure(
    broker_url: str,
) -> None:
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "scalable_topics.cli",
        "produce",
        "orders",
        "-m",
        "hello",
        "--url",
        broker_url,
        "--auth-token",
        "wrong",
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    try:
        async with asyncio.timeout(EXIT_TIMEOUT):
            stdout, stderr = await process.communicate()
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
    assert process.returncode == 1
    assert stdout == b""
    lines = stderr.decode().splitlines()
    assert len(lines) == 1, lines
    assert lines[0].startswith("stctl produce: AuthenticationFailed: "), lines
