"""An in-memory store with the port's semantics, for tests on fake loop time (looptime).

The embedded store does its SQL on a worker thread; looptime would advance the fake clock while
the loop waits for that thread, so timers could fire "during" a store call. This store answers
on the loop itself. It reuses the store's pure write rules, so writes behave as on every adapter
(compare-and-swap on resourceVersion, status subresource, merge patches, finalizers), and it
passes the store contract suite (tests/store/test_store_contract.py) like any adapter.

Several MemoryStore instances may share one MemoryBackend, as connections share a file: each
has its own clock, closes on its own and sees every instance's writes. A watch's events are
queued when the write happens, so a watch never lags behind compaction.
"""

from __future__ import annotations

import asyncio
import copy
import itertools
import json
from collections import deque
from collections.abc import Callable, Mapping
from types import TracebackType
from typing import Self

from scalable_topics.model.clock import Clock, SystemClock
from scalable_topics.model.timefmt import format_time
from scalable_topics.store import (
    DEFAULT_KINDS,
    EventType,
    Expired,
    Invalid,
    KindInfo,
    NotFound,
    Object,
    ObjectList,
    StoreClosed,
    StoreError,
    UnknownKind,
    WatchEvent,
    parse_selector,
)
from scalable_topics.store import write_rules as rules
from scalable_topics.store.embedded_watch import Change, event_type_for
from scalable_topics.store.selectors import LabelSelector

Key = tuple[str, str, str]


class MemoryBackend:
    """What every MemoryStore on it shares: objects, the revision counter, recent history."""

    def __init__(self, *, history_limit: int = 10_000) -> None:
        if history_limit < 1:
            raise ValueError(f"history_limit must be at least 1, not {history_limit}")
        self.history_limit = history_limit
        self.objects: dict[Key, Object] = {}
        self.revision = 0
        self.compacted = 0  # changes up to here are gone from history
        self.history: deque[Change] = deque()
        self.watches: set[MemoryWatch] = set()
        self.uids = itertools.count(1)


class MemoryStore:
    def __init__(
        self,
        backend: MemoryBackend | None = None,
        *,
        clock: Clock | None = None,
        kinds: Mapping[str, KindInfo] = DEFAULT_KINDS,
        bookmark_interval: float = 1.0,
    ) -> None:
        self.backend = backend or MemoryBackend()
        self._bookmark_interval = bookmark_interval
        self._clock: Clock = clock or SystemClock()
        self._kinds = kinds
        self._closed = False
        self._watches: set[MemoryWatch] = set()
        self.unavailable = False  # every call fails, as if the store could not be reached
        self.writes = 0

    # -- reads ----------------------------------------------------------------------------------

    async def get(self, kind: str, namespace: str, name: str) -> Object:
        await self._call(kind)
        found = self.backend.objects.get((kind, namespace, name))
        if found is None:
            raise NotFound(kind, namespace, name)
        return copy.deepcopy(found)

    async def list(
        self, kind: str, namespace: str | None = None, label_selector: str | None = None
    ) -> ObjectList:
        await self._call(kind)
        selector = parse_selector(label_selector)
        return ObjectList(
            self._matching(kind, namespace or None, selector), str(self.backend.revision)
        )

    # -- writes ---------------------------------------------------------------------------------

    async def create(self, obj: Object) -> Object:
        request = rules.private_copy(obj)
        info = rules.validate(request, self._kinds)
        now = format_time(self._clock.now())
        uid = f"00000000-0000-4000-8000-{next(self.backend.uids):012d}"
        return await self._write(request, rules.create(request, info, uid, now))

    async def replace(self, obj: Object) -> Object:
        request = rules.private_copy(obj)
        return await self._write(
            request, rules.replace(request, rules.validate(request, self._kinds))
        )

    async def replace_status(self, obj: Object) -> Object:
        request = rules.private_copy(obj)
        info = rules.validate(request, self._kinds)
        return await self._write(request, rules.replace_status(request, info))

    async def patch(
        self,
        kind: str,
        namespace: str,
        name: str,
        patch: Object,
        resource_version: str | None = None,
    ) -> Object:
        return await self._patch(kind, namespace, name, patch, resource_version, status=False)

    async def patch_status(
        self,
        kind: str,
        namespace: str,
        name: str,
        patch: Object,
        resource_version: str | None = None,
    ) -> Object:
        return await self._patch(kind, namespace, name, patch, resource_version, status=True)

    async def delete(
        self, kind: str, namespace: str, name: str, resource_version: str | None = None
    ) -> Object:
        await self._call(kind)
        now = format_time(self._clock.now())
        return self._apply(
            kind, namespace, name, rules.delete(kind, namespace, name, resource_version, now)
        )

    async def _patch(
        self,
        kind: str,
        namespace: str,
        name: str,
        patch: Object,
        resource_version: str | None,
        *,
        status: bool,
    ) -> Object:
        info = await self._call(kind)
        if not isinstance(patch, dict):
            raise Invalid(f"a merge patch must be a JSON object, not {type(patch).__name__}")
        rule = rules.patch(
            kind,
            namespace,
            name,
            rules.private_copy(patch),
            info,
            self._kinds,
            resource_version,
            status=status,
        )
        return self._apply(kind, namespace, name, rule)

    async def _write(
        self, request: Object, rule: Callable[[Object | None], rules.Outcome]
    ) -> Object:
        kind, namespace, name = rules.identity(request)
        await self._call(kind)
        return self._apply(kind, namespace, name, rule)

    def _apply(
        self, kind: str, namespace: str, name: str, rule: Callable[[Object | None], rules.Outcome]
    ) -> Object:
        backend = self.backend
        key = (kind, namespace, name)
        stored = backend.objects.get(key)
        previous = None if stored is None else dict(rules.labels(stored))
        outcome = rule(copy.deepcopy(stored) if stored is not None else None)
        if outcome.type is None:
            return copy.deepcopy(outcome.object)
        backend.revision += 1
        self.writes += 1
        body = copy.deepcopy(outcome.object)
        rules.metadata(body)["resourceVersion"] = str(backend.revision)
        if outcome.type is EventType.DELETED:
            backend.objects.pop(key, None)
        else:
            backend.objects[key] = body
        change = Change(
            backend.revision,
            kind,
            namespace,
            outcome.type,
            rules.encode(body),
            dict(rules.labels(body)),
            previous if outcome.type is EventType.MODIFIED else None,
        )
        backend.history.append(change)
        while len(backend.history) > backend.history_limit:
            backend.compacted = backend.history.popleft().revision
        for watch in list(backend.watches):
            watch.offer(change)
        return copy.deepcopy(body)

    # -- watches --------------------------------------------------------------------------------

    def watch(
        self,
        kind: str,
        namespace: str | None = None,
        resource_version: str | None = None,
        label_selector: str | None = None,
        allow_bookmarks: bool = False,
    ) -> MemoryWatch:
        self._check_open()
        self._kind(kind)
        selector = parse_selector(label_selector)
        start: int | None = None
        if resource_version:
            if not resource_version.isdecimal():
                raise Invalid(f"resourceVersion {resource_version!r} is not a store revision")
            start = int(resource_version)
        bookmarks = self._bookmark_interval if allow_bookmarks else None
        return MemoryWatch(self, kind, namespace or None, start, selector, bookmarks)

    def _open_watch(self, watch: MemoryWatch, start: int | None) -> None:
        """Queue what ``watch`` must see first, then every later change as it happens."""
        self._check_open()
        backend = self.backend
        if start is None:
            for obj in self._matching(watch.kind, watch.namespace, watch.selector):
                watch.queue.put_nowait(WatchEvent(EventType.ADDED, obj))
        elif start < backend.compacted:
            raise Expired(str(start), str(backend.compacted))
        else:
            for change in backend.history:
                if change.revision > start:
                    watch.offer(change)
        backend.watches.add(watch)
        self._watches.add(watch)

    def _forget(self, watch: MemoryWatch) -> None:
        self.backend.watches.discard(watch)
        self._watches.discard(watch)

    async def close(self) -> None:
        """Later calls raise StoreClosed; open watches raise it once their queue is read."""
        if self._closed:
            return
        self._closed = True
        for watch in list(self._watches):
            self._forget(watch)
            watch.queue.put_nowait(StoreClosed("the store was closed"))

    # -- helpers --------------------------------------------------------------------------------

    def _matching(self, kind: str, namespace: str | None, selector: LabelSelector) -> list[Object]:
        return [
            copy.deepcopy(obj)
            for (k, ns, _), obj in sorted(self.backend.objects.items())
            if k == kind
            and (namespace is None or ns == namespace)
            and selector.matches(rules.labels(obj))
        ]

    def _check_open(self) -> None:
        if self._closed:
            raise StoreClosed("the store is closed")

    def _kind(self, kind: str) -> KindInfo:
        info = self._kinds.get(kind)
        if info is None:
            raise UnknownKind(kind, list(self._kinds))
        return info

    async def _call(self, kind: str) -> KindInfo:
        await asyncio.sleep(0)  # a real store call yields to the loop too
        self._check_open()
        info = self._kind(kind)
        if self.unavailable:
            raise StoreError("the store cannot be reached")
        return info


class MemoryWatch:
    """A watch on a MemoryStore; it starts on ``async with`` or on the first iteration."""

    def __init__(
        self,
        store: MemoryStore,
        kind: str,
        namespace: str | None,
        start: int | None,
        selector: LabelSelector,
        bookmark_interval: float | None = None,
    ) -> None:
        self.store = store
        self.kind = kind
        self.bookmark_interval = bookmark_interval
        self._bookmarked = start or 0
        self._bookmarked_at = float("-inf")
        self.namespace = namespace
        self.selector = selector
        self.queue: asyncio.Queue[WatchEvent | StoreError] = asyncio.Queue()
        self._start = start
        self._started = self._closed = self._entered = False
        self._failure: StoreError | None = None

    def offer(self, change: Change) -> None:
        ours = change.kind == self.kind and not (
            self.namespace and change.namespace != self.namespace
        )
        event_type = event_type_for(change, self.selector) if ours else None
        if event_type is not None:
            self.queue.put_nowait(WatchEvent(event_type, json.loads(change.body)))
        elif self.bookmark_interval is not None:
            self._bookmark(change.revision)

    def _bookmark(self, revision: int) -> None:
        """A change it does not see moved the history on: say how far it was served, at most
        once an interval."""
        assert self.bookmark_interval is not None
        now = asyncio.get_running_loop().time()
        if revision > self._bookmarked and now - self._bookmarked_at >= self.bookmark_interval:
            self._bookmarked, self._bookmarked_at = revision, now
            info = self.store._kind(self.kind)
            bookmark = {
                "apiVersion": info.api_version,
                "kind": info.kind,
                "metadata": {"resourceVersion": str(revision)},
            }
            self.queue.put_nowait(WatchEvent(EventType.BOOKMARK, bookmark))

    def __aiter__(self) -> Self:
        return self

    async def __anext__(self) -> WatchEvent:
        self._open()
        if self._failure is not None:
            raise self._failure
        if self._closed:
            raise StopAsyncIteration
        try:
            item = await self.queue.get()
        except asyncio.CancelledError:
            if not self._entered:  # nothing else would release a plainly iterated watch
                self._release()
            raise
        if self._closed:
            raise StopAsyncIteration
        if isinstance(item, StoreError):
            self._failure = item
            self.store._forget(self)
            raise item
        return item

    async def __aenter__(self) -> Self:
        self._entered = True
        self._open()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        self._release()

    def _open(self) -> None:
        if self._started:
            return
        self._started = True
        try:
            self.store._open_watch(self, self._start)
        except BaseException:
            self._closed = True
            raise

    def _release(self) -> None:
        self._closed = True
        self.store._forget(self)
        self.queue.put_nowait(StoreClosed("the watch was closed"))  # wakes a waiting reader
