"""Namespace watches through a real broker application on loopback, in raw frames
(docs/protocol.md, "Namespace watch"): the snapshot and the hash branches, diffs as topics are
created, deleted and changed, filters, refusals, frames cut to the connection's size, and what
a closed watch or connection leaves behind in the broker's registry."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp.test_utils import TestServer

from scalable_topics.broker.metrics import NAMESPACE_WATCHES_KEY
from scalable_topics.broker.namespace_watch import NamespaceWatchRegistry
from scalable_topics.broker.topic_admin import INFORMERS_KEY
from scalable_topics.model.resources import API_VERSION, ScalableTopic
from scalable_topics.protocol import (
    ErrorCode,
    NamespaceUpdate,
    TopicsDiff,
    TopicsSnapshot,
    WatchClose,
    WatchEnded,
    WatchTopic,
    encode_frame,
    topic_set_hash,
)
from scalable_topics.store import EmbeddedStore
from support.eventually import eventually
from support.servers import broker_server
from support.wire_client import RequestFailed, WireClient

NS = "shop"
OTHER_NS = "elsewhere"

Start = Callable[..., Awaitable[TestServer]]


def topic(name: str, properties: dict[str, str] | None = None, namespace: str = NS) -> Any:
    return {
        "apiVersion": API_VERSION,
        "kind": ScalableTopic.KIND,
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"initialSegments": 1, "properties": properties or {}},
    }


@pytest.fixture
async def start(store: EmbeddedStore, tmp_path: Path) -> AsyncIterator[Start]:
    """Start the broker (BrokerConfig ``settings``) once the test has written what it needs."""
    servers: list[TestServer] = []

    async def started(**settings: Any) -> TestServer:
        server = broker_server(store, tmp_path / f"broker-{len(servers)}", **settings)
        await server.start_server()
        servers.append(server)
        return server

    try:
        yield started
    finally:
        for server in servers:
            await server.close()


@contextlib.asynccontextmanager
async def connected(server: TestServer) -> AsyncIterator[WireClient]:
    client = await WireClient.connect(f"http://127.0.0.1:{server.port}")
    try:
        yield client
    finally:
        await client.close()


def registry(server: TestServer) -> NamespaceWatchRegistry:
    return server.app[NAMESPACE_WATCHES_KEY]


async def seen(server: TestServer, store: EmbeddedStore) -> None:
    """Wait until the broker's cache holds everything the store has now."""
    topics = server.app[INFORMERS_KEY].topics
    revision = (await store.list(ScalableTopic.KIND)).resource_version
    await eventually(
        lambda: int(topics.resource_version or 0) >= int(revision), "the broker caught up"
    )


def diff(added: tuple[str, ...] = (), removed: tuple[str, ...] = ()) -> NamespaceUpdate:
    return NamespaceUpdate(1, diff=TopicsDiff(added, removed))


# -- the snapshot and the hash -------------------------------------------------------------------


async def test_a_watch_without_a_hash_gets_the_existing_topics_as_a_snapshot(
    store: EmbeddedStore, start: Start
) -> None:
    for name in ("payments", "orders", "audit"):
        await store.create(topic(name))
    await store.create(topic("orders", namespace=OTHER_NS))
    server = await start()
    await seen(server, store)
    async with connected(server) as client:
        await client.watch_namespace(1, NS)
        update = await client.namespace_update(1)
    assert update == NamespaceUpdate(1, snapshot=TopicsSnapshot(("audit", "orders", "payments")))


async def test_a_matching_hash_gets_nothing_and_the_first_frame_is_the_next_diff(
    store: EmbeddedStore, start: Start
) -> None:
    for name in ("orders", "payments"):
        await store.create(topic(name))
    server = await start()
    await seen(server, store)
    async with connected(server) as client:
        await client.watch_namespace(1, NS, current_hash=topic_set_hash(["orders", "payments"]))
        # Anything the broker sent for the opening would come before this diff.
        await store.create(topic("refunds"))
        assert await client.namespace_update(1) == diff(added=("refunds",))


async def test_a_matching_hash_of_an_empty_namespace_gets_nothing(
    store: EmbeddedStore, start: Start
) -> None:
    server = await start()
    await seen(server, store)
    async with connected(server) as client:
        await client.watch_namespace(1, NS, current_hash=topic_set_hash([]))
        await store.create(topic("orders"))
        assert await client.namespace_update(1) == diff(added=("orders",))


async def test_a_differing_hash_gets_a_snapshot(store: EmbeddedStore, start: Start) -> None:
    for name in ("orders", "payments"):
        await store.create(topic(name))
    server = await start()
    await seen(server, store)
    async with connected(server) as client:
        await client.watch_namespace(1, NS, current_hash=topic_set_hash(["orders"]))
        assert await client.namespace_snapshot(1) == ("orders", "payments")


async def test_creations_and_deletions_arrive_as_diffs(store: EmbeddedStore, start: Start) -> None:
    server = await start()
    await seen(server, store)
    async with connected(server) as client:
        await client.watch_namespace(1, NS)
        assert await client.namespace_snapshot(1) == ()
        await store.create(topic("orders"))
        assert await client.namespace_update(1) == diff(added=("orders",))
        await store.create(topic("orders", namespace=OTHER_NS))  # not watched
        await store.create(topic("payments"))
        assert await client.namespace_update(1) == diff(added=("payments",))
        await store.delete(ScalableTopic.KIND, NS, "orders")
        assert await client.namespace_update(1) == diff(removed=("orders",))


async def test_filters_narrow_the_set_and_follow_property_changes(
    store: EmbeddedStore, start: Start
) -> None:
    await store.create(topic("orders", {"env": "prod", "team": "a"}))
    await store.create(topic("payments", {"env": "prod"}))
    await store.create(topic("audit", {"env": "dev", "team": "a"}))
    server = await start()
    await seen(server, store)
    async with connected(server) as client:
        await client.watch_namespace(1, NS, {"env": "prod", "team": "a"})
        await client.watch_namespace(2, NS, {"env": "prod"})
        assert await client.namespace_snapshot(1) == ("orders",)
        assert await client.namespace_snapshot(2) == ("orders", "payments")

        kind = ScalableTopic.KIND
        await store.patch(kind, NS, "payments", {"spec": {"properties": {"team": "a"}}})
        assert await client.namespace_update(1) == diff(added=("payments",))
        await store.patch(kind, NS, "orders", {"spec": {"properties": {"env": "dev"}}})
        assert await client.namespace_update(1) == diff(removed=("orders",))
        assert await client.namespace_update(2) == NamespaceUpdate(
            2, diff=TopicsDiff((), ("orders",))
        )
        await store.patch(kind, NS, "orders", {"spec": {"properties": {"env": "prod"}}})
        assert await client.namespace_update(1) == diff(added=("orders",))
        assert await client.namespace_update(2) == NamespaceUpdate(
            2, diff=TopicsDiff(("orders",), ())
        )


async def test_a_topic_leaves_the_set_when_its_deletion_begins(
    store: EmbeddedStore, start: Start
) -> None:
    held = topic("orders")
    held["metadata"]["finalizers"] = ["tests/hold"]
    await store.create(held)
    server = await start()
    await seen(server, store)
    async with connected(server) as client:
        await client.watch_namespace(1, NS)
        assert await client.namespace_snapshot(1) == ("orders",)
        await store.delete(ScalableTopic.KIND, NS, "orders")  # marked: the finalizer holds it
        assert await client.namespace_update(1) == diff(removed=("orders",))
        await store.patch(ScalableTopic.KIND, NS, "orders", {"metadata": {"finalizers": None}})
        await store.create(topic("orders"))
        assert await client.namespace_update(1) == diff(added=("orders",))


async def test_a_large_snapshot_is_cut_to_the_connection_frame_size(
    store: EmbeddedStore, start: Start
) -> None:
    names = [f"a-topic-with-a-rather-long-name-{index:03}" for index in range(60)]
    for name in names:
        await store.create(topic(name))
    max_frame_bytes = 1024
    server = await start(max_frame_bytes=max_frame_bytes)
    await seen(server, store)
    async with connected(server) as client:
        await client.watch_namespace(1, NS)
        parts: list[NamespaceUpdate] = []
        while not parts or not (last := parts[-1].snapshot) or not last.complete:
            parts.append(await client.namespace_update(1))
    assert len(parts) >= 3
    assert all(len(encode_frame(part)) <= max_frame_bytes for part in parts)
    assert [p.snapshot.complete for p in parts if p.snapshot] == [False] * (len(parts) - 1) + [True]
    assert [n for p in parts if p.snapshot for n in p.snapshot.topics] == sorted(names)


# -- refusals ------------------------------------------------------------------------------------


def ended(watch_id: int, update: NamespaceUpdate) -> WatchEnded:
    assert update.watch_id == watch_id and update.ended is not None, update
    return update.ended


@pytest.mark.parametrize(
    ("namespace", "filters", "problem"),
    [
        ("Shop", {}, "namespace 'Shop' is not a DNS label"),
        ("", {}, "namespace must not be empty"),
        ("a" * 64, {}, "at most 63"),
        (NS, {f"k{i}": "v" for i in range(65)}, "at most 64 filters, not 65"),
    ],
)
async def test_a_malformed_watch_is_ended_as_invalid(
    store: EmbeddedStore, start: Start, namespace: str, filters: dict[str, str], problem: str
) -> None:
    server = await start()
    async with connected(server) as client:
        await client.watch_namespace(7, namespace, filters)
        refusal = ended(7, await client.namespace_update(7))
        assert refusal.code is ErrorCode.INVALID_REQUEST and problem in refusal.message
        # The connection carries on, and the id is free.
        await client.watch_namespace(7, NS, {f"k{i}": "v" for i in range(64)})
        assert await client.namespace_snapshot(7) == ()
        assert registry(server).watch_count == 1


async def test_opening_an_open_id_again_ends_both_with_one_id_in_use(
    store: EmbeddedStore, start: Start
) -> None:
    server = await start()
    await seen(server, store)
    async with connected(server) as client:
        await client.watch_namespace(1, NS)
        await client.watch_namespace(2, NS)
        assert await client.namespace_snapshot(1) == ()
        assert await client.namespace_snapshot(2) == ()
        await client.watch_namespace(1, OTHER_NS)
        refusal = ended(1, await client.namespace_update(1))
        assert refusal.code is ErrorCode.ID_IN_USE and "opened again while open" in refusal.message
        await store.create(topic("orders"))
        await store.create(topic("orders", namespace=OTHER_NS))
        assert await client.namespace_update(2) == NamespaceUpdate(
            2, diff=TopicsDiff(("orders",), ())
        )
        await store.create(topic("payments"))
        assert await client.namespace_update(2) == NamespaceUpdate(
            2, diff=TopicsDiff(("payments",), ())
        )
        assert client.namespace_updates[1].empty()  # neither watch 1 sends anything more
        assert registry(server).watch_count == 1
        await client.watch_namespace(1, NS)  # the id is free again
        assert await client.namespace_snapshot(1) == ("orders", "payments")


async def test_a_connection_at_its_open_limit_is_refused_too_many_open(
    store: EmbeddedStore, start: Start
) -> None:
    server = await start(max_open_per_connection=2)
    async with connected(server) as client:
        await client.watch_namespace(1, NS)
        await client.watch_namespace(2, OTHER_NS)
        await client.watch_namespace(3, NS)
        refusal = ended(3, await client.namespace_update(3))
        assert refusal.code is ErrorCode.TOO_MANY_OPEN
        assert "--max-open-per-connection (2)" in refusal.message
        # Namespace watches count with everything else the connection holds.
        with pytest.raises(RequestFailed) as refused:
            await client.request(WatchTopic(client.next_id(), 1, f"{NS}/orders"))
        assert refused.value.code is ErrorCode.TOO_MANY_OPEN
        await client.close_namespace_watch(1)
        await client.watch_namespace(3, NS)
        assert await client.namespace_snapshot(3) == ()


async def test_close_is_answered_success_then_nothing_and_an_unknown_id_unknown_watch(
    store: EmbeddedStore, start: Start
) -> None:
    server = await start()
    await seen(server, store)
    async with connected(server) as client:
        await client.watch_namespace(1, NS)
        await client.watch_namespace(2, NS)
        assert await client.namespace_snapshot(1) == ()
        assert await client.namespace_snapshot(2) == ()
        await client.close_namespace_watch(1)
        await store.create(topic("orders"))
        assert await client.namespace_update(2) == NamespaceUpdate(
            2, diff=TopicsDiff(("orders",), ())
        )
        await store.create(topic("payments"))
        assert await client.namespace_update(2) == NamespaceUpdate(
            2, diff=TopicsDiff(("payments",), ())
        )
        assert client.namespace_updates[1].empty()
        for unknown in (1, 99):
            with pytest.raises(RequestFailed) as refused:
                await client.close_namespace_watch(unknown)
            assert refused.value.code is ErrorCode.UNKNOWN_WATCH
        # A DAG watch id is another id space.
        with pytest.raises(RequestFailed) as refused:
            await client.request(WatchClose(client.next_id(), 2))
        assert refused.value.code is ErrorCode.UNKNOWN_WATCH
        assert registry(server).watch_count == 1


# -- what a watch leaves behind ------------------------------------------------------------------


async def test_a_connection_that_ends_takes_its_watches_out_of_the_registry(
    store: EmbeddedStore, start: Start
) -> None:
    server = await start()
    await seen(server, store)
    watches = registry(server)
    async with connected(server) as staying:
        await staying.watch_namespace(1, NS)
        assert await staying.namespace_snapshot(1) == ()
        leaving = await WireClient.connect(f"http://127.0.0.1:{server.port}")
        for watch_id, (namespace, filters) in enumerate(
            [(NS, {}), (NS, {"env": "prod"}), (OTHER_NS, {}), ("third", {"a": "b"})]
        ):
            await leaving.watch_namespace(watch_id, namespace, filters)
            assert await leaving.namespace_snapshot(watch_id) == ()
        assert (watches.watch_count, watches.group_count, watches.namespace_count) == (5, 4, 3)
        await leaving.drop()
        await eventually(lambda: watches.watch_count == 1, "the dropped connection's watches go")
        assert (watches.group_count, watches.namespace_count) == (1, 1)
    await eventually(lambda: watches.watch_count == 0, "the closed connection's watch goes")
    assert (watches.group_count, watches.namespace_count) == (0, 0)


async def test_a_broker_that_stops_ends_its_watches_with_service_not_ready(
    store: EmbeddedStore, start: Start
) -> None:
    server = await start()
    await seen(server, store)
    async with connected(server) as client:
        await client.watch_namespace(1, NS)
        assert await client.namespace_snapshot(1) == ()
        await server.close()
        refusal = ended(1, await client.namespace_update(1))
    assert refusal == WatchEnded(ErrorCode.SERVICE_NOT_READY, "the broker is shutting down")


async def test_the_open_watches_are_on_the_metrics(store: EmbeddedStore, start: Start) -> None:
    server = await start()
    await seen(server, store)
    metrics_url = f"http://127.0.0.1:{server.port}/metrics"
    async with connected(server) as client, aiohttp.ClientSession() as http:
        for watch_id, filters in enumerate([{}, {}, {"env": "prod"}]):
            await client.watch_namespace(watch_id, NS, filters)
            assert await client.namespace_snapshot(watch_id) == ()
        async with http.get(metrics_url) as response:
            text = await response.text()
    assert "st_broker_namespace_watches 3.0" in text
    assert "st_broker_namespace_watch_groups 2.0" in text


async def test_a_failure_opening_a_watch_ends_it_as_an_internal_error(
    store: EmbeddedStore, start: Start, monkeypatch: pytest.MonkeyPatch
) -> None:
    server = await start()

    def broken(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("a bug")

    monkeypatch.setattr(registry(server), "watch", broken)
    async with connected(server) as client:
        await client.watch_namespace(1, NS)
        refusal = ended(1, await client.namespace_update(1))
        assert refusal == WatchEnded(ErrorCode.INTERNAL_ERROR, "internal error: a bug")
        with pytest.raises(RequestFailed) as refused:
            await client.close_namespace_watch(1)
        assert refused.value.code is ErrorCode.UNKNOWN_WATCH
