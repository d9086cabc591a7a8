"""Namespace watches through a real broker application on loopback, in raw frames
(docs/protocol.md, "Namespace watch"): the snapshot and the hash branches, diffs as topics are
created, deleted and changed, filters, refusals, frames cut to the connection's size, and what
a closed watch or connection leaves behind in the broker's registry."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from aiohttp.test_utils import TestServer

from scalable_topics.broker.metrics import NAMESPACE_WATCHES_KEY
from scalable_topics.broker.namespace_watch import NamespaceWatchRegistry
from scalable_topics.broker.topic_admin import INFORMERS_KEY
from scalable_topics.model.resources import API_VERSION, ScalableTopic
from scalable_topics.protocol import (
    NamespaceUpdate,
    TopicsDiff,
    TopicsSnapshot,
    topic_set_hash,
)
from scalable_topics.store import EmbeddedStore
from support.eventually import eventually
from support.servers import broker_server
from support.wire_client import WireClient

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
