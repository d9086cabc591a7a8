"""One consumer's delivered, unacknowledged messages, kept small.

A consumer may hold tens of thousands of messages unacknowledged (up to its unacked limit), so
what the broker keeps per message counts: here, one dict entry from an int to an int. The key
is the message's position packed into one int (entry id above bit 32, batch index below: a
batch never holds 2^32 messages, and the session refuses a position that says otherwise); the
value is its batch size, with its key hash above bit 32 when it has one. Modes other than
Key_Shared carry no key hash, and the messages of one log entry share their batch size's int
object, so only the key costs memory of its own: about 32 bytes, where a Position tuple costs
64 and a Message record 72 more. Positions and Messages are rebuilt when messages leave (acks,
redeliveries), which is rare next to holding them.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from scalable_topics.model.position import BATCH_INDEX_LIMIT, Position

from .base import Message

_BITS = 32
_MASK = (1 << _BITS) - 1
assert BATCH_INDEX_LIMIT == 1 << _BITS
_make = tuple.__new__  # Message and Position are NamedTuples: build them in C


def _message(key: int, value: int) -> Message:
    return _make(
        Message, (_make(Position, (key >> _BITS, key & _MASK)), value >> _BITS, value & _MASK)
    )


class PendingMessages:
    """A mapping of Position to Message in delivery order, holding two ints per message."""

    __slots__ = ("_values",)

    def __init__(self) -> None:
        self._values: dict[int, int] = {}

    def __len__(self) -> int:
        return len(self._values)

    def __bool__(self) -> bool:
        return bool(self._values)

    def __contains__(self, position: Position) -> bool:
        return (position[0] << _BITS | position[1]) in self._values

    def add(self, messages: Iterable[Message]) -> None:
        values = self._values
        for position, key_hash, batch_size in messages:
            values[position[0] << _BITS | position[1]] = (
                (key_hash << _BITS | batch_size) if key_hash else batch_size
            )

    def get(self, position: Position) -> Message | None:
        key = position[0] << _BITS | position[1]
        value = self._values.get(key)
        return None if value is None else _message(key, value)

    def pop(self, position: Position) -> Message | None:
        value = self._values.pop(position[0] << _BITS | position[1], None)
        return None if value is None else _make(Message, (position, value >> _BITS, value & _MASK))

    def pop_many(self, positions: Iterable[Position]) -> tuple[list[Message], list[Position]]:
        """Remove the messages at ``positions``: (those found, the positions not pending)."""
        values = self._values
        found: list[Message] = []
        missing: list[Position] = []
        for position in positions:
            value = values.pop(position[0] << _BITS | position[1], None)
            if value is None:
                missing.append(position)
            else:
                found.append(_make(Message, (position, value >> _BITS, value & _MASK)))
        return found, missing

    def positions_up_to(self, position: Position) -> list[Position]:
        """The positions up to and including ``position``: packing keeps their order."""
        last = position[0] << _BITS | position[1]
        return [_make(Position, (k >> _BITS, k & _MASK)) for k in self._values if k <= last]

    def take_all(self) -> list[Message]:
        """Every message, in delivery order; none is left."""
        messages = [_message(key, value) for key, value in self._values.items()]
        self._values = {}  # a new dict: clear() would keep the table at its largest size
        return messages

    def __iter__(self) -> Iterator[Message]:
        """The messages in delivery order."""
        return (_message(key, value) for key, value in self._values.items())

    def key_hashes(self) -> Iterator[int]:
        return (value >> _BITS for value in self._values.values())
