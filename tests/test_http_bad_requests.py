"""A request aiohttp cannot parse is one DEBUG line; a handler that crashes is still an ERROR
with its traceback."""

from __future__ import annotations

import asyncio
import logging

import aiohttp
import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from scalable_topics.http_bad_requests import SERVER_LOGGER, quiet_malformed_requests


async def crash(request: web.Request) -> web.Response:
    raise RuntimeError("a bug in a handler")


async def raw_request(port: int, request: bytes) -> bytes:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(request)
        await writer.drain()
        return await reader.readline()
    finally:
        writer.close()
        await writer.wait_closed()


async def test_malformed_requests_are_quiet_and_handler_errors_are_not(
    caplog: pytest.LogCaptureFixture,
) -> None:
    quiet_malformed_requests()
    installed = list(logging.getLogger(SERVER_LOGGER).filters)
    quiet_malformed_requests()  # once is enough, twice changes nothing
    assert logging.getLogger(SERVER_LOGGER).filters == installed
    app = web.Application()
    app.router.add_get("/crash", crash)
    server = TestServer(app, host="127.0.0.1")
    await server.start_server()
    caplog.set_level(logging.DEBUG)
    try:
        assert (await raw_request(server.port, b"GET / HTTP/1.1 x\r\n\r\n")).startswith(
            b"HTTP/1.0 400 "
        )
        quiet = [r for r in caplog.records if r.name == "scalable_topics.http_bad_requests"]
        assert [(r.levelno, r.exc_info) for r in quiet] == [(logging.DEBUG, None)]
        assert (
            quiet[0]
            .getMessage()
            .startswith("refused a malformed request from 127.0.0.1: BadStatusLine: ")
        )
        assert not [r for r in caplog.records if r.levelno >= logging.WARNING]

        async with aiohttp.ClientSession() as http, http.get(f"{server.make_url('/crash')}") as got:
            assert got.status == 500
        [crashed] = [r for r in caplog.records if r.levelno >= logging.ERROR]
        assert crashed.name == SERVER_LOGGER and crashed.exc_info is not None
        assert isinstance(crashed.exc_info[1], RuntimeError)
    finally:
        await server.close()
