"""The informer: list, watch, cache, indexes, keyed subscriptions, and relisting after a gap."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from types import TracebackType
from typing import Any, Self

import pytest
from store_testkit import LEASE, TOPIC, lease_object, topic

from scalable_topics.store import (
    EmbeddedStore,
    Expired,
    Object,
    ObjectList,
    Store,
    StoreError,
    WatchEvent,
)
from scalable_topics.store.informer import Change, Informer
from scalable_topics.tasks import cancel_all
from support.eventually import eventually

TIMEOUT = 10.0


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[EmbeddedStore]:
    async with await EmbeddedStore.open(tmp_path / "store.db", poll_interval=0.005) as store:
        yield store


@pytest.fixture
async def running() -> AsyncIterator[list[Informer]]:
    informers: list[Informer] = []
    yield informers
    for informer in informers:
        await informer.stop()


class Recorder:
    def __init__(self) -> None:
        self.changes: list[Change] = []
        self.moved = asyncio.Event()

    def __call__(self, change: Change) -> None:
        self.changes.append(change)
        self.moved.set()

    def seen(self) -> list[tuple[str, str, str | None, str | None]]:
        return [
            (
                c.type.value,
                c.key[1],
                None if c.old is None else c.old["metadata"]["resourceVersion"],
                None if c.new is None else c.new["metadata"]["resourceVersion"],
            )
            for c in self.changes
        ]

    async def until(self, count: int) -> None:
        async with asyncio.timeout(TIMEOUT):
            while len(self.changes) < count:
                self.moved.clear()
                await self.moved.wait()


def rv(obj: Object) -> str:
    return str(obj["metadata"]["resourceVersion"])


async def test_it_lists_then_follows_and_tells_old_and_new(
    store: EmbeddedStore, running: list[Informer]
) -> None:
    first = await store.create(topic("a"))
    informer = Informer(store, TOPIC)
    running.append(informer)
    everything = Recorder()
    informer.subscribe(everything)
    informer.start()
    await informer.wait_synced()
    assert informer.synced
    assert informer.get("default", "a") == first
    assert everything.seen() == [("ADDED", "a", None, rv(first))]

    second = await store.patch(TOPIC, "default", "a", {"spec": {"partitions": 2}})
    other = await store.create(topic("b", namespace="team"))
    gone = await store.delete(TOPIC, "default", "a")
    await everything.until(4)
    assert everything.seen()[1:] == [
        ("MODIFIED", "a", rv(first), rv(second)),
        ("ADDED", "b", None, rv(other)),
        ("DELETED", "a", rv(second), None),
    ]
    assert informer.get("default", "a") is None
    assert informer.list() == [other]
    assert informer.list("team") == [other]
    assert informer.list("default") == []
    assert int(informer.resource_version) >= int(rv(gone))


async def test_keyed_and_indexed_subscribers_hear_only_their_objects(
    store: EmbeddedStore, running: list[Informer]
) -> None:
    informer = Informer(store, TOPIC)
    running.append(informer)
    informer.add_index("team", lambda obj: [obj["metadata"]["labels"]["team"]])
    of_a, of_team_x, everything = Recorder(), Recorder(), Recorder()
    informer.subscribe_key(("default", "a"), of_a)
    informer.subscribe_index("team", "x", of_team_x)
    informer.subscribe(everything)
    informer.start()
    await informer.wait_synced()

    await store.create(topic("a", labels={"team": "x"}))
    await store.create(topic("b", labels={"team": "y"}))
    await store.patch(TOPIC, "default", "b", {"metadata": {"labels": {"team": "x"}}})
    await store.patch(TOPIC, "default", "a", {"metadata": {"labels": {"team": "y"}}})
    await everything.until(4)

    assert [(t, n) for t, n, *_ in of_a.seen()] == [("ADDED", "a"), ("MODIFIED", "a")]
    # b enters team x, a leaves it: both are seen by the team's subscriber.
    assert [(t, n) for t, n, *_ in of_team_x.seen()] == [
        ("ADDED", "a"),
        ("MODIFIED", "b"),
        ("MODIFIED", "a"),
    ]
    assert [o["metadata"]["name"] for o in informer.by_index("team", "x")] == ["b"]
    assert sorted(o["metadata"]["name"] for o in informer.by_index("team", "y")) == ["a"]
    assert informer.deliveries == 4 + 2 + 3


class GappyStore:
    """The embedded store, whose watches can be cut (Expired, as after a long disconnection)
    and whose lists can be held back, to make a gap on purpose."""

    def __init__(self, store: Store, cut_with: StoreError | None = None) -> None:
        self._store = store
        self.cut_with = cut_with or Expired("1", "2")
        self.cut = asyncio.Event()
        self.lists_allowed = asyncio.Event()
        self.lists_allowed.set()

    async def list(
        self, kind: str, namespace: str | None = None, label_selector: str | None = None
    ) -> ObjectList:
        await self.lists_allowed.wait()
        return await self._store.list(kind, namespace, label_selector)

    def watch(
        self,
        kind: str,
        namespace: str | None = None,
        resource_version: str | None = None,
        label_selector: str | None = None,
        allow_bookmarks: bool = False,
    ) -> Any:
        return _CuttableWatch(
            self._store.watch(kind, namespace, resource_version, label_selector, allow_bookmarks),
            self.cut,
            self.cut_with,
        )

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)


class _CuttableWatch:
    def __init__(self, inner: Any, cut: asyncio.Event, error: StoreError) -> None:
        self._inner, self._cut, self._error = inner, cut, error

    async def __aenter__(self) -> Self:
        await self._inner.__aenter__()
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self._inner.__aexit__(kind, exc, tb)

    def __aiter__(self) -> Self:
        return self

    async def __anext__(self) -> WatchEvent:
        if self._cut.is_set():
            raise self._error
        nxt = asyncio.ensure_future(anext(self._inner))
        cut = asyncio.ensure_future(self._cut.wait())
        try:
            await asyncio.wait({nxt, cut}, return_when=asyncio.FIRST_COMPLETED)
            if nxt.done():
                return nxt.result()
            raise self._error
        finally:
            await cancel_all([nxt, cut])


async def test_a_gap_is_closed_by_listing_again_with_the_difference_as_events(
    store: EmbeddedStore, running: list[Informer]
) -> None:
    gappy = GappyStore(store)
    kept = await store.create(topic("kept"))
    doomed = await store.create(topic("doomed"))
    informer = Informer(gappy, TOPIC, backoff_first=0.01)  # type: ignore[arg-type]
    running.append(informer)
    everything = Recorder()
    informer.subscribe(everything)
    informer.start()
    await informer.wait_synced()
    await everything.until(2)

    gappy.lists_allowed.clear()
    gappy.cut.set()  # the watch ends with Expired; the next list waits
    await asyncio.sleep(0)
    changed = await store.patch(TOPIC, "default", "kept", {"spec": {"partitions": 7}})
    await store.delete(TOPIC, "default", "doomed")
    born = await store.create(topic("born"))
    gappy.cut.clear()
    gappy.lists_allowed.set()
    await everything.until(5)

    assert sorted(everything.seen()[2:]) == sorted(
        [
            ("DELETED", "doomed", rv(doomed), None),
            ("MODIFIED", "kept", rv(kept), rv(changed)),
            ("ADDED", "born", None, rv(born)),
        ]
    )
    assert informer.lists == 2
    assert sorted(o["metadata"]["name"] for o in informer.list()) == ["born", "kept"]


async def test_bookmarks_spare_a_relist_after_the_history_moved_on(
    tmp_path: Path, running: list[Informer]
) -> None:
    """A quiet kind's informer resumes from its bookmark after its watch breaks, though the
    other kinds' writes compacted the history it last had an event from."""
    async with await EmbeddedStore.open(
        tmp_path / "store.db", history_limit=5, bookmark_interval=0.01
    ) as store:
        broken = asyncio.Event()

        class OnceBroken(GappyStore):
            def watch(self, *args: Any, **kwargs: Any) -> Any:
                watch = super().watch(*args, **kwargs)
                if broken.is_set():
                    self.cut.clear()
                return watch

        gappy = OnceBroken(store, StoreError("the connection to the API server dropped"))
        await store.create(topic("quiet"))
        informer = Informer(gappy, TOPIC, backoff_first=0.01)  # type: ignore[arg-type]
        running.append(informer)
        informer.start()
        await informer.wait_synced()
        listed_at = int(informer.resource_version)
        async with asyncio.timeout(TIMEOUT):
            i = 0
            while int(informer.resource_version) < listed_at + 10:
                await store.create(lease_object(f"l-{i}"))
                i += 1
                await asyncio.sleep(0.005)
        broken.set()
        gappy.cut.set()  # the watch fails: the informer resumes from its bookmark
        quiet = Recorder()
        informer.subscribe(quiet)
        loud = await store.patch(TOPIC, "default", "quiet", {"spec": {"partitions": 3}})
        await quiet.until(1)
        assert quiet.seen() == [
            ("MODIFIED", "quiet", quiet.changes[0].old["metadata"]["resourceVersion"], rv(loud))
        ]  # type: ignore[index]
        assert informer.lists == 1


async def test_failures_are_retried_with_growing_delays(running: list[Informer]) -> None:
    class Broken:
        def __init__(self) -> None:
            self.calls: list[float] = []

        async def list(self, *args: Any) -> ObjectList:
            self.calls.append(asyncio.get_running_loop().time())
            if len(self.calls) < 6:
                raise StoreError("the API server is down")
            return ObjectList([], "1")

        def watch(self, *args: Any, **kwargs: Any) -> Any:
            raise StoreError("still down")

    broken = Broken()
    informer = Informer(broken, LEASE, backoff_first=0.01, backoff_max=0.04, jitter=lambda: 0.5)  # type: ignore[arg-type]
    running.append(informer)
    informer.start()
    await asyncio.wait_for(informer.wait_synced(), TIMEOUT)
    gaps = [b - a for a, b in zip(broken.calls, broken.calls[1:], strict=False)]
    assert [
        round(g, 2) >= d for g, d in zip(gaps, [0.01, 0.02, 0.04, 0.04, 0.04], strict=False)
    ] == [True] * 5


async def test_wait_changed_returns_once_the_cache_moved_past_a_version(
    store: EmbeddedStore, running: list[Informer]
) -> None:
    created = await store.create(topic("a"))
    informer = Informer(store, TOPIC)
    running.append(informer)
    informer.start()
    await informer.wait_synced()
    waiting = asyncio.create_task(informer.wait_changed("default", "a", rv(created)))
    await asyncio.sleep(0.05)
    assert not waiting.done()
    updated = await store.patch(TOPIC, "default", "a", {"spec": {"partitions": 2}})
    await asyncio.wait_for(waiting, TIMEOUT)
    assert informer.get("default", "a") == updated
    await informer.wait_changed("default", "a", rv(created))  # already past: at once


async def test_it_says_whether_it_follows_the_store_and_why_not(
    store: EmbeddedStore, running: list[Informer]
) -> None:
    """What a readiness probe reports: not following before the first list, nor while the
    watch is broken and the store refuses lists; following again once a list succeeds."""
    gappy = GappyStore(store, StoreError("connection refused by the API server"))
    gappy.lists_allowed.clear()
    informer = Informer(gappy, TOPIC, backoff_first=0.01)  # type: ignore[arg-type]
    running.append(informer)
    informer.start()
    await asyncio.sleep(0)
    assert not informer.following
    gappy.lists_allowed.set()
    await informer.wait_synced()
    await eventually(lambda: informer.following, "the informer to follow the store")
    assert informer.last_error is None

    gappy.lists_allowed.clear()
    gappy.cut.set()  # the watch fails, and so does every new one until the cut is healed
    await eventually(lambda: not informer.following, "the informer to report the failure")
    assert informer.synced  # the cache is still there, only no longer kept current
    assert informer.last_error == "connection refused by the API server"

    gappy.cut.clear()
    gappy.lists_allowed.set()
    created = await store.create(topic("after"))
    await eventually(lambda: informer.get("default", "after") == created, "the cache to catch up")
    assert informer.following and informer.last_error is None
