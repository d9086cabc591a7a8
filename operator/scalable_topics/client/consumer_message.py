"""A message as a consumer hands it to the application."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass

from ..protocol import DeliveredMessage, MessageId
from .errors import ClientClosed


@dataclass(frozen=True, slots=True)
class ReceivedMessage:
    """One message: its content, its place (``message_id``, whose segment says where it was
    read), how often it was delivered before (``redelivery_count``) and the ``topic``
    (``namespace/name``) it came from: the one subscribed to, or for a namespace consumer the
    topic of the namespace that holds it (never a segment's)."""

    payload: bytes
    key: str | None
    properties: Mapping[str, str]
    event_time_ms: int | None
    publish_time_ms: int
    message_id: MessageId
    redelivery_count: int
    # Last, with a default: code that builds messages positionally keeps working. Every
    # consumer fills it; empty only in a message built without one.
    topic: str = ""

    @property
    def segment_id(self) -> int:
        return self.message_id.segment_id

    @classmethod
    def of(cls, delivered: DeliveredMessage, topic: str) -> ReceivedMessage:
        return cls(
            delivered.payload,
            delivered.key,
            delivered.properties,
            delivered.event_time_ms,
            delivered.publish_time_ms,
            delivered.message_id,
            delivered.redelivery_count,
            topic,
        )


def message_id_of(message: ReceivedMessage | MessageId) -> MessageId:
    """Acknowledgements take a message or its id."""
    return message.message_id if isinstance(message, ReceivedMessage) else message


async def until_closed(
    receive: Callable[[], Awaitable[ReceivedMessage]],
) -> AsyncIterator[ReceivedMessage]:
    """What iterating a consumer yields: each message ``receive`` hands out, until the
    consumer is closed."""
    while True:
        try:
            yield await receive()
        except ClientClosed:
            return
