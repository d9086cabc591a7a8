"""What is particular to EmbeddedStore: its file, its worker thread and its one change feed."""

from __future__ import annotations

import asyncio
import gc
import sqlite3
import threading
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from store_testkit import LEASE, TOPIC, lease_object, next_event, rv, take, topic

from scalable_topics.store import (
    DEFAULT_KINDS,
    UNLIMITED,
    BudgetSettings,
    EmbeddedStore,
    EventType,
    Invalid,
    KindInfo,
    NotFound,
    Priority,
    StoreClosed,
    StoreError,
    WatchEvent,
    default_budget,
    open_store,
)

FEED_TASK_PREFIX = "embedded-store-feed"


def feed_tasks() -> list[asyncio.Task[object]]:
    return [t for t in asyncio.all_tasks() if t.get_name().startswith(FEED_TASK_PREFIX)]


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[EmbeddedStore]:
    async with await EmbeddedStore.open(tmp_path / "store.db", poll_interval=0.01) as store:
        yield store


# -- listeners and the feed ------------------------------------------------------------------


async def test_opening_and_closing_200_watches_leaves_no_listener_and_no_feed(
    store: EmbeddedStore,
) -> None:
    created = await store.create(topic("seed"))
    for i in range(200):
        match i % 4:
            case 0:  # listed start, one event read
                async with store.watch(TOPIC) as events:
                    assert (await next_event(events)).type is EventType.ADDED
            case 1:  # from a version, nothing read
                async with store.watch(
                    TOPIC, resource_version=created["metadata"]["resourceVersion"]
                ):
                    assert store.open_watches == 1
            case 2:  # plain iteration, closed explicitly
                events = store.watch(TOPIC, label_selector="a=b")
                await events.__aenter__()
                await events.aclose()
            case 3:  # the body fails
                with pytest.raises(RuntimeError):
                    async with store.watch(TOPIC, namespace="default"):
                        raise RuntimeError("consumer failed")
        assert store.open_watches == 0
    assert not store.feed_running
    assert feed_tasks() == []


async def test_many_open_watches_share_one_feed(store: EmbeddedStore) -> None:
    watches = [store.watch(TOPIC) for _ in range(30)] + [store.watch(LEASE) for _ in range(5)]
    for watch in watches:
        await watch.__aenter__()
    try:
        assert store.open_watches == 35
        assert len(feed_tasks()) == 1
        created = await store.create(topic("shared"))
        for watch in watches[:30]:
            event = await next_event(watch)
            assert event.object == created
        lease = await store.create(lease_object("lock"))
        for watch in watches[30:]:
            assert (await next_event(watch)).object == lease
    finally:
        for watch in watches:
            await watch.aclose()
    assert (store.open_watches, store.feed_running, feed_tasks()) == (0, False, [])


async def test_a_dropped_watch_is_released_when_collected(store: EmbeddedStore) -> None:
    watch = store.watch(TOPIC)
    await watch.__aenter__()
    assert store.open_watches == 1
    del watch
    gc.collect()
    await asyncio.sleep(0)  # the release is scheduled on the loop
    assert (store.open_watches, store.feed_running) == (0, False)


async def test_cancelling_a_task_iterating_a_watch_releases_it(store: EmbeddedStore) -> None:
    seen: list[WatchEvent] = []
    first = asyncio.Event()

    async def consume() -> None:
        async for event in store.watch(TOPIC):
            seen.append(event)
            first.set()

    task = asyncio.create_task(consume())
    await store.create(topic("a"))
    async with asyncio.timeout(10):
        await first.wait()
    assert store.open_watches == 1
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert (store.open_watches, store.feed_running) == (0, False)
    assert [e.object["metadata"]["name"] for e in seen] == ["a"]


async def test_a_timed_out_read_inside_async_with_keeps_the_watch(store: EmbeddedStore) -> None:
    async with store.watch(TOPIC) as events:
        with pytest.raises(TimeoutError):
            async with asyncio.timeout(0.05):
                await anext(events)
        assert store.open_watches == 1
        created = await store.create(topic("after-timeout"))
        assert (await next_event(events)).object == created


async def test_a_slow_watcher_loses_nothing_even_past_compaction(tmp_path: Path) -> None:
    store = await EmbeddedStore.open(tmp_path / "s.db", history_limit=10)
    async with store, store.watch(TOPIC, resource_version="0") as events:
        # The consumer reads nothing until the burst is over, long after compaction.
        written = [rv(await store.create(topic(f"o-{i}"))) for i in range(150)]
        seen = await take(events, 150)
    assert [int(e.resource_version) for e in seen] == written


async def test_close_ends_open_watches_with_store_closed(tmp_path: Path) -> None:
    store = await EmbeddedStore.open(tmp_path / "s.db")
    events = store.watch(TOPIC)
    await events.__aenter__()
    created = await store.create(topic("a"))
    unstarted = store.watch(TOPIC)
    await store.close()
    assert (await next_event(events)).object == created  # what it held is still delivered
    with pytest.raises(StoreClosed):
        await next_event(events)
    with pytest.raises(StoreClosed):
        await next_event(events)
    with pytest.raises(StoreClosed):
        await unstarted.__aenter__()
    assert (store.open_watches, store.feed_running) == (0, False)
    await events.aclose()


async def test_a_closed_watch_stops_iteration(store: EmbeddedStore) -> None:
    events = store.watch(TOPIC)
    await events.__aenter__()
    await events.aclose()
    with pytest.raises(StopAsyncIteration):
        await anext(events)


async def test_watch_from_a_future_version_waits_for_it(store: EmbeddedStore) -> None:
    now = int((await store.list(TOPIC)).resource_version)
    async with store.watch(TOPIC, resource_version=str(now + 2)) as events:
        for name in "abc":
            await store.create(topic(name))
        event = await next_event(events)
    assert (event.object["metadata"]["name"], int(event.resource_version)) == ("c", now + 3)


async def test_watch_refuses_a_malformed_version(store: EmbeddedStore) -> None:
    with pytest.raises(Invalid, match="resourceVersion"):
        store.watch(TOPIC, resource_version="abc")


# -- the file and the worker thread ------------------------------------------------------------


async def test_the_file_is_wal_and_keeps_the_history_bounded(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    async with await EmbeddedStore.open(path, history_limit=7) as store:
        for i in range(30):
            await store.create(topic(f"o-{i}"))
    connection = sqlite3.connect(path)
    try:
        assert connection.execute("PRAGMA journal_mode").fetchone() == ("wal",)
        assert connection.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        assert connection.execute("SELECT count(*), min(revision) FROM events").fetchone() == (
            7,
            24,
        )
        meta = dict(connection.execute("SELECT key, value FROM meta").fetchall())
        assert meta == {"revision": 30, "compacted": 23}
    finally:
        connection.close()


async def test_data_survives_reopening(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    async with await EmbeddedStore.open(path) as store:
        created = await store.create(topic("kept", labels={"a": "b"}))
    async with await EmbeddedStore.open(path) as store:
        assert await store.get(TOPIC, "default", "kept") == created
        again = await store.create(topic("next"))
        assert rv(again) == rv(created) + 1


async def test_sql_runs_only_on_the_worker_thread(store: EmbeddedStore) -> None:
    threads: set[int] = set()

    def trace(conn: sqlite3.Connection) -> int:
        conn.set_trace_callback(lambda _statement: threads.add(threading.get_ident()))
        return threading.get_ident()

    worker = await store._call(trace)
    async with store.watch(TOPIC) as events:
        await store.create(topic("a"))
        await store.patch(TOPIC, "default", "a", {"spec": {"partitions": 2}})
        await store.list(TOPIC, label_selector="x")
        await store.delete(TOPIC, "default", "a")
        assert [e.type for e in await take(events, 3)] == [
            EventType.ADDED,
            EventType.MODIFIED,
            EventType.DELETED,
        ]
    assert worker != threading.get_ident()
    assert threads == {worker}


async def test_an_unopenable_file_raises_store_error(tmp_path: Path) -> None:
    with pytest.raises(StoreError, match="cannot open"):
        await EmbeddedStore.open(tmp_path)  # a directory


async def test_a_file_of_a_newer_schema_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    connection = sqlite3.connect(path)
    connection.execute("PRAGMA user_version = 99")
    connection.close()
    with pytest.raises(StoreError, match="schema version 99"):
        await EmbeddedStore.open(path)


@pytest.mark.parametrize(
    ("option", "value"),
    [
        ("history_limit", 0),
        ("synchronous", "SOMETIMES"),
        ("poll_interval", 0),
        ("fallback_poll_interval", 0),
    ],
)
def test_bad_options_are_refused(tmp_path: Path, option: str, value: object) -> None:
    with pytest.raises(ValueError, match=option):
        EmbeddedStore(tmp_path / "s.db", **{option: value})  # type: ignore[arg-type]


# -- store URLs ------------------------------------------------------------------------------


async def test_open_store_absolute_and_relative_urls(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    absolute = open_store(f"embedded://{tmp_path / 'abs.db'}")
    assert isinstance(absolute.inner, EmbeddedStore)
    assert absolute.inner.path == str(tmp_path / "abs.db")
    assert absolute.budget.settings == UNLIMITED  # a local file: nothing to protect
    created = await absolute.create(topic("a"))
    await absolute.close()

    monkeypatch.chdir(tmp_path)
    relative = open_store("embedded:abs.db")
    try:
        assert await relative.get(TOPIC, "default", "a") == created
    finally:
        await relative.close()


@pytest.mark.parametrize(
    "url",
    [
        "etcd://cluster",
        "sqlite:///x.db",
        "/plain/path.db",
        "embedded://host/x.db",
        "embedded:",
    ],
)
def test_open_store_refuses_other_urls(url: str) -> None:
    with pytest.raises(ValueError, match="embedded:///"):
        open_store(url)


async def test_open_store_paces_requests_by_the_budget_it_is_given(tmp_path: Path) -> None:
    budget = BudgetSettings(qps=10, burst=2)
    store = open_store(f"embedded://{tmp_path / 'store.db'}", budget=budget)
    try:
        assert store.budget.settings == budget
        await asyncio.gather(*(store.create(topic(f"t{index}")) for index in range(4)))
        assert store.requests == {("create", TOPIC): 4}
        assert store.budget.waited[Priority.BULK] == 2  # asked at once, past the burst of 2
    finally:
        await store.close()


def test_the_default_budget_is_the_adapters() -> None:
    assert default_budget("embedded:///x.db") == UNLIMITED
    with pytest.raises(ValueError, match="unsupported store URL"):
        default_budget("etcd://cluster")


CLUSTER_KIND = KindInfo("Namespace", "v1", "namespaces", status_subresource=True, namespaced=False)


async def test_cluster_scoped_kinds_have_no_namespace(tmp_path: Path) -> None:
    kinds = {**DEFAULT_KINDS, CLUSTER_KIND.kind: CLUSTER_KIND}
    async with await EmbeddedStore.open(tmp_path / "store.db", kinds=kinds) as store:
        namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-a"}}
        created = await store.create(namespace)
        assert "namespace" not in created["metadata"]
        assert (await store.get("Namespace", "", "team-a"))["metadata"]["uid"]
        with pytest.raises(Invalid, match="cluster-scoped"):
            await store.create({**namespace, "metadata": {"name": "b", "namespace": "x"}})
        patched = await store.patch("Namespace", "", "team-a", {"metadata": {"labels": {"a": "b"}}})
        assert patched["metadata"]["labels"] == {"a": "b"}
        assert [o["metadata"]["name"] for o in (await store.list("Namespace")).items] == ["team-a"]
        await store.delete("Namespace", "", "team-a")
        with pytest.raises(NotFound, match="Namespace team-a not found"):
            await store.get("Namespace", "", "team-a")
