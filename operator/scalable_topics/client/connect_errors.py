"""Why connecting to a broker failed, in a few words a person can act on.

aiohttp's messages repeat the address and carry its internals (``Cannot connect to host
127.0.0.1:1 ssl:default [Connect call failed ('127.0.0.1', 1)]``); the client says instead
``connection refused (nothing listens there)``, ``host unreachable``, ``TLS handshake
failed: ...`` or ``no answer within 5 s``, after the URL it tried. A broker at its connection
limit refuses the WebSocket upgrade with 503 and says why in a header (protocol/upgrade.py):
the client repeats that, a connection attempt that failed like any other.
"""

from __future__ import annotations

import errno
import ssl

import aiohttp

from ..protocol.upgrade import REFUSAL_HEADER

_BY_ERRNO = {
    errno.ECONNREFUSED: "connection refused (nothing listens there)",
    errno.EHOSTUNREACH: "host unreachable",
    errno.ENETUNREACH: "network unreachable",
    errno.ETIMEDOUT: "timed out",
    errno.ECONNRESET: "connection reset",
    errno.EADDRNOTAVAIL: "address not available",
}


def connect_failure(error: BaseException, seconds: float) -> str:
    """The reason ``error`` (raised while connecting, ``seconds`` the connect timeout) gives."""
    if isinstance(error, aiohttp.ClientConnectorCertificateError):
        return f"TLS certificate refused: {error.certificate_error}"
    if isinstance(error, aiohttp.ClientConnectorDNSError):
        return f"cannot resolve host {error.host!r}"
    if isinstance(error, aiohttp.ClientConnectorSSLError | aiohttp.ClientSSLError):
        return f"TLS handshake failed: {_os_reason(error)}"
    if isinstance(error, aiohttp.WSServerHandshakeError):
        if error.status == 503:
            return _unavailable(error)
        return (
            f"no broker's WebSocket there (HTTP {error.status}"
            + (f" {error.message}" if error.message else "")
            + ")"
        )
    if isinstance(error, aiohttp.ServerDisconnectedError):
        return "the server closed the connection before answering"
    if isinstance(error, TimeoutError):  # aiohttp's connect timeouts are TimeoutErrors too
        return f"no answer within {seconds:g} s"
    if isinstance(error, aiohttp.ClientConnectorError):
        return _os_reason(error)
    if isinstance(error, ssl.SSLError):
        return f"TLS handshake failed: {error.reason or error}"
    if isinstance(error, OSError):
        return _BY_ERRNO.get(error.errno or 0) or error.strerror or str(error)
    return str(error) or type(error).__name__


def _unavailable(error: aiohttp.WSServerHandshakeError) -> str:
    """A 503 answering the upgrade: a broker at a connection limit (its reason in
    REFUSAL_HEADER), or a proxy with no broker behind it."""
    headers = error.headers
    reason = (headers and headers.get(REFUSAL_HEADER)) or "the server is not taking connections"
    retry_after = headers and headers.get("Retry-After")
    return f"{reason} (HTTP 503" + (f", retry after {retry_after} s)" if retry_after else ")")


def _os_reason(error: aiohttp.ClientConnectorError) -> str:
    cause = error.os_error
    if isinstance(cause, ssl.SSLError):
        return str(cause.reason or cause)
    known = _BY_ERRNO.get(cause.errno or 0)
    return known or cause.strerror or str(cause) or type(cause).__name__
