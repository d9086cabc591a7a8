"""A WebSocket upgrade that the client abandons: brokers and controllers serve WebSockets, and
a client may close its TCP connection before the ``101 Switching Protocols`` answer is written.
``WebSocketResponse.prepare`` then raises ConnectionResetError. aiohttp logs any exception a
handler raises as a server failure, with its traceback, although nothing failed; a handler
catches that error and returns :func:`client_left_during_upgrade` instead.
"""

from __future__ import annotations

from aiohttp import web

# nginx's code for a client that closed the connection before the answer; it shows only in
# the access log, since the answer cannot be written.
CLIENT_CLOSED_REQUEST = 499


def client_left_during_upgrade() -> web.Response:
    """The response for a client that left during the upgrade: writing it fails in turn, which
    aiohttp takes quietly as a premature disconnection."""
    return web.Response(status=CLIENT_CLOSED_REQUEST, reason="Client Closed Request")
