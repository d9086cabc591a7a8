"""Error codes on the wire, and the exception a frame that breaks the protocol raises.

The codes' string values are part of the protocol: they never change meaning and are never
reused. Codes in ``CONNECTION_FATAL`` mean the connection cannot continue: the side that
detects one sends an Error frame and closes the WebSocket. Every other code answers one
request (or one Send, or one producer/consumer/watch) and the connection carries on.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Final


class ErrorCode(StrEnum):
    # The peer does not speak this protocol, or not yet: the connection closes.
    MALFORMED_FRAME = "MalformedFrame"
    FRAME_TOO_LARGE = "FrameTooLarge"
    UNKNOWN_COMMAND = "UnknownCommand"
    UNSUPPORTED_VERSION = "UnsupportedVersion"
    NOT_CONNECTED = "NotConnected"
    UNEXPECTED_COMMAND = "UnexpectedCommand"
    AUTHENTICATION_FAILED = "AuthenticationFailed"
    # One request failed; the connection and its other producers and consumers carry on.
    INVALID_REQUEST = "InvalidRequest"
    NOT_AUTHORIZED = "NotAuthorized"
    TOPIC_NOT_FOUND = "TopicNotFound"
    SEGMENT_NOT_FOUND = "SegmentNotFound"
    SUBSCRIPTION_NOT_FOUND = "SubscriptionNotFound"
    UNKNOWN_PRODUCER = "UnknownProducer"
    UNKNOWN_CONSUMER = "UnknownConsumer"
    UNKNOWN_WATCH = "UnknownWatch"
    ID_IN_USE = "IdInUse"
    PRODUCER_BUSY = "ProducerBusy"
    PRODUCER_FENCED = "ProducerFenced"
    CONSUMER_BUSY = "ConsumerBusy"
    SUBSCRIPTION_TYPE_MISMATCH = "SubscriptionTypeMismatch"
    SEGMENT_TERMINATED = "SegmentTerminated"
    WRONG_BROKER = "WrongBroker"
    MESSAGE_TOO_LARGE = "MessageTooLarge"
    SERVICE_NOT_READY = "ServiceNotReady"
    INTERNAL_ERROR = "InternalError"
    NOT_LEADER = "NotLeader"
    UNKNOWN_REGISTRATION = "UnknownRegistration"
    UNKNOWN_GRANT = "UnknownGrant"
    # A request that would open one more producer, consumer, watch, registration or grant on a
    # connection holding the broker's limit of them: the application holds them, so no retry
    # helps until it closes some (unlike ServiceNotReady, which clients retry).
    TOO_MANY_OPEN = "TooManyOpen"

    @property
    def closes_connection(self) -> bool:
        return self in CONNECTION_FATAL


CONNECTION_FATAL: Final[frozenset[ErrorCode]] = frozenset(
    {
        ErrorCode.MALFORMED_FRAME,
        ErrorCode.FRAME_TOO_LARGE,
        ErrorCode.UNKNOWN_COMMAND,
        ErrorCode.UNSUPPORTED_VERSION,
        ErrorCode.NOT_CONNECTED,
        ErrorCode.UNEXPECTED_COMMAND,
        ErrorCode.AUTHENTICATION_FAILED,
    }
)


class ProtocolError(Exception):
    """A frame that cannot be accepted. ``request_id`` is the id of the request it carried,
    when one could be read, so that the Error frame answering it can name the request."""

    def __init__(self, code: ErrorCode, message: str, request_id: int | None = None) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message
        self.request_id = request_id
