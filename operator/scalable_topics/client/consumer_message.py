"""A message as a consumer hands it to the application."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from ..protocol import DeliveredMessage, MessageId


@dataclass(frozen=True, slots=True)
class ReceivedMessage:
    """One message: its content, its place (``message_id``, whose segment says where it was
    read) and how often it was delivered before (``redelivery_count``)."""

    payload: bytes
    key: str | None
    properties: Mapping[str, str]
    event_time_ms: int | None
    publish_time_ms: int
    message_id: MessageId
    redelivery_count: int

    @property
    def segment_id(self) -> int:
        return self.message_id.segment_id

    @classmethod
    def of(cls, delivered: DeliveredMessage) -> ReceivedMessage:
        return cls(
            delivered.payload,
            delivered.key,
            delivered.properties,
            delivered.event_time_ms,
            delivered.publish_time_ms,
            delivered.message_id,
            delivered.redelivery_count,
        )


def message_id_of(message: ReceivedMessage | MessageId) -> MessageId:
    """Acknowledgements take a message or its id."""
    return message.message_id if isinstance(message, ReceivedMessage) else message
