"""One consumer's delivered, unacknowledged messages, kept small.

A consumer may hold tens of thousands of messages unacknowledged (up to its unacked limit), so
what the broker keeps per message counts. This keeps each as one dict entry from its Position
to one int: the message's batch size, with its key hash above bit 32 when it has one. Modes
other than Key_Shared carry no key hash, and the messages of one log entry share their batch
size's int object, so their value costs nothing of its own; the Message records are rebuilt
when messages leave (acks, redeliveries), which is rare next to holding them.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from scalable_topics.model.position import Position

from .base import Message

_SIZE_BITS = 32
_SIZE_MASK = (1 << _SIZE_BITS) - 1
_make = tuple.__new__  # Message and Position are NamedTuples: build them in C


def _unpack(position: Position, value: int) -> Message:
    return _make(Message, (position, value >> _SIZE_BITS, value & _SIZE_MASK))


class PendingMessages:
    """A mapping of Position to Message in delivery order, holding ints instead of Messages."""

    __slots__ = ("_values",)

    def __init__(self) -> None:
        self._values: dict[Position, int] = {}

    def __len__(self) -> int:
        return len(self._values)

    def __bool__(self) -> bool:
        return bool(self._values)

    def __contains__(self, position: object) -> bool:
        return position in self._values

    def add(self, messages: Iterable[Message]) -> None:
        values = self._values
        for position, key_hash, batch_size in messages:
            values[position] = (key_hash << _SIZE_BITS | batch_size) if key_hash else batch_size

    def get(self, position: Position) -> Message | None:
        value = self._values.get(position)
        return None if value is None else _unpack(position, value)

    def pop(self, position: Position) -> Message | None:
        value = self._values.pop(position, None)
        return None if value is None else _unpack(position, value)

    def take_all(self) -> list[Message]:
        """Every message, in delivery order; none is left."""
        messages = [_unpack(position, value) for position, value in self._values.items()]
        self._values = {}  # a new dict: clear() would keep the table at its largest size
        return messages

    def __iter__(self) -> Iterator[Message]:
        """The messages in delivery order."""
        return (_unpack(position, value) for position, value in self._values.items())

    def key_hashes(self) -> Iterator[int]:
        return (value >> _SIZE_BITS for value in self._values.values())
