"""How many messages each entry of a segment log holds, so a backlog counts messages.

A producer batch is one log entry of several messages, so a subscription's backlog in entries
says little (one entry may be a thousand messages). The counts are kept as running totals,
8 bytes an entry, for the entries some subscription may still have to deliver: from the
lowest first unacknowledged entry of any subscription (the *floor*) to the last appended, so
the messages in any range of them is two lookups. Entries below the floor are forgotten as the
floor rises, and counted again from the log when a cursor goes back below it (a subscription
created at Earliest, a seek back).
"""

from __future__ import annotations

from array import array

import msgpack

from .batch_record import CorruptRecord

# Forget a prefix only when it is this long and half the totals, so that dropping (a copy of
# what stays) costs O(1) per entry appended.
_FORGET_AT_LEAST = 4096


def batch_size(record: bytes) -> int:
    """How many messages a batch record holds, read from its header without decoding them."""
    unpacker = msgpack.Unpacker(raw=False)
    unpacker.feed(record)
    try:
        if unpacker.read_array_header() != 3:
            raise CorruptRecord("log record is not a [producer, sequence id, messages] batch")
        unpacker.skip()  # the producer's name
        unpacker.skip()  # the first sequence id
        count: int = unpacker.read_array_header()
    except (ValueError, msgpack.UnpackException) as error:
        raise CorruptRecord(f"log record is not a producer batch: {error}") from error
    return count


class MessageCounts:
    """Messages per entry for the entries ``base`` to ``end - 1``, as running totals."""

    def __init__(self, base: int) -> None:
        self._base = base
        self._totals = array("q")  # _totals[i]: the messages in entries base .. base + i

    @property
    def base(self) -> int:
        """The first entry counted."""
        return self._base

    @property
    def end(self) -> int:
        """The entry after the last one counted: the next to :meth:`add`."""
        return self._base + len(self._totals)

    def add(self, entry_id: int, messages: int) -> None:
        """Count the next entry (entries are counted in order, as the log numbers them)."""
        if entry_id != self.end:
            raise ValueError(f"entry {entry_id} is counted out of order: expected {self.end}")
        self._totals.append(self._total_through(entry_id - 1) + messages)

    def remove_last(self, entry_id: int) -> None:
        """Take back the last entry counted: the append that was to take its id did not."""
        if entry_id != self.end - 1:
            raise ValueError(f"entry {entry_id} is not the last counted ({self.end - 1})")
        self._totals.pop()

    def prepend(self, messages: list[int]) -> None:
        """Count the entries ``base - len(messages) .. base - 1``, read again from the log."""
        if not messages:
            return
        before = array("q")
        running = 0
        for count in messages:
            running += count
            before.append(running)
        self._totals = before + array("q", (total + running for total in self._totals))
        self._base -= len(messages)

    def messages(self, first: int, last: int) -> int:
        """The messages in entries ``first..last`` that are counted (an entry below ``base``
        is not: the caller counts from the floor, or extends the counts first)."""
        first, last = max(first, self._base), min(last, self.end - 1)
        if last < first:
            return 0
        return self._total_through(last) - self._total_through(first - 1)

    def forget_before(self, floor: int) -> None:
        """Drop the counts of the entries below ``floor`` once they are many enough."""
        drop = min(floor, self.end) - self._base
        if drop < _FORGET_AT_LEAST or drop * 2 < len(self._totals):
            return
        gone = self._totals[drop - 1]
        self._totals = array("q", (total - gone for total in self._totals[drop:]))
        self._base += drop

    def _total_through(self, entry_id: int) -> int:
        index = entry_id - self._base
        return self._totals[index] if index >= 0 else 0
