"""An in-memory store with the port's semantics, for tests on fake loop time (looptime).

The embedded store does its SQL on a worker thread; looptime would advance the fake clock while
the loop waits for that thread, so timers could fire "during" a store call. This store answers
on the loop itself. It reuses the store's pure write rules, so writes behave as on every adapter
(compare-and-swap on resourceVersion, status subresource, merge patches, finalizers).
"""

from __future__ import annotations

import asyncio
import copy
import itertools
import json
from collections.abc import AsyncIterator, Callable
from types import TracebackType
from typing import Self

from scalable_topics.store import (
    DEFAULT_KINDS,
    EventType,
    NotFound,
    Object,
    ObjectList,
    StoreError,
    UnknownKind,
    WatchEvent,
    parse_selector,
)
from scalable_topics.store import write_rules as rules
from scalable_topics.store.embedded_watch import Change, event_type_for
from scalable_topics.store.selectors import LabelSelector

_NOW = "2026-01-01T00:00:00Z"


class MemoryStore:
    def __init__(self) -> None:
        self._objects: dict[tuple[str, str, str], Object] = {}
        self._revision = 0
        self._history: list[Change] = []
        self._watches: set[MemoryWatch] = set()
        self._uids = itertools.count(1)
        self.unavailable = False  # every call fails, as if the store could not be reached
        self.writes = 0

    # -- reads ----------------------------------------------------------------------------------

    async def get(self, kind: str, namespace: str, name: str) -> Object:
        await self._call(kind)
        found = self._objects.get((kind, namespace, name))
        if found is None:
            raise NotFound(kind, namespace, name)
        return copy.deepcopy(found)

    async def list(
        self, kind: str, namespace: str | None = None, label_selector: str | None = None
    ) -> ObjectList:
        await self._call(kind)
        selector = parse_selector(label_selector)
        items = [
            copy.deepcopy(obj)
            for (k, ns, _), obj in sorted(self._objects.items())
            if k == kind
            and (not namespace or ns == namespace)
            and selector.matches(rules.labels(obj))
        ]
        return ObjectList(items, str(self._revision))

    # -- writes ---------------------------------------------------------------------------------

    async def create(self, obj: Object) -> Object:
        request = rules.private_copy(obj)
        info = rules.validate(request, DEFAULT_KINDS)
        return await self._write(
            request, rules.create(request, info, f"uid-{next(self._uids)}", _NOW)
        )

    async def replace(self, obj: Object) -> Object:
        request = rules.private_copy(obj)
        return await self._write(
            request, rules.replace(request, rules.validate(request, DEFAULT_KINDS))
        )

    async def replace_status(self, obj: Object) -> Object:
        request = rules.private_copy(obj)
        info = rules.validate(request, DEFAULT_KINDS)
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
        return self._apply(
            kind, namespace, name, rules.delete(kind, namespace, name, resource_version, _NOW)
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
        await self._call(kind)
        rule = rules.patch(
            kind,
            namespace,
            name,
            rules.private_copy(patch),
            DEFAULT_KINDS[kind],
            DEFAULT_KINDS,
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
        key = (kind, namespace, name)
        stored = self._objects.get(key)
        previous = None if stored is None else dict(rules.labels(stored))
        outcome = rule(copy.deepcopy(stored) if stored is not None else None)
        if outcome.type is None:
            return copy.deepcopy(outcome.object)
        self._revision += 1
        self.writes += 1
        body = copy.deepcopy(outcome.object)
        rules.metadata(body)["resourceVersion"] = str(self._revision)
        if outcome.type is EventType.DELETED:
            self._objects.pop(key, None)
        else:
            self._objects[key] = body
        change = Change(
            self._revision,
            kind,
            namespace,
            outcome.type,
            rules.encode(body),
            dict(rules.labels(body)),
            previous if outcome.type is EventType.MODIFIED else None,
        )
        self._history.append(change)
        for watch in list(self._watches):
            watch.offer(change)
        return copy.deepcopy(body)

    # -- watches --------------------------------------------------------------------------------

    def watch(
        self,
        kind: str,
        namespace: str | None = None,
        resource_version: str | None = None,
        label_selector: str | None = None,
    ) -> MemoryWatch:
        if kind not in DEFAULT_KINDS:
            raise UnknownKind(kind)
        watch = MemoryWatch(self, kind, namespace or None, parse_selector(label_selector))
        if resource_version:
            for change in self._history:
                if change.revision > int(resource_version):
                    watch.offer(change)
        else:
            for (k, ns, _), obj in sorted(self._objects.items()):
                in_scope = k == kind and (watch.namespace is None or ns == watch.namespace)
                if in_scope and watch.selector.matches(rules.labels(obj)):
                    watch.queue.put_nowait(WatchEvent(EventType.ADDED, copy.deepcopy(obj)))
        self._watches.add(watch)
        return watch

    def forget(self, watch: MemoryWatch) -> None:
        self._watches.discard(watch)

    async def close(self) -> None:
        self._watches.clear()

    async def _call(self, kind: str) -> None:
        await asyncio.sleep(0)
        if kind not in DEFAULT_KINDS:
            raise UnknownKind(kind)
        if self.unavailable:
            raise StoreError("the store cannot be reached")


class MemoryWatch:
    def __init__(
        self, store: MemoryStore, kind: str, namespace: str | None, selector: LabelSelector
    ) -> None:
        self.store = store
        self.kind = kind
        self.namespace = namespace
        self.selector = selector
        self.queue: asyncio.Queue[WatchEvent] = asyncio.Queue()

    def offer(self, change: Change) -> None:
        if change.kind != self.kind or (self.namespace and change.namespace != self.namespace):
            return
        event_type = event_type_for(change, self.selector)
        if event_type is not None:
            self.queue.put_nowait(WatchEvent(event_type, json.loads(change.body)))

    def __aiter__(self) -> AsyncIterator[WatchEvent]:
        return self._events()

    async def _events(self) -> AsyncIterator[WatchEvent]:
        while True:
            yield await self.queue.get()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        self.store.forget(self)
