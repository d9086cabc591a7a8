"""How a producer batch is stored as one segment-log record.

A record is the msgpack array ``[producer_name, first_sequence_id, messages]`` where each
message is a protocol :class:`BatchMessage` in its wire form ``[payload, key, properties,
event_time_ms]``: the broker stores what the producer sent without re-encoding each message.
Message ``i`` of the batch has sequence id ``first_sequence_id + i`` and position
``(entry_id, i)``. Keeping the producer's name and sequence ids in the log lets a restarted
broker rebuild its deduplication state from the log.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import msgpack

from ..protocol import NO_PROPERTIES, BatchMessage


class CorruptRecord(ValueError):
    """A log record that does not hold a producer batch."""


@dataclass(frozen=True, slots=True)
class BatchRecord:
    producer_name: str
    first_sequence_id: int
    messages: tuple[BatchMessage, ...]

    @property
    def last_sequence_id(self) -> int:
        return self.first_sequence_id + len(self.messages) - 1


def encode_batch(
    producer_name: str, first_sequence_id: int, messages: Sequence[BatchMessage]
) -> bytes:
    if not messages:
        raise ValueError("a batch holds at least one message")
    packed: bytes = msgpack.packb([producer_name, first_sequence_id, messages], use_bin_type=True)
    return packed


def decode_messages(data: bytes) -> list[list[Any]]:
    """The batch's messages in their stored form ``[payload, key, properties, event_time_ms]``,
    without building a record: the dispatch read path decodes every entry it serves."""
    try:
        messages: list[list[Any]] = msgpack.unpackb(data, raw=False)[2]
    except (ValueError, TypeError, IndexError, msgpack.UnpackException) as error:
        raise CorruptRecord(f"log record is not a producer batch: {error}") from error
    return messages


def decode_batch(data: bytes) -> BatchRecord:
    try:
        producer_name, first_sequence_id, body = msgpack.unpackb(data, raw=False, use_list=False)
        messages = tuple(_message(*item) for item in body)
    except (ValueError, TypeError, msgpack.UnpackException) as error:
        raise CorruptRecord(f"log record is not a producer batch: {error}") from error
    if not isinstance(producer_name, str) or not isinstance(first_sequence_id, int) or not messages:
        raise CorruptRecord("log record has a malformed batch header")
    return BatchRecord(producer_name, first_sequence_id, messages)


def _message(
    payload: bytes, key: str | None, properties: dict[str, str] | None, event_time_ms: int | None
) -> BatchMessage:
    if not isinstance(payload, bytes):
        raise TypeError("message payload is not bytes")
    return BatchMessage(payload, key, properties or NO_PROPERTIES, event_time_ms)
