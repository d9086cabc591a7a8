"""Replay sets: messages waiting to be dispatched again, ahead of newly read ones."""

from __future__ import annotations

import heapq
from bisect import insort
from collections.abc import Iterable, Iterator, KeysView

from scalable_topics.model.position import Position

from .base import Message


def _position_key(message: Message) -> tuple[int, int]:
    return message.position.entry_id, message.position.batch_index


class ReplayQueue:
    """Messages ordered by position, for modes that replay in log order.

    Heap items start with plain ints so that ordering never compares Position objects.
    """

    __slots__ = ("_heap",)

    def __init__(self) -> None:
        self._heap: list[tuple[int, int, Message]] = []

    def __len__(self) -> int:
        return len(self._heap)

    def add(self, messages: Iterable[Message]) -> None:
        heap = self._heap
        for message in messages:
            position = message.position
            heapq.heappush(heap, (position.entry_id, position.batch_index, message))

    def pop_first(self, limit: int) -> list[Message]:
        """Remove and return up to ``limit`` messages, oldest first."""
        heap = self._heap
        if limit >= len(heap):
            taken = [item[2] for item in sorted(heap)]
            heap.clear()
            return taken
        return [heapq.heappop(heap)[2] for _ in range(limit)]

    def __iter__(self) -> Iterator[Message]:
        return (item[2] for item in sorted(self._heap))

    def discard(self, positions: set[Position]) -> list[Message]:
        """Remove the messages at ``positions`` (acknowledged meanwhile); return them."""
        removed = [item[2] for item in self._heap if item[2].position in positions]
        if removed:
            self._heap = [item for item in self._heap if item[2].position not in positions]
            heapq.heapify(self._heap)
        return removed


class ReplayByHash:
    """Messages grouped by key hash, each group in position order (Key_Shared).

    Only the order within a key matters to Key_Shared, so groups are served independently;
    a group keeps its place (first come, first tried) until it is empty.
    """

    __slots__ = ("_groups", "_size")

    def __init__(self) -> None:
        self._groups: dict[int, list[Message]] = {}
        self._size = 0

    def __len__(self) -> int:
        return self._size

    def __bool__(self) -> bool:
        return self._size > 0

    @property
    def hashes(self) -> KeysView[int]:
        """A live view of the hashes with waiting messages (cheap ``in`` on a hot path)."""
        return self._groups.keys()

    def append_newest(self, message: Message) -> None:
        """Add a message newer than every message of its hash held here (a new read)."""
        group = self._groups.get(message.key_hash)
        if group is None:
            self._groups[message.key_hash] = [message]
        else:
            group.append(message)
        self._size += 1

    def add(self, messages: Iterable[Message]) -> None:
        """Add messages that may be older than others of their hash (redeliveries)."""
        groups = self._groups
        for message in messages:
            group = groups.get(message.key_hash)
            if group is None:
                groups[message.key_hash] = [message]
            else:
                insort(group, message, key=_position_key)
            self._size += 1

    def groups(self) -> list[tuple[int, int]]:
        """A snapshot of ``(key_hash, message count)`` per group, oldest group first."""
        return [(key_hash, len(group)) for key_hash, group in self._groups.items()]

    def take(self, key_hash: int, limit: int) -> list[Message]:
        """Remove and return up to ``limit`` of the group's oldest messages."""
        group = self._groups[key_hash]
        if limit >= len(group):
            del self._groups[key_hash]
            self._size -= len(group)
            return group
        taken = group[:limit]
        del group[:limit]
        self._size -= limit
        return taken

    def __iter__(self) -> Iterator[Message]:
        for group in self._groups.values():
            yield from group

    def discard(self, positions: set[Position]) -> list[Message]:
        """Remove the messages at ``positions`` (acknowledged meanwhile); return them."""
        removed: list[Message] = []
        for key_hash in list(self._groups):
            group = self._groups[key_hash]
            kept = [message for message in group if message.position not in positions]
            if len(kept) != len(group):
                removed.extend(message for message in group if message.position in positions)
                if kept:
                    self._groups[key_hash] = kept
                else:
                    del self._groups[key_hash]
        self._size -= len(removed)
        return removed
