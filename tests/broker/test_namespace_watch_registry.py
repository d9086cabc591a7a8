"""The namespace watch registry on its own (broker/namespace_watch.py), over a topic source
the test drives change by change: coalescing, re-created topics, a slow client, changes before
the first list, a store that cannot be read, shutdown, and what a change costs."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from scalable_topics.broker.errors import BrokerError
from scalable_topics.broker.namespace_watch import (
    COALESCE_SECONDS,
    NamespaceWatch,
    NamespaceWatchRegistry,
)
from scalable_topics.protocol import (
    Command,
    ErrorCode,
    NamespaceUpdate,
    TopicsDiff,
    TopicsSnapshot,
    WatchEnded,
)
from scalable_topics.store import EventType
from scalable_topics.store.informer import Change, Handler, Unsubscribe

NS, OTHER_NS = "shop", "elsewhere"
WAIT = 20.0  # bounds a failing test only
MAX_FRAME = 1 << 20


class Topics:
    """A ScalableTopic informer the test writes to: each write is a change, delivered at once
    to the subscribers after the cache has it, as the informer delivers its."""

    def __init__(self, *, synced: bool = True) -> None:
        self.objects: dict[tuple[str, str], dict[str, Any]] = {}
        self.handlers: list[Handler] = []
        self.last_error: str | None = None
        self._synced = asyncio.Event()
        if synced:
            self._synced.set()
        self._uids = itertools.count(1)

    @property
    def synced(self) -> bool:
        return self._synced.is_set()

    def sync(self) -> None:
        self._synced.set()

    async def wait_synced(self) -> None:
        await self._synced.wait()

    def subscribe(self, handler: Handler) -> Unsubscribe:
        self.handlers.append(handler)
        return lambda: self.handlers.remove(handler)

    def list(self, namespace: str | None = None) -> list[dict[str, Any]]:
        return [o for (ns, _), o in self.objects.items() if namespace in (None, ns)]

    def put(self, name: str, namespace: str = NS, **properties: str) -> None:
        key = (namespace, name)
        old = self.objects.get(key)
        uid = old["metadata"]["uid"] if old else f"uid-{next(self._uids)}"
        new = {
            "metadata": {"name": name, "namespace": namespace, "uid": uid},
            "spec": {"properties": properties},
        }
        self.objects[key] = new
        self._deliver(Change(EventType.MODIFIED if old else EventType.ADDED, key, old, new))

    def delete(self, name: str, namespace: str = NS) -> None:
        key = (namespace, name)
        old = self.objects.pop(key)
        self._deliver(Change(EventType.DELETED, key, old, None))

    def _deliver(self, change: Change) -> None:
        for handler in list(self.handlers):
            handler(change)


class Sink:
    """What a session would send for one connection; ``gate`` cleared holds every send (a
    client that does not read)."""

    def __init__(self) -> None:
        self.frames: asyncio.Queue[Command] = asyncio.Queue()
        self.ended: list[NamespaceWatch] = []
        self.gate = asyncio.Event()
        self.gate.set()
        self.sending = asyncio.Event()

    async def send(self, command: Command) -> None:
        self.sending.set()
        await self.gate.wait()
        self.frames.put_nowait(command)

    async def next(self) -> Command:
        async with asyncio.timeout(WAIT):
            return await self.frames.get()


@pytest.fixture
def topics() -> Topics:
    return Topics()


@pytest.fixture
async def registry(topics: Topics) -> AsyncIterator[NamespaceWatchRegistry]:
    started = NamespaceWatchRegistry(topics)
    await started.start()
    try:
        yield started
    finally:
        await started.stop()


def open_watch(
    registry: NamespaceWatchRegistry,
    sink: Sink,
    watch_id: int = 1,
    namespace: str = NS,
    current_hash: int | None = None,
    **filters: str,
) -> NamespaceWatch:
    return registry.watch(
        namespace, filters, watch_id, current_hash, sink.send, sink.ended.append, MAX_FRAME
    )


def snapshot(*names: str) -> NamespaceUpdate:
    return NamespaceUpdate(1, snapshot=TopicsSnapshot(names))


def diff(added: tuple[str, ...] = (), removed: tuple[str, ...] = ()) -> NamespaceUpdate:
    return NamespaceUpdate(1, diff=TopicsDiff(added, removed))


# -- coalescing ----------------------------------------------------------------------------------


async def test_a_topic_created_and_deleted_within_the_window_is_never_sent(
    topics: Topics, registry: NamespaceWatchRegistry
) -> None:
    sink = Sink()
    open_watch(registry, sink)
    assert await sink.next() == snapshot()
    topics.put("orders")
    topics.delete("orders")  # the same turn of the loop: within the window
    topics.put("orders", env="prod")
    topics.put("orders", env="dev")  # updated and updated back to a member: no change either
    topics.delete("orders")
    await asyncio.sleep(0)  # let a (wrong) diff of the above start
    topics.put("payments")
    assert await sink.next() == diff(added=("payments",))


@pytest.mark.looptime
async def test_changes_within_the_window_are_one_diff_and_a_change_undone_in_it_none(
    topics: Topics, registry: NamespaceWatchRegistry
) -> None:
    """On fake loop time: changes some milliseconds apart, within the window, and past it."""
    sink = Sink()
    open_watch(registry, sink)
    assert await sink.next() == snapshot()
    topics.put("orders")
    await asyncio.sleep(COALESCE_SECONDS * 0.4)
    topics.delete("orders")
    await asyncio.sleep(COALESCE_SECONDS * 0.4)
    topics.put("payments")
    assert await sink.next() == diff(added=("payments",))
    topics.put("refunds")
    await asyncio.sleep(COALESCE_SECONDS * 2)
    topics.delete("refunds")
    assert await sink.next() == diff(added=("refunds",))
    assert await sink.next() == diff(removed=("refunds",))


async def test_a_burst_of_changes_is_one_diff(
    topics: Topics, registry: NamespaceWatchRegistry
) -> None:
    topics.put("old")
    sink = Sink()
    open_watch(registry, sink)
    assert await sink.next() == snapshot("old")
    for name in ("c", "a", "b"):
        topics.put(name)
    topics.delete("old")
    assert await sink.next() == diff(added=("a", "b", "c"), removed=("old",))


async def test_a_topic_deleted_and_created_again_is_in_both_lists(
    topics: Topics, registry: NamespaceWatchRegistry
) -> None:
    topics.put("orders")
    sink = Sink()
    open_watch(registry, sink)
    assert await sink.next() == snapshot("orders")
    topics.delete("orders")
    topics.put("orders")  # a new uid: another topic of the same name
    assert await sink.next() == diff(added=("orders",), removed=("orders",))


async def test_a_topic_updated_out_of_the_filters_leaves_the_set_and_back_in_rejoins_it(
    topics: Topics, registry: NamespaceWatchRegistry
) -> None:
    topics.put("orders", env="prod", team="a")
    topics.put("payments", env="prod")
    sink = Sink()
    open_watch(registry, sink, env="prod", team="a")
    assert await sink.next() == snapshot("orders")
    topics.put("orders", env="dev", team="a")
    assert await sink.next() == diff(removed=("orders",))
    topics.put("orders", env="prod", team="a", other="x")
    assert await sink.next() == diff(added=("orders",))
    topics.put("payments", env="prod", team="a")
    assert await sink.next() == diff(added=("payments",))


# -- a slow client -------------------------------------------------------------------------------


async def test_a_client_that_does_not_read_costs_its_lag_not_a_queue_of_updates(
    topics: Topics,
) -> None:
    registry = NamespaceWatchRegistry(topics, coalesce_seconds=0)
    await registry.start()
    try:
        topics.put("kept")
        sink = Sink()
        sink.gate.clear()
        watch = open_watch(registry, sink)
        await sink.sending.wait()  # the snapshot is stuck in the socket
        for round_ in range(20):
            for index in range(50):
                topics.put(f"t{index}", round=str(round_))
                if round_ % 2:
                    topics.delete(f"t{index}")
            await asyncio.sleep(0)  # each round's window ends: the watch is told to send
        topics.put("late")
        # 51 names changed, many times over: the watch holds one entry each.
        assert watch.lagging == 51
        sink.gate.set()
        assert await sink.next() == snapshot("kept")
        assert await sink.next() == diff(added=("late",))
    finally:
        await registry.stop()


# -- loading -------------------------------------------------------------------------------------


async def test_changes_before_the_first_list_are_in_the_snapshot() -> None:
    topics = Topics(synced=False)
    registry = NamespaceWatchRegistry(topics)
    await registry.start()
    try:
        sink = Sink()
        open_watch(registry, sink)
        topics.put("orders")
        topics.put("refunds")
        topics.delete("refunds")
        await asyncio.sleep(0)
        assert sink.frames.empty()  # nothing before the list
        topics.sync()
        assert await sink.next() == snapshot("orders")
        topics.put("payments")
        assert await sink.next() == diff(added=("payments",))
    finally:
        await registry.stop()


async def test_a_watch_on_a_broker_that_cannot_list_ends_with_service_not_ready() -> None:
    topics = Topics(synced=False)
    topics.last_error = "the store is unreachable"
    registry = NamespaceWatchRegistry(topics, sync_wait_seconds=0.01)
    await registry.start()
    try:
        sink = Sink()
        watch = open_watch(registry, sink)
        ended = await sink.next()
        assert isinstance(ended, NamespaceUpdate) and ended.ended is not None
        assert ended.ended.code is ErrorCode.SERVICE_NOT_READY
        assert "the store is unreachable" in ended.ended.message
        assert sink.ended == [watch]
        assert (registry.watch_count, registry.namespace_count) == (0, 0)
    finally:
        await registry.stop()


async def test_the_last_watch_leaving_a_set_that_is_loading_stops_the_load() -> None:
    topics = Topics(synced=False)
    registry = NamespaceWatchRegistry(topics)
    await registry.start()
    try:
        sink = Sink()
        watch = open_watch(registry, sink)
        registry.release(watch)
        await watch.close()
        assert (registry.watch_count, registry.namespace_count) == (0, 0)
        topics.sync()
        await asyncio.sleep(0)
        assert sink.frames.empty()
    finally:
        await registry.stop()


# -- the end -------------------------------------------------------------------------------------


async def test_stopping_ends_every_watch_with_service_not_ready(topics: Topics) -> None:
    registry = NamespaceWatchRegistry(topics)
    await registry.start()
    sinks = [Sink(), Sink()]
    open_watch(registry, sinks[0])
    open_watch(registry, sinks[1], namespace=OTHER_NS, env="prod")
    assert await sinks[0].next() == snapshot()
    await registry.stop()
    for sink in sinks:
        frames = [await sink.next()]
        while not sink.frames.empty():
            frames.append(sink.frames.get_nowait())
        assert frames[-1] == NamespaceUpdate(
            1, ended=WatchEnded(ErrorCode.SERVICE_NOT_READY, "the broker is shutting down")
        )
    assert (registry.watch_count, registry.namespace_count, topics.handlers) == (0, 0, [])
    with pytest.raises(BrokerError, match="shutting down"):
        open_watch(registry, Sink())


async def test_a_closed_watch_sends_nothing_more(
    topics: Topics, registry: NamespaceWatchRegistry
) -> None:
    closed, open_ = Sink(), Sink()
    watch = open_watch(registry, closed)
    open_watch(registry, open_, watch_id=1)
    assert await closed.next() == snapshot()
    assert await open_.next() == snapshot()
    registry.release(watch)
    await watch.close()
    topics.put("orders")
    assert await open_.next() == diff(added=("orders",))
    topics.put("payments")
    assert await open_.next() == diff(added=("payments",))
    assert closed.frames.empty()


# -- what a change costs -------------------------------------------------------------------------


def counters(registry: NamespaceWatchRegistry) -> tuple[int, int, int]:
    return registry.changes_received, registry.groups_visited, registry.watches_visited


def cost(registry: NamespaceWatchRegistry, change: Callable[[], None]) -> tuple[int, ...]:
    before = counters(registry)
    change()
    return tuple(after - b for after, b in zip(counters(registry), before, strict=True))


async def test_a_change_visits_the_sets_of_its_namespace_only(
    topics: Topics, registry: NamespaceWatchRegistry
) -> None:
    sinks = [Sink() for _ in range(30)]
    for index, sink in enumerate(sinks):
        filters = {"env": "prod"} if index % 3 else {}
        open_watch(registry, sink, watch_id=index, namespace=NS, **filters)
    open_watch(registry, Sink(), namespace=OTHER_NS)
    assert registry.group_count == 3 and len(topics.handlers) == 1
    # Received; tested against the namespace's two filter sets; told to the 10 + 20 watches.
    assert cost(registry, lambda: topics.put("orders", env="prod")) == (1, 2, 30)
    # A change of another namespace with no watch costs a lookup.
    assert cost(registry, lambda: topics.put("orders", namespace="nobody")) == (1, 0, 0)
    # A change that moves no set tells no watch.
    assert cost(registry, lambda: topics.put("orders", env="prod", x="1")) == (1, 2, 0)
