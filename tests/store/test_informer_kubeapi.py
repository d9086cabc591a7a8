"""The whole informer on the Kubernetes adapter through our API server (scalable_topics.kubeapi):
it lists, follows a watch across the streams the server ends, lists again when its place in the
history is gone (410), and keeps that place fresh with bookmarks."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from api_targets import KubeApiTarget
from store_testkit import PROBE, TIMEOUT, lease_object, probe, rv

from scalable_topics.store import Store
from scalable_topics.store.informer import Change, Informer
from scalable_topics.store.kubernetes import KubernetesStore

STREAM_SECONDS = 1  # the adapter's watch streams end this soon, and are opened again


async def _target(folder: Path, **store_options: Any) -> tuple[KubeApiTarget, Store]:
    target = KubeApiTarget(folder, **store_options)
    await target.start(None, None)
    store = await target.adapter(watch_timeout_seconds=STREAM_SECONDS)
    return target, store


@pytest.fixture
async def running() -> AsyncIterator[list[Any]]:
    """Informers, stores and servers to stop at the end, last started first."""
    things: list[Any] = []
    yield things
    for thing in reversed(things):
        if isinstance(thing, Informer | KubeApiTarget):
            await thing.stop()
        else:
            await thing.close()


def streams_of(store: KubernetesStore) -> int:
    return sum(watch.streams for watch in store._watches)


async def until(condition: Any) -> None:
    async with asyncio.timeout(TIMEOUT):
        while not condition():
            await asyncio.sleep(0.01)


async def test_the_informer_lists_follows_and_outlives_the_streams(
    tmp_path: Path, running: list[Any]
) -> None:
    target, store = await _target(tmp_path)
    running += [target, store]
    first = await store.create(probe("first", labels={"app": "x"}))
    informer = Informer(store, PROBE, "default", backoff_first=0.01)
    running.append(informer)
    changes: list[Change] = []
    informer.subscribe(changes.append)
    informer.start()
    await informer.wait_synced()
    assert [o["metadata"]["name"] for o in informer.list()] == ["first"]

    second = await store.create(probe("second"))
    await until(lambda: informer.get("default", "second") == second)
    assert isinstance(store, KubernetesStore)
    await until(lambda: streams_of(store) >= 3)  # the server ended two streams meanwhile
    changed = await store.patch(PROBE, "default", "first", {"spec": {"n": 2}})
    await until(lambda: informer.get("default", "first") == changed)
    deleted = await store.delete(PROBE, "default", "second")
    await until(lambda: informer.get("default", "second") is None)
    assert [(c.type.value, c.key[1]) for c in changes] == [
        ("ADDED", "first"),
        ("ADDED", "second"),
        ("MODIFIED", "first"),
        ("DELETED", "second"),
    ]
    assert changes[-1].old == second
    assert rv(deleted) > rv(changed) > rv(first)
    assert informer.lists == 1


async def test_a_compacted_history_makes_the_informer_list_again(
    tmp_path: Path, running: list[Any]
) -> None:
    """Without bookmarks (the server sends none here) an informer's place in the history is
    its last event: other kinds' writes compact it away, the next stream is refused with 410,
    and the informer lists again, turning what it missed into events."""
    target, store = await _target(tmp_path, history_limit=3, bookmark_interval=3600)
    running += [target, store]
    await store.create(probe("kept"))
    doomed = await store.create(probe("doomed"))
    informer = Informer(store, PROBE, "default", backoff_first=0.01)
    running.append(informer)
    changes: list[Change] = []
    informer.subscribe(changes.append)
    informer.start()
    await informer.wait_synced()
    assert isinstance(store, KubernetesStore)
    await until(lambda: streams_of(store) >= 1)

    # All within one stream's life: the deletion and enough Lease writes to compact it away.
    async with asyncio.timeout(TIMEOUT):
        await store.delete(PROBE, "default", "doomed")
        for i in range(8):
            await store.create(lease_object(f"l-{i}"))
    await until(lambda: informer.lists >= 2)
    await until(lambda: informer.get("default", "doomed") is None)
    assert [(c.type.value, c.key[1]) for c in changes][-1] == ("DELETED", "doomed")
    assert changes[-1].old == doomed
    born = await store.create(probe("born"))
    await until(lambda: informer.get("default", "born") == born)


async def test_bookmarks_keep_the_informers_place_fresh(tmp_path: Path, running: list[Any]) -> None:
    """With bookmarks, the same compaction costs no relist: each stream resumes from the last
    bookmark, which the other kinds' writes moved on."""
    target, store = await _target(tmp_path, history_limit=3, bookmark_interval=0.05)
    running += [target, store]
    await store.create(probe("quiet"))
    informer = Informer(store, PROBE, "default", backoff_first=0.01)
    running.append(informer)
    informer.start()
    await informer.wait_synced()
    listed_at = int(informer.resource_version)
    assert isinstance(store, KubernetesStore)
    async with asyncio.timeout(TIMEOUT):
        i = 0
        while streams_of(store) < 3 or int(informer.resource_version) < listed_at + 10:
            await store.create(lease_object(f"l-{i}"))
            i += 1
            await asyncio.sleep(0.02)
    loud = await store.patch(PROBE, "default", "quiet", {"spec": {"n": 3}})
    await until(lambda: informer.get("default", "quiet") == loud)
    assert informer.lists == 1
