"""The single receive queue of a topic consumer, fed by all of its segment consumers.

Each queued message remembers which segment consumer put it there and in which of that
consumer's *generations* (a broker session, or the span between two seeks). The source decides,
as the application takes a message, whether it is still good: copies left from a lost session
or from before a seek are skipped (the broker delivers them again), and so is any copy of a
message the application has already acknowledged. Taking a message is synchronous, so a
``receive`` cancelled by its timeout never loses one.
"""

from __future__ import annotations

import asyncio
from collections import deque
from dataclasses import dataclass
from typing import Protocol

from ..protocol import DeliveredMessage
from .errors import ClientError


class MessageSink(Protocol):
    """Where a topic consumer's segment consumers put what arrives: its own receive queue, or
    a namespace consumer's shared one."""

    def put(self, item: QueuedMessage) -> None: ...

    def fail(self, error: ClientError) -> None:
        """Nothing more will come from this consumer, because of ``error``."""


class MessageSource(Protocol):
    def take(self, item: QueuedMessage) -> bool:
        """The application takes ``item``: True to hand it over, False to skip it."""


@dataclass(frozen=True, slots=True)
class QueuedMessage:
    source: MessageSource
    generation: int
    message: DeliveredMessage


class ReceiveQueue:
    def __init__(self) -> None:
        self._items: deque[QueuedMessage] = deque()
        self._nonempty = asyncio.Event()
        self._failure: ClientError | None = None

    def __len__(self) -> int:
        return len(self._items)

    def put(self, item: QueuedMessage) -> None:
        self._items.append(item)
        self._nonempty.set()

    def fail(self, error: ClientError) -> None:
        """No more messages will come: once the queue is empty, ``get`` raises ``error``."""
        if self._failure is None:
            self._failure = error
        self._nonempty.set()

    async def get(self) -> QueuedMessage:
        while True:
            while self._items:
                item = self._items.popleft()
                if item.source.take(item):
                    return item
            if self._failure is not None:
                raise self._failure
            self._nonempty.clear()
            await self._nonempty.wait()
