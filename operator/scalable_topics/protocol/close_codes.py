"""WebSocket close codes (RFC 6455, section 7.4.1) and the one each connection-fatal error ends
a connection with.

The side that ends a connection first sends the Error frame naming the problem, then closes the
WebSocket with the code of ``close_code_for``, so that a peer (or a proxy, or a browser's
developer tools) that only sees the close still knows the kind of failure.
"""

from __future__ import annotations

from enum import IntEnum

from .errors import ErrorCode


class CloseCode(IntEnum):
    NORMAL = 1000  # the work is done: a client closing, a broker ending a session it was asked to
    GOING_AWAY = 1001  # the server is shutting down
    PROTOCOL_ERROR = 1002  # a frame that breaks the protocol
    UNSUPPORTED_DATA = 1003  # a text message: the protocol speaks binary messages only
    POLICY_VIOLATION = 1008  # authentication failed, or no Connect in time, or no answer to a ping
    MESSAGE_TOO_BIG = 1009  # a frame above the size limit


def close_code_for(code: ErrorCode) -> CloseCode | None:
    """The close code a connection ends with after an Error of ``code``; None for the codes
    that refuse one request and leave the connection open."""
    if not code.closes_connection:
        return None
    if code is ErrorCode.FRAME_TOO_LARGE:
        return CloseCode.MESSAGE_TOO_BIG
    if code is ErrorCode.AUTHENTICATION_FAILED:
        return CloseCode.POLICY_VIOLATION
    return CloseCode.PROTOCOL_ERROR
