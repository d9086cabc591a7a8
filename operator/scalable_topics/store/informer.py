"""An informer: one kind's objects listed, then watched, and kept in memory (client-go's shared
informer, on the store port).

It lists the kind, then watches from the list's resourceVersion, and keeps every object in a
cache indexed by namespace/name and by any index function given to it. When the history it
would resume from is gone (Expired, the API server's 410) or the watch fails, it lists again,
with a backoff (exponential, with jitter; reset once a watch delivers), and turns the
difference between the old cache and the new list into events, so a handler never misses a
deletion that happened during the gap. BOOKMARK events only move the place to resume from.

Handlers are plain functions called on the event loop, in revision order, after the cache has
the change: they must not block (set a flag, wake a task). A handler subscribes to every event,
to one object's, or to one value of an index, so that N per-topic subscribers cost one
dictionary lookup per event, not N calls. A failing handler is logged and skipped.

Reads (``get``, ``list``, ``by_index``) come from the cache: they may lag the store by the
watch's delay. Writes go to the store as compare-and-swaps on a resourceVersion read here, so a
stale read costs a Conflict, never a lost update; ``wait_changed`` waits for the cache to move
past a version a Conflict proved old.
"""

from __future__ import annotations

import asyncio
import builtins
import contextlib
import logging
import random
from collections import defaultdict
from collections.abc import Callable, Hashable, Iterable, MutableMapping
from dataclasses import dataclass
from typing import Any

from ..tasks import cancel_and_wait
from .errors import Expired, NotFound, StoreClosed, StoreError
from .port import EventType, Object, Store, WatchEvent

log = logging.getLogger(__name__)

Key = tuple[str, str]  # namespace, name
IndexFunction = Callable[[Object], Iterable[Hashable]]

BACKOFF_FIRST, BACKOFF_MAX = 0.2, 30.0


@dataclass(frozen=True, slots=True)
class Change:
    """One change of the cache. ``old`` is None for ADDED, ``new`` is None for DELETED."""

    type: EventType
    key: Key
    old: Object | None
    new: Object | None

    @property
    def object(self) -> Object:
        """The object as it is now, or as it was last seen when deleted."""
        found = self.new if self.new is not None else self.old
        assert found is not None
        return found


Handler = Callable[[Change], None]
Unsubscribe = Callable[[], None]


def key_of(obj: Object) -> Key:
    metadata = obj["metadata"]
    return str(metadata.get("namespace") or ""), str(metadata["name"])


def resource_version_of(obj: Object) -> str:
    return str(obj["metadata"].get("resourceVersion", ""))


def _version(obj: Object | None) -> str | None:
    return None if obj is None else resource_version_of(obj)


def _moved_from(version: str | None) -> Callable[[Object | None], bool]:
    return lambda obj: _version(obj) != version


class Informer:
    """One kind (in one namespace, or all), listed, watched and cached."""

    def __init__(
        self,
        store: Store,
        kind: str,
        namespace: str | None = None,
        label_selector: str | None = None,
        *,
        backoff_first: float = BACKOFF_FIRST,
        backoff_max: float = BACKOFF_MAX,
        jitter: Callable[[], float] = random.random,
    ) -> None:
        if not 0 < backoff_first <= backoff_max:
            raise ValueError(
                f"the relist backoff needs 0 < first <= max, not {backoff_first}, {backoff_max}"
            )
        self.kind = kind
        self._store = store
        self._namespace = namespace
        self._selector = label_selector
        self._backoff_first, self._backoff_max = backoff_first, backoff_max
        self._jitter = jitter
        self._cache: dict[Key, Object] = {}
        self._index_functions: dict[str, IndexFunction] = {}
        self._indexes: dict[str, defaultdict[Hashable, set[Key]]] = {}
        self._everyone: list[Handler] = []
        self._by_key: defaultdict[Key, list[Handler]] = defaultdict(list)
        self._by_value: defaultdict[tuple[str, Hashable], list[Handler]] = defaultdict(list)
        self._synced = asyncio.Event()
        # Whether the cache follows the store now: False from a failed list or watch until a
        # list or watch succeeds again (what a readiness probe reports).
        self._following = False
        self.last_error: str | None = None
        self._task: asyncio.Task[None] | None = None
        self._resource_version = ""
        # What it cost, for benchmarks and metrics.
        self.events_received = 0
        self.deliveries = 0
        self.lists = 0

    # -- running --------------------------------------------------------------------------------

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(
                self._run(), name=f"informer {self.kind}"
            )

    async def stop(self) -> None:
        if self._task is not None:
            await cancel_and_wait(self._task)

    @property
    def synced(self) -> bool:
        """Whether the first list has arrived: before it, the cache says nothing."""
        return self._synced.is_set()

    async def wait_synced(self) -> None:
        if not self._synced.is_set() and self._task is not None and self._task.done():
            raise StoreError(f"the {self.kind} informer has stopped")
        await self._synced.wait()

    @property
    def following(self) -> bool:
        """Whether the cache is synced and its watch open: False while the store cannot be
        reached (``last_error`` says why), so the cache may be falling behind."""
        return self._following and self._synced.is_set()

    @property
    def store(self) -> Store:
        return self._store

    @property
    def resource_version(self) -> str:
        """The store revision the cache reflects (every change up to it is in)."""
        return self._resource_version

    # -- reading the cache ----------------------------------------------------------------------

    def get(self, namespace: str, name: str) -> Object | None:
        return self._cache.get((namespace, name))

    def list(self, namespace: str | None = None) -> builtins.list[Object]:
        if namespace is None:
            return list(self._cache.values())
        return [obj for (ns, _), obj in self._cache.items() if ns == namespace]

    def __len__(self) -> int:
        return len(self._cache)

    def add_index(self, name: str, function: IndexFunction) -> None:
        """Index the objects by ``function`` (the values an object is found under)."""
        if name in self._index_functions:
            raise ValueError(f"the {self.kind} informer has an index {name!r} already")
        self._index_functions[name] = function
        index = self._indexes[name] = defaultdict(set)
        for key, obj in self._cache.items():
            for value in self._values(function, obj):
                index[value].add(key)

    def by_index(self, name: str, value: Hashable) -> builtins.list[Object]:
        keys = self._indexes[name].get(value, ())
        return [self._cache[key] for key in keys]

    def index_values(self, name: str) -> builtins.list[Hashable]:
        return [value for value, keys in self._indexes[name].items() if keys]

    # -- subscribing ----------------------------------------------------------------------------

    def subscribe(self, handler: Handler) -> Unsubscribe:
        """Every change of every object."""
        return _subscribed(self._everyone, handler)

    def subscribe_key(self, key: Key, handler: Handler) -> Unsubscribe:
        """Every change of one object (namespace, name)."""
        return _subscribed(self._by_key[key], handler, self._by_key, key)

    def subscribe_index(self, name: str, value: Hashable, handler: Handler) -> Unsubscribe:
        """Every change of an object found under ``value`` of index ``name``, before or after
        the change (so leaving the index is seen too)."""
        if name not in self._index_functions:
            raise ValueError(f"the {self.kind} informer has no index {name!r}")
        return _subscribed(self._by_value[(name, value)], handler, self._by_value, (name, value))

    async def wait_changed(
        self, namespace: str, name: str, resource_version: str, at_most: float | None = 10.0
    ) -> None:
        """Return once the cached object is no longer at ``resource_version`` (or is gone):
        after a Conflict, the moment a fresh read is worth making. ``at_most`` bounds the wait
        (a watch that is reconnecting catches up later; reading again then costs little)."""

        def moved(obj: Object | None) -> bool:
            return obj is None or resource_version_of(obj) != resource_version

        await self._wait_for(namespace, name, moved, at_most)

    async def wait_present(self, namespace: str, name: str, at_most: float | None = 10.0) -> bool:
        """Wait (at most ``at_most`` seconds) for the object to be in the cache; True if it is:
        for an object the store was just seen to hold."""
        await self._wait_for(namespace, name, lambda obj: obj is not None, at_most)
        return (namespace, name) in self._cache

    async def catch_up(self, namespace: str, name: str, at_most: float = 10.0) -> Object | None:
        """Read the object from the store and wait (at most ``at_most`` seconds) until the cache
        holds that version; the cached object then. For the rare request the cache cannot
        answer yet (an object created or changed a moment ago), not for every read."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + at_most
        while True:
            try:
                stored: Object | None = await self._store.get(self.kind, namespace, name)
            except NotFound:
                stored = None
            cached = self._cache.get((namespace, name))
            left = deadline - loop.time()
            if _version(stored) == _version(cached) or left <= 0:
                return cached
            await self._wait_for(namespace, name, _moved_from(_version(cached)), left)

    async def _wait_for(
        self,
        namespace: str,
        name: str,
        done: Callable[[Object | None], bool],
        at_most: float | None,
    ) -> None:
        key = (namespace, name)
        if done(self._cache.get(key)):
            return
        reached = asyncio.Event()

        def check(change: Change) -> None:
            if done(change.new):
                reached.set()

        unsubscribe = self.subscribe_key(key, check)
        try:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(at_most):
                    await reached.wait()
        finally:
            unsubscribe()

    def written(self, replaced: str | None, obj: Object) -> None:
        """This process wrote ``obj`` by a compare-and-swap on ``replaced`` (None: created it).
        When the cache still holds the replaced version (or, for a create, nothing), the
        write cannot have been overtaken: the cache takes it now, so that the writer's next
        read sees its own write; the watch event that follows changes nothing. A watch that
        resumes after a break replays what it missed in order, so for a write made during
        the break the cache goes back to the older versions until the replay reaches it: a
        compare-and-swap meanwhile costs a Conflict (a lease release reads the store then)."""
        key = key_of(obj)
        current = self._cache.get(key)
        current_version = None if current is None else resource_version_of(current)
        if current_version != replaced or not self._synced.is_set():
            return
        self._cache[key] = obj
        self._reindex(key, current, obj)
        kind = EventType.ADDED if current is None else EventType.MODIFIED
        self._deliver(Change(kind, key, current, obj))

    # -- following the store --------------------------------------------------------------------

    async def _run(self) -> None:
        delay = self._backoff_first
        resume_from: str | None = None
        while True:
            try:
                if resume_from is None:
                    listing = await self._store.list(self.kind, self._namespace, self._selector)
                    self.lists += 1
                    self._replace(listing.items)
                    resume_from = self._resource_version = listing.resource_version
                    self._synced.set()
                    self._followed()
                async with self._store.watch(
                    self.kind,
                    self._namespace,
                    resource_version=resume_from,
                    label_selector=self._selector,
                    allow_bookmarks=True,
                ) as events:
                    self._followed()
                    async for event in events:
                        resume_from = self._resource_version = event.resource_version
                        if event.type is not EventType.BOOKMARK:
                            self.events_received += 1
                            self._apply(event)
                        delay = self._backoff_first
                continue  # the watch ended (a server timeout): resume where it stopped
            except StoreClosed:
                log.info("the %s informer stops: the store is closed", self.kind)
                self._lost("the store is closed")
                return
            except Expired:
                log.info("the %s informer lists again: its resourceVersion expired", self.kind)
                resume_from = None
            except StoreError as error:
                log.warning("the %s informer's watch failed (%s); retrying", self.kind, error)
                self._lost(str(error))
            except Exception as error:
                # A bug (in an adapter, say) must not leave every reader of the cache stalled.
                log.exception("the %s informer failed; listing again", self.kind)
                self._lost(f"{type(error).__name__}: {error}")
                resume_from = None
            await asyncio.sleep(delay * (0.5 + self._jitter()))
            delay = min(delay * 2, self._backoff_max)

    def _followed(self) -> None:
        self._following, self.last_error = True, None

    def _lost(self, reason: str) -> None:
        self._following, self.last_error = False, reason

    def _apply(self, event: WatchEvent) -> None:
        key = key_of(event.object)
        old = self._cache.get(key)
        if (
            old is not None
            and event.type is not EventType.DELETED
            and resource_version_of(old) == event.resource_version
        ):
            return  # a write of this process, taken already (see ``written``)
        if event.type is EventType.DELETED:
            if old is None:
                return
            del self._cache[key]
            self._reindex(key, old, None)
            self._deliver(Change(EventType.DELETED, key, old, None))
            return
        self._cache[key] = event.object
        self._reindex(key, old, event.object)
        kind = EventType.ADDED if old is None else EventType.MODIFIED
        self._deliver(Change(kind, key, old, event.object))

    def _replace(self, items: builtins.list[Object]) -> None:
        """Take a fresh list; tell handlers what differs from the cache."""
        listed = {key_of(obj): obj for obj in items}
        previous, self._cache = self._cache, listed
        for name, function in self._index_functions.items():
            index = self._indexes[name] = defaultdict(set)
            for key, obj in listed.items():
                for value in self._values(function, obj):
                    index[value].add(key)
        for key, gone in previous.items():
            if key not in listed:
                self._deliver(Change(EventType.DELETED, key, gone, None))
        for key, obj in listed.items():
            old = previous.get(key)
            if old is None:
                self._deliver(Change(EventType.ADDED, key, None, obj))
            elif resource_version_of(old) != resource_version_of(obj):
                self._deliver(Change(EventType.MODIFIED, key, old, obj))

    def _reindex(self, key: Key, old: Object | None, new: Object | None) -> None:
        for name, function in self._index_functions.items():
            before = self._values(function, old) if old is not None else set()
            after = self._values(function, new) if new is not None else set()
            index = self._indexes[name]
            for value in before - after:
                keys = index.get(value)
                if keys is not None:
                    keys.discard(key)
                    if not keys:
                        del index[value]
            for value in after - before:
                index[value].add(key)

    def _values(self, function: IndexFunction, obj: Object) -> set[Hashable]:
        try:
            return set(function(obj))
        except (KeyError, TypeError, ValueError, AttributeError):
            return set()  # a malformed object is in no index

    def _deliver(self, change: Change) -> None:
        handlers = [*self._everyone, *self._by_key.get(change.key, ())]
        if self._by_value:
            values: set[tuple[str, Hashable]] = set()
            for name, function in self._index_functions.items():
                for obj in (change.old, change.new):
                    if obj is not None:
                        values.update((name, value) for value in self._values(function, obj))
            for value in values:
                handlers.extend(self._by_value.get(value, ()))
        for handler in handlers:
            self.deliveries += 1
            try:
                handler(change)
            except Exception:
                log.exception("a %s informer handler failed on %s", self.kind, change.key)


def _subscribed(
    handlers: builtins.list[Handler],
    handler: Handler,
    owner: MutableMapping[Any, list[Handler]] | None = None,
    key: Any = None,
) -> Unsubscribe:
    handlers.append(handler)

    def unsubscribe() -> None:
        if handler in handlers:
            handlers.remove(handler)
        if owner is not None and not handlers and owner.get(key) is handlers:
            del owner[key]

    return unsubscribe
