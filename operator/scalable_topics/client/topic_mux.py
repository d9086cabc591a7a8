"""The one receive queue of a namespace consumer, fed by the consumers of all its topics.

Each per-topic consumer puts its messages through a :class:`Feed` of its own (its sink, in
place of its own receive queue), so every queued message remembers which consumer it came
from: the application's acknowledgement goes back to that consumer. Messages are taken in the
order they arrived, and each is checked by its segment consumer as it is taken, exactly as in
a single topic's queue (copies from a lost session or already acknowledged are skipped), so
each topic keeps the guarantees of its single-topic consumer.

The queue needs no bound of its own: a segment consumer gives its broker permits back only as
the application takes its messages, so each segment of each topic has at most the consumer's
``receive_queue_size`` messages waiting here; a topic whose messages wait stops its own
brokers, not the other topics.

A feed closed (its topic left the set, or its consumer is replaced after a failure) puts
nothing more, and what it had queued is dropped: that consumer can no longer acknowledge it,
and the brokers deliver it again to the subscription's next consumer. Dropped messages are
skipped as they come up, and the queue is compacted once most of it is dropped ones, so many
topics leaving at once cost a pass over the queue each time it halves, not one per topic.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable
from typing import Generic, TypeVar

from .errors import ClientError
from .receive_queue import QueuedMessage

C = TypeVar("C")


class Feed(Generic[C]):
    """One per-topic consumer's way into the shared queue (its ``MessageSink``)."""

    def __init__(
        self, mux: MuxQueue[C], topic: str, on_failure: Callable[[ClientError], None]
    ) -> None:
        self.topic = topic
        self.mux = mux
        # Set as soon as the consumer is made, before it starts: it may deliver at once.
        self.consumer: C | None = None
        self.queued = 0  # its messages in the queue (the queue counts them)
        self._on_failure = on_failure
        self._open = True

    @property
    def open(self) -> bool:
        return self._open

    def put(self, item: QueuedMessage) -> None:
        if self._open:
            self.mux.put(self, item)

    def fail(self, error: ClientError) -> None:
        """The consumer stopped for good (a refusal, the topic deleted): it is replaced."""
        if self._open:
            self._on_failure(error)

    def close(self) -> None:
        """Nothing more from this consumer; what it queued is dropped."""
        if self._open:
            self._open = False
            self.mux.drop(self)


class MuxQueue(Generic[C]):
    def __init__(self) -> None:
        self._items: deque[tuple[Feed[C], QueuedMessage]] = deque()
        self._dropped = 0  # items in the queue whose feed is closed
        self._nonempty = asyncio.Event()
        self._failure: ClientError | None = None

    def __len__(self) -> int:
        """Messages queued, dropped ones not counted."""
        return len(self._items) - self._dropped

    def put(self, feed: Feed[C], item: QueuedMessage) -> None:
        self._items.append((feed, item))
        feed.queued += 1
        self._nonempty.set()

    def drop(self, feed: Feed[C]) -> None:
        """Forget what ``feed`` (closed) queued."""
        self._dropped += feed.queued
        feed.queued = 0
        if self._dropped * 2 > len(self._items):
            self._items = deque(entry for entry in self._items if entry[0].open)
            self._dropped = 0

    def fail(self, error: ClientError) -> None:
        """``get`` raises ``error`` from now on, queued messages or not: the consumer as a
        whole is over (closed, or its namespace watch ended)."""
        if self._failure is None:
            self._failure = error
        self._nonempty.set()

    async def get(self) -> tuple[Feed[C], QueuedMessage]:
        """The next message still good to hand out, with the feed it came through. Taking
        it is synchronous, so a ``get`` cancelled by a timeout never loses one."""
        while True:
            if self._failure is not None:
                raise self._failure
            while self._items:
                feed, item = self._items.popleft()
                if not feed.open:
                    self._dropped -= 1
                    continue
                feed.queued -= 1
                if item.source.take(item):
                    return feed, item
            self._nonempty.clear()
            await self._nonempty.wait()
