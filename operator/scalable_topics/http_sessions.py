"""HTTP client sessions for the admin APIs (the client's Admin, the controllers' and brokers'
BrokerAdmin).

A server closes a keep-alive connection that stayed idle for its keep-alive timeout (a
broker's ``--handshake-timeout``, 10 s by default). A client reusing a pooled connection just
as the server closes it gets ServerDisconnectedError for a request the server never read, and
aiohttp retries no request on it. So pooled connections are dropped after IDLE_SECONDS, well
before any server with the default timeouts closes them (aiohttp's own default is 15 s).
"""

from __future__ import annotations

import aiohttp

IDLE_SECONDS = 4.0


def admin_session() -> aiohttp.ClientSession:
    """A session whose pooled connections never outlive the servers' keep-alive timeout."""
    return aiohttp.ClientSession(connector=aiohttp.TCPConnector(keepalive_timeout=IDLE_SECONDS))
