"""What a cumulative acknowledgement covers across the topics of a namespace stream consumer.

The application takes messages from one queue, in order. Acknowledging a message cumulatively
acknowledges everything it was handed before it, on every topic: per topic and segment, up to
the highest message taken so far (the position vector at that message). Rather than copy a
vector into every message, the ledger numbers the messages as they are handed out and keeps,
in that order, the ones no acknowledgement has covered yet; an acknowledgement of message
number n takes the entries up to n off the front and folds them into a vector. So a delivered
message costs one entry until it is covered, and an acknowledgement costs what it covers.

An acknowledgement of an older message than one already acknowledged covers nothing more.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Hashable
from typing import Generic, TypeVar

from ..protocol import MessageId

K = TypeVar("K", bound=Hashable)

# Per key (a topic's consumer), per segment, the highest message covered.
Vector = dict[K, dict[int, MessageId]]


class DeliveryLedger(Generic[K]):
    def __init__(self) -> None:
        self._entries: deque[tuple[int, K, MessageId]] = deque()
        self._next = 0

    def __len__(self) -> int:
        """Messages handed out and not covered by an acknowledgement yet."""
        return len(self._entries)

    def record(self, key: K, message_id: MessageId) -> int:
        """A message handed out now; returns its number in the order of delivery."""
        number = self._next
        self._next += 1
        self._entries.append((number, key, message_id))
        return number

    def cover(self, number: int) -> Vector[K]:
        """Take off every message handed out up to message ``number`` (included) and return
        their vector: per key and segment, the highest of them."""
        vector: Vector[K] = {}
        entries = self._entries
        while entries and entries[0][0] <= number:
            _, key, message_id = entries.popleft()
            segments = vector.setdefault(key, {})
            known = segments.get(message_id.segment_id)
            if known is None or message_id > known:
                segments[message_id.segment_id] = message_id
        return vector
