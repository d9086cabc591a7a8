"""Watches on an EmbeddedStore: the listener the change feed fills, and the stream a caller reads.

EmbeddedWatch is the store's companion: it registers and releases its listener through the
store's private registry, which nothing else touches.

A listener holds no reference to its watch, so a watch that nobody closes can still be garbage
collected, and its finalizer releases the listener.
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass
from types import TracebackType
from typing import TYPE_CHECKING, NamedTuple, Self

from .errors import StoreClosed, StoreError
from .port import EventType, WatchEvent
from .selectors import LabelSelector

if TYPE_CHECKING:
    from .embedded import EmbeddedStore


class Change(NamedTuple):
    revision: int
    kind: str
    namespace: str
    type: EventType
    body: str
    labels: dict[str, str]
    prev_labels: dict[str, str] | None


class Batch(NamedTuple):
    revision: int
    compacted: int
    changes: list[Change]


def event_type_for(change: Change, selector: LabelSelector) -> EventType | None:
    """The event a selector watch sees for a change: objects entering or leaving the selection
    arrive as ADDED or DELETED, changes outside it not at all."""
    if selector.is_empty:
        return change.type
    matches = selector.matches(change.labels)
    if change.type is not EventType.MODIFIED:
        return change.type if matches else None
    matched = selector.matches(change.prev_labels or {})
    if matched and matches:
        return EventType.MODIFIED
    if matched:
        return EventType.DELETED
    return EventType.ADDED if matches else None


@dataclass(eq=False, slots=True)
class Listener:
    """A watch as the feed sees it; it holds no reference to the watch, so the watch can die."""

    kind: str
    namespace: str | None
    selector: LabelSelector
    cursor: int  # every change up to this revision has been delivered
    queue: asyncio.Queue[WatchEvent | StoreError]
    loop: asyncio.AbstractEventLoop
    bookmark_interval: float | None = None  # None: the watch asked for no bookmarks
    bookmarked: int = 0  # the revision of the last bookmark sent
    bookmarked_at: float = float("-inf")


class EmbeddedWatch:
    """A watch on an EmbeddedStore; it starts on ``async with`` or on the first iteration."""

    def __init__(
        self,
        store: EmbeddedStore,
        kind: str,
        namespace: str | None,
        start: int | None,
        selector: LabelSelector,
        bookmark_interval: float | None = None,
    ) -> None:
        self._store = store
        self._kind, self._namespace, self._start, self._selector = kind, namespace, start, selector
        self._bookmark_interval = bookmark_interval
        self._queue: asyncio.Queue[WatchEvent | StoreError] = asyncio.Queue()
        self._listener: Listener | None = None
        self._started = self._closed = self._entered = False
        self._failure: StoreError | None = None

    async def __aenter__(self) -> Self:
        self._entered = True
        await self._open()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    def __aiter__(self) -> Self:
        return self

    async def __anext__(self) -> WatchEvent:
        await self._open()
        if self._failure is not None:
            raise self._failure
        if self._closed:
            raise StopAsyncIteration
        try:
            item = await self._queue.get()
        except asyncio.CancelledError:
            if not self._entered:  # nothing else would release a plainly iterated watch
                self._release()
            raise
        if self._closed:
            raise StopAsyncIteration
        if isinstance(item, StoreError):
            self._failure = item
            raise item
        return item

    async def aclose(self) -> None:
        stopped = self._release()
        if stopped is not None:
            await asyncio.wait([stopped])

    def __del__(self) -> None:
        listener = self._listener
        if listener is not None and not self._closed:
            store = self._store
            with contextlib.suppress(RuntimeError):  # the loop is already closed
                listener.loop.call_soon_threadsafe(store._unregister, listener)

    async def _open(self) -> None:
        if self._started:
            return
        self._started = True
        try:
            if self._start is None:
                revision, objects = await self._store._snapshot(
                    self._kind, self._namespace, self._selector
                )
                for obj in objects:
                    self._queue.put_nowait(WatchEvent(EventType.ADDED, obj))
            else:
                revision = self._start
            if not self._closed:
                self._listener = self._store._register(
                    Listener(
                        self._kind,
                        self._namespace,
                        self._selector,
                        revision,
                        self._queue,
                        asyncio.get_running_loop(),
                        self._bookmark_interval,
                        bookmarked=revision,
                    )
                )
        except BaseException:
            self._closed = True
            raise

    def _release(self) -> asyncio.Task[None] | None:
        self._closed = True
        listener, self._listener = self._listener, None
        self._queue.put_nowait(StoreClosed("the watch was closed"))  # wakes a waiting reader
        return self._store._unregister(listener) if listener is not None else None
