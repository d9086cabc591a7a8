"""A deadline on request bodies: the admin APIs' JSON must arrive whole within a bound.

aiohttp bounds the request head (see ``runner_options`` in app.py) but not the body: a client
sending a body a byte at a time would hold the connection and its handler for as long as it
likes. This middleware reads the body first, within ``seconds``; the handler then reads it
from memory (aiohttp keeps what ``request.read()`` returned). A body late is answered 408
``RequestTimeout`` and the connection closed, since the rest of the body may still come. A
body past the application's ``client_max_size`` (admin_body.BODY_MAX_BYTES) is answered 413
``InvalidRequest`` in the same JSON, and the connection closed, unread.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from aiohttp import web
from aiohttp.typedefs import Middleware

REQUEST_TIMEOUT = "RequestTimeout"  # the code of the 408 answer, in both admin APIs' format

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def body_timeout(seconds: float) -> Middleware:
    @web.middleware
    async def read_body_in_time(request: web.Request, handler: Handler) -> web.StreamResponse:
        if request.can_read_body:
            try:
                async with asyncio.timeout(seconds):
                    await request.read()
            except TimeoutError:
                return await _request_timeout(request, seconds)
            except web.HTTPRequestEntityTooLarge as error:  # past the app's client_max_size
                return _too_large(error)
        return await handler(request)

    return read_body_in_time


def _too_large(error: web.HTTPRequestEntityTooLarge) -> web.Response:
    """413 in both admin APIs' format; aiohttp's own answer is plain text."""
    response = web.json_response(
        {"code": "InvalidRequest", "message": f"invalid request body: {error.text}"}, status=413
    )
    response.force_close()  # the rest of the body is not read
    return response


async def _request_timeout(request: web.Request, seconds: float) -> web.StreamResponse:
    response = web.json_response(
        {
            "code": REQUEST_TIMEOUT,
            "message": f"the request body did not arrive whole within {seconds:g} s",
        },
        status=408,
    )
    response.force_close()
    await response.prepare(request)
    await response.write_eof()
    # Closed now rather than after aiohttp's lingering read of the rest of the body, which a
    # slow sender would stretch for as long as aiohttp lingers.
    request.protocol.force_close()
    return response
