"""How a producer batch is stored as one segment-log record.

A record is the msgpack array ``[producer_name, first_sequence_id, messages]`` where each
message is ``[key, properties, event_time_ms, payload]`` (``key`` and ``event_time_ms`` may be
nil, ``properties`` a map of strings). Message ``i`` of the batch has sequence id
``first_sequence_id + i`` and position ``(entry_id, i)``. Keeping the producer's name and
sequence ids in the log lets a restarted broker rebuild its deduplication state from the log.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import msgpack


class CorruptRecord(ValueError):
    """A log record that does not hold a producer batch."""


@dataclass(frozen=True, slots=True)
class StoredMessage:
    key: str | None
    properties: dict[str, str]
    event_time_ms: int | None
    payload: bytes


@dataclass(frozen=True, slots=True)
class BatchRecord:
    producer_name: str
    first_sequence_id: int
    messages: tuple[StoredMessage, ...]

    @property
    def last_sequence_id(self) -> int:
        return self.first_sequence_id + len(self.messages) - 1


def encode_batch(
    producer_name: str, first_sequence_id: int, messages: list[StoredMessage]
) -> bytes:
    if not messages:
        raise ValueError("a batch holds at least one message")
    body = [[m.key, m.properties or None, m.event_time_ms, m.payload] for m in messages]
    packed: bytes = msgpack.packb([producer_name, first_sequence_id, body], use_bin_type=True)
    return packed


def decode_batch(data: bytes) -> BatchRecord:
    try:
        producer_name, first_sequence_id, body = msgpack.unpackb(data, raw=False, use_list=True)
        messages = tuple(_message(item) for item in body)
    except (ValueError, TypeError, msgpack.UnpackException) as error:
        raise CorruptRecord(f"log record is not a producer batch: {error}") from error
    if not isinstance(producer_name, str) or not isinstance(first_sequence_id, int) or not messages:
        raise CorruptRecord("log record has a malformed batch header")
    return BatchRecord(producer_name, first_sequence_id, messages)


def _message(item: Any) -> StoredMessage:
    key, properties, event_time_ms, payload = item
    if not isinstance(payload, bytes):
        raise TypeError("message payload is not bytes")
    return StoredMessage(key, dict(properties or {}), event_time_ms, payload)
