"""The errors the client raises: one class per thing an application can act on.

Every error carries the wire ``code`` when a broker or controller gave one, and a message that
says what went wrong and what to do. Codes the client handles itself (a segment terminated by
a split, a broker that moved a segment, a busy consumer name after a reconnect) never reach the
application unless retrying is pointless or the operation's time is up.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ..protocol import BatchMessage, ErrorCode


class ClientError(Exception):
    """Base of every error the client raises."""

    def __init__(self, message: str, code: ErrorCode | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.code = code


class ConnectionFailed(ClientError):
    """No broker could be reached, or the connection dropped while a request was outstanding."""


class ClientClosed(ClientError):
    """The client, producer or consumer was closed; create a new one."""


class Timeout(ClientError):
    """The operation did not complete in time; it may or may not have taken effect."""


class ConnectTimeout(ConnectionFailed, Timeout):
    """Connecting to a broker (TCP, TLS, the WebSocket upgrade and the handshake) took longer
    than the client's connect timeout."""


class NotFound(ClientError):
    """The topic, segment or subscription does not exist."""


class AlreadyExists(ClientError):
    """A topic or subscription of that name exists already."""


class Unauthorized(ClientError):
    """The auth token is missing, wrong, or does not allow this: one of the two below."""


class AuthenticationFailed(Unauthorized):
    """The auth token is missing or wrong: the brokers refused the connection. Raised at
    once, never retried: only another token helps."""


class NotAuthorized(Unauthorized):
    """The token is valid but does not allow this operation; raised at once, never retried."""


class InvalidRequest(ClientError):
    """The request is well formed but makes no sense here; the message says why."""


class OperationInProgress(ClientError):
    """A split or merge was refused because another one holds the topic (running, or asked
    for and not answered yet); nothing was written. ``operation`` describes that one (kind,
    segmentIds, requestedBy, state). Ask again when it is over."""

    def __init__(self, message: str, operation: dict[str, object] | None = None) -> None:
        super().__init__(message)
        self.operation = operation or {}


class ProducerFenced(ClientError):
    """Another producer took exclusive access over this one: it is closed for good, and none
    of the messages the brokers refused are in any log."""


class ProducerBusy(ClientError):
    """Another producer holds the access this one asked for: retry later, or wait for it."""


class ConsumerBusy(ClientError):
    """The subscription (or consumer name) is in use by another consumer."""


class MessageTooLarge(ClientError):
    """A message exceeds the brokers' limit; it was not sent."""


class TooManyOpen(ClientError):
    """The broker refused to open one more producer, consumer, watch, registration or grant:
    this client's connection to it holds as many as its ``--max-open-per-connection`` allows
    (the message says how many). Not retried: close some first, or raise the broker's limit."""


class UnsupportedVersion(ClientError):
    """No broker can do what was asked in the protocol version it agreed on with this client
    (a namespace watch needs version 2; a broker of an older release speaks 1): the message
    names each broker and its version. Upgrade the brokers."""


class ServerError(ClientError):
    """The broker or controller failed, or is not ready; retrying later may help."""


@dataclass(frozen=True, slots=True)
class FailedSend:
    """One message queued with ``send_async`` that was not acknowledged, and why."""

    topic: str
    message: BatchMessage
    error: BaseException


class SendFailed(ClientError):
    """Messages queued with ``send_async`` since the last flush were not acknowledged:
    ``flush()`` and ``close()`` raise it once for them. ``failures`` lists each message and its
    error in the order they were queued (resend them in that order to keep each key's order);
    the first error is the ``__cause__`` and gives the ``code``."""

    def __init__(self, failures: Sequence[FailedSend]) -> None:
        if not failures:
            raise ValueError("SendFailed needs at least one failure")
        self.failures = tuple(failures)
        first = self.failures[0].error
        count = len(self.failures)
        noun = "message" if count == 1 else "messages"
        super().__init__(
            f"{count} {noun} sent since the last flush failed; the first: {first}",
            first.code if isinstance(first, ClientError) else None,
        )


_BY_CODE: dict[ErrorCode, type[ClientError]] = {
    ErrorCode.TOPIC_NOT_FOUND: NotFound,
    ErrorCode.SEGMENT_NOT_FOUND: NotFound,
    ErrorCode.SUBSCRIPTION_NOT_FOUND: NotFound,
    ErrorCode.AUTHENTICATION_FAILED: AuthenticationFailed,
    ErrorCode.NOT_AUTHORIZED: NotAuthorized,
    ErrorCode.INVALID_REQUEST: InvalidRequest,
    ErrorCode.SUBSCRIPTION_TYPE_MISMATCH: InvalidRequest,
    ErrorCode.PRODUCER_FENCED: ProducerFenced,
    ErrorCode.PRODUCER_BUSY: ProducerBusy,
    ErrorCode.CONSUMER_BUSY: ConsumerBusy,
    ErrorCode.MESSAGE_TOO_LARGE: MessageTooLarge,
    ErrorCode.TOO_MANY_OPEN: TooManyOpen,
    ErrorCode.UNSUPPORTED_VERSION: UnsupportedVersion,
}

# Refusals that a later attempt can overcome without the application changing anything.
RETRIABLE_CODES: frozenset[ErrorCode] = frozenset(
    {
        ErrorCode.SERVICE_NOT_READY,
        ErrorCode.INTERNAL_ERROR,
        ErrorCode.WRONG_BROKER,
        ErrorCode.SEGMENT_TERMINATED,
        ErrorCode.NOT_LEADER,
    }
)


def error_for(code: ErrorCode, message: str) -> ClientError:
    """The exception for a refusal with ``code``, keeping the server's message."""
    return _BY_CODE.get(code, ServerError)(f"{code}: {message}", code)
