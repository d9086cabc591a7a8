"""Client.watch_namespace against real brokers: in the test's loop for what a watch follows
(the set at start, topics created, deleted and changed out of or into the filters, other
namespaces), and as processes for what a broker restart does to it (the set equals the store's
afterwards; a restart during which nothing changed is no change at all); a token without a
role on the namespace is refused."""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from client_cluster import ClientCluster, start_cluster, stop_cluster

from scalable_topics import tokens
from scalable_topics.broker.topic_admin import INFORMERS_KEY
from scalable_topics.client import (
    Client,
    ClientError,
    NamespaceWatcher,
    NotAuthorized,
    TopicSetChange,
)
from scalable_topics.model.resources import API_VERSION, ScalableTopic
from scalable_topics.protocol import ErrorCode
from scalable_topics.store import EmbeddedStore, Store
from support.eventually import eventually
from support.inprocess_service import Service, running_service
from support.servers import broker_server

NAMESPACE = "shop"
OTHER = "elsewhere"
WAIT = 60.0  # bounds a failing test only


def manifest(name: str, properties: Mapping[str, str], namespace: str) -> dict[str, Any]:
    return {
        "apiVersion": API_VERSION,
        "kind": ScalableTopic.KIND,
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"initialSegments": 1, "properties": dict(properties)},
    }


async def create(store: Store, name: str, namespace: str = NAMESPACE, **properties: str) -> None:
    await store.create(manifest(name, properties, namespace))


async def delete(store: Store, name: str, namespace: str = NAMESPACE) -> None:
    await store.delete(ScalableTopic.KIND, namespace, name)


async def set_properties(store: Store, name: str, **properties: str) -> None:
    await store.patch(ScalableTopic.KIND, NAMESPACE, name, {"spec": {"properties": properties}})


async def stored_set(store: Store, namespace: str, filters: Mapping[str, str]) -> frozenset[str]:
    """The topics of ``namespace`` in the store that match ``filters`` and are not being
    deleted, qualified: what a watch's set must come to."""
    listed = await store.list(ScalableTopic.KIND, namespace)
    return frozenset(
        f"{namespace}/{item['metadata']['name']}"
        for item in listed.items
        if not item["metadata"].get("deletionTimestamp")
        and all(item["spec"].get("properties", {}).get(k) == v for k, v in filters.items())
    )


def qualified(*names: str) -> frozenset[str]:
    return frozenset(f"{NAMESPACE}/{name}" for name in names)


@dataclass
class Heard:
    """Every change and end a watcher told, and the set they lead to from its start."""

    start: frozenset[str]
    changes: list[TopicSetChange] = field(default_factory=list)
    ends: list[ClientError] = field(default_factory=list)

    @classmethod
    def of(cls, watcher: NamespaceWatcher) -> Heard:
        heard = cls(watcher.topics)
        watcher.listen(heard.changes.append, heard.ends.append)
        return heard

    def replayed(self) -> frozenset[str]:
        topics = self.start
        for change in self.changes:
            assert (topics - change.removed) | change.added == change.topics
            topics = change.topics
        return topics


@pytest.fixture
async def service(tmp_path: Path) -> AsyncIterator[Service]:
    async with running_service(tmp_path, brokers=2) as running:
        yield running


async def cached(service: Service, *names: str, namespace: str = NAMESPACE) -> None:
    """Wait until every broker's cache holds the topics (a watch answers from it)."""
    await service.brokers_show(
        lambda caches: all(caches.topics.get(namespace, name) for name in names),
        f"the brokers caching {names}",
    )


async def test_start_returns_the_matching_topics_and_filters_are_anded(service: Service) -> None:
    store = service.store
    await create(store, "orders", tier="gold", region="eu")
    await create(store, "refunds", tier="gold", region="us")
    await create(store, "audit", tier="silver")
    await create(store, "plain")
    await create(store, "orders", OTHER, tier="gold")
    await cached(service, "orders", "refunds", "audit", "plain")
    await cached(service, "orders", namespace=OTHER)
    async with Client(service.url) as client:
        everything = await client.watch_namespace(NAMESPACE)
        gold = await client.watch_namespace(NAMESPACE, {"tier": "gold"})
        gold_eu = await client.watch_namespace(NAMESPACE, {"tier": "gold", "region": "eu"})
        nothing = await client.watch_namespace(NAMESPACE, {"tier": "platinum"})
        assert everything.topics == qualified("orders", "refunds", "audit", "plain")
        assert gold.topics == qualified("orders", "refunds")
        assert gold_eu.topics == qualified("orders")
        assert nothing.topics == frozenset()


async def test_topics_created_deleted_and_changed_arrive_as_changes(service: Service) -> None:
    store = service.store
    filters = {"tier": "gold"}
    await create(store, "orders", tier="gold")
    await cached(service, "orders")
    async with Client(service.url) as client:
        watcher = await client.watch_namespace(NAMESPACE, filters)
        heard = Heard.of(watcher)
        assert heard.start == qualified("orders")

        await create(store, "refunds", tier="gold")
        await create(store, "audit", tier="silver")  # never in the set
        await create(store, "refunds", OTHER, tier="gold")  # another namespace
        await eventually(lambda: watcher.topics == qualified("orders", "refunds"), "refunds in")

        await set_properties(store, "orders", tier="silver")  # moves out of the filter
        await eventually(lambda: watcher.topics == qualified("refunds"), "orders out")
        await set_properties(store, "audit", tier="gold")  # moves in
        await eventually(lambda: watcher.topics == qualified("refunds", "audit"), "audit in")

        await delete(store, "refunds")
        await eventually(lambda: watcher.topics == qualified("audit"), "refunds deleted")

        assert heard.replayed() == watcher.topics == await stored_set(store, NAMESPACE, filters)
        added = set().union(*(c.added for c in heard.changes))
        removed = set().union(*(c.removed for c in heard.changes))
        assert (added, removed) == (qualified("refunds", "audit"), qualified("orders", "refunds"))
        assert heard.ends == []


async def test_stctl_topics_watch_prints_what_the_brokers_serve(service: Service) -> None:
    store = service.store
    await create(store, "orders", tier="gold")
    await create(store, "audit", tier="silver")
    await cached(service, "orders", "audit")
    process = await asyncio.create_subprocess_exec(
        *(sys.executable, "-m", "scalable_topics.cli", "topics", "watch", "-n", NAMESPACE),
        *("--filter", "tier=gold", "--changes", "1", "--url", service.url),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    try:
        assert process.stdout is not None
        async with asyncio.timeout(WAIT):
            first = await process.stdout.readline()
        assert first.decode() == "shop: 1 topic: orders\n"
        await create(store, "refunds", tier="gold")
        async with asyncio.timeout(WAIT):
            rest, err = await process.communicate()
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
    assert (process.returncode, rest.decode(), err) == (
        0,
        "shop: added refunds (2 topics)\n",
        b"",
    )


# -- broker restarts (processes) ---------------------------------------------------------------


@pytest.fixture
async def processes(tmp_path: Path) -> AsyncIterator[ClientCluster]:
    """One broker process (so the watch's only broker is the one restarted) and a controller."""
    async with await EmbeddedStore.open(tmp_path / "store.db") as store:
        running = await start_cluster(tmp_path, store, brokers=1)
        try:
            yield running
        finally:
            await stop_cluster(running)


async def open_namespace_watches(cluster: ClientCluster) -> float:
    """The broker's st_broker_namespace_watches gauge."""
    async with (
        aiohttp.ClientSession() as http,
        http.get(cluster.brokers[0].url + "/metrics") as response,
    ):
        text = await response.text()
    for line in text.splitlines():
        if line.startswith("st_broker_namespace_watches "):
            return float(line.split()[1])
    raise AssertionError("the broker exports no st_broker_namespace_watches")


async def test_after_a_broker_restart_the_set_is_the_stores(processes: ClientCluster) -> None:
    store, broker = processes.store, processes.brokers[0]
    filters = {"app": "shop"}
    await create(store, "orders", app="shop")
    await create(store, "refunds", app="shop")
    await create(store, "logs", app="ops")
    async with processes.client() as client:
        watcher = await client.watch_namespace(NAMESPACE, filters)
        heard = Heard.of(watcher)
        await eventually(lambda: watcher.topics == qualified("orders", "refunds"), "the set")

        broker.kill()
        # While no broker serves: topics created, deleted, and moved into the filter.
        await create(store, "payments", app="shop")
        await create(store, "metrics", app="ops")
        await delete(store, "orders")
        await set_properties(store, "logs", app="shop")
        await broker.start()

        expected = await stored_set(store, NAMESPACE, filters)
        assert expected == qualified("refunds", "payments", "logs")
        await eventually(lambda: watcher.topics == expected, "the store's set after the restart")
        assert heard.replayed() == expected
        assert heard.ends == []


async def test_a_restart_during_which_nothing_changed_is_no_change(
    processes: ClientCluster,
) -> None:
    store, broker = processes.store, processes.brokers[0]
    await create(store, "orders", app="shop")
    async with processes.client() as client:
        watcher = await client.watch_namespace(NAMESPACE)
        heard = Heard.of(watcher)
        await eventually(lambda: watcher.topics == qualified("orders"), "the set")
        heard.changes.clear()

        broker.kill()
        await broker.start()

        # Watched again (with the hash of the set held, which the broker's matches)...
        async def watched_again() -> bool:
            return await open_namespace_watches(processes) == 1

        await eventually(watched_again, "the watch open again")
        # ...and the first change heard since is the one made now.
        await create(store, "refunds", app="shop")
        await eventually(lambda: heard.changes, "the change after the restart")
        assert heard.changes == [
            TopicSetChange(qualified("refunds"), frozenset(), qualified("orders", "refunds"))
        ]


# -- authorization ----------------------------------------------------------------------------


async def test_a_token_without_a_role_on_the_namespace_is_not_authorized(
    tmp_path: Path, store: EmbeddedStore
) -> None:
    private, public = tokens.generate_key()
    key_path, public_path = tmp_path / "token-key.pem", tmp_path / "token-key.pub.pem"
    key_path.write_bytes(private)
    public_path.write_bytes(public)
    served = broker_server(
        store, tmp_path / "broker", auth_token="cluster", token_public_key=public_path
    )
    await served.start_server()
    try:
        await create(store, "orders", "team-a")
        await eventually(
            lambda: served.app[INFORMERS_KEY].topics.get("team-a", "orders") is not None,
            "the broker caching team-a/orders",
        )
        token = tokens.issue(tokens.load_private_key(key_path), "alice", ["consume:team-a"], 600)
        async with Client(f"ws://127.0.0.1:{served.port}", auth_token=token) as client:
            allowed = await client.watch_namespace("team-a")
            assert allowed.topics == frozenset({"team-a/orders"})
            with pytest.raises(NotAuthorized, match="team-b") as refused:
                await client.watch_namespace("team-b")
        assert refused.value.code is ErrorCode.NOT_AUTHORIZED
    finally:
        await served.close()
