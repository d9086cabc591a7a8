"""Topic lifecycle against the embedded store and two real broker applications on loopback."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp.test_utils import TestServer
from topic_cluster import controller_informers, until_cached

from scalable_topics.admin.broker_admin import BROKER_FULL_STATUS, BrokerAdmin, BrokerAdminError
from scalable_topics.controller.brokers import registered_brokers
from scalable_topics.controller.lifecycle import LeaderIdentity, TopicLifecycle
from scalable_topics.model.clock import SystemClock
from scalable_topics.model.resources import FINALIZER, TOPIC_LABEL, ScalableTopic, Segment
from scalable_topics.store import EmbeddedStore, Store
from scalable_topics.store.informers import Informers


@dataclass
class Cluster:
    store: Store
    informers: Informers
    lifecycle: TopicLifecycle
    admin: BrokerAdmin
    broker_urls: list[str]


@pytest.fixture
async def cluster(tmp_path: Path, make_broker: Callable[..., TestServer]) -> AsyncIterator[Cluster]:
    async with (
        await EmbeddedStore.open(tmp_path / "store.db") as raw_store,
        aiohttp.ClientSession() as http,
        controller_informers(raw_store) as (store, informers),
    ):
        servers = []
        for index in range(2):
            server = make_broker(raw_store, f"b{index}")
            await server.start_server()
            servers.append(server)
        try:
            admin = BrokerAdmin(http)
            leader = LeaderIdentity("controller-0", "ws://controller-0:8080", 1)
            lifecycle = TopicLifecycle(
                store, informers, admin, SystemClock(), leader, "scalable-topics"
            )
            urls = [f"ws://127.0.0.1:{s.port}" for s in servers]
            async with asyncio.timeout(20):
                while len(registered_brokers(informers)) < 2:
                    await asyncio.sleep(0.01)
            yield Cluster(store, informers, lifecycle, admin, urls)
        finally:
            for server in servers:
                await server.close()


def topic_manifest(initial: int = 4) -> dict[str, object]:
    return ScalableTopic.model_validate(
        {
            "metadata": {"name": "orders", "namespace": "default"},
            "spec": {
                "initialSegments": initial,
                "subscriptions": [{"name": "billing", "type": "Stream"}],
            },
        }
    ).to_wire()


async def test_a_new_topic_gets_its_layout_segments_storage_and_ready(cluster: Cluster) -> None:
    await cluster.store.create(topic_manifest(4))
    assert await cluster.lifecycle.reconcile("default", "orders")
    topic = ScalableTopic.model_validate(
        await cluster.store.get(ScalableTopic.KIND, "default", "orders")
    )
    assert FINALIZER in topic.metadata.finalizers
    assert (topic.status.epoch, topic.status.active_segments, topic.status.phase) == (0, 4, "Ready")
    assert topic.status.controller is not None and topic.status.controller.term == 1
    ready = [c for c in topic.status.conditions if c.type == "Ready"]
    assert [(c.status, c.reason) for c in ready] == [("True", "SegmentsServed")]
    listing = await cluster.store.list(
        Segment.KIND, namespace="default", label_selector=f"{TOPIC_LABEL}=orders"
    )
    segments = [Segment.model_validate(item) for item in listing.items]
    assert sorted(s.metadata.name for s in segments) == [
        "orders-0000-3fff-0",
        "orders-4000-7fff-1",
        "orders-8000-bfff-2",
        "orders-c000-ffff-3",
    ]
    assert {s.status.state for s in segments} == {"Active"}
    placed = [s.status.broker for s in segments]
    assert sorted(placed) == sorted(cluster.broker_urls * 2)  # spread evenly over both brokers
    for segment in segments:
        descriptor = segment.metadata.name.removeprefix("orders-")
        assert segment.status.broker is not None
        assert await cluster.admin.subscriptions(
            segment.status.broker, "default", "orders", descriptor
        ) == ["billing"]
    # A second pass changes nothing.
    before = await cluster.store.list(Segment.KIND, namespace="default")
    assert await cluster.lifecycle.reconcile("default", "orders")
    after = await cluster.store.list(Segment.KIND, namespace="default")
    assert [o["metadata"]["resourceVersion"] for o in before.items] == [
        o["metadata"]["resourceVersion"] for o in after.items
    ]


async def test_deleting_a_topic_removes_everything_even_what_is_already_gone(
    cluster: Cluster,
) -> None:
    await cluster.store.create(topic_manifest(2))
    assert await cluster.lifecycle.reconcile("default", "orders")
    listing = await cluster.store.list(Segment.KIND, namespace="default")
    first = Segment.model_validate(listing.items[0])
    assert first.status.broker is not None
    # Half of an earlier delete already happened: one segment's storage is gone.
    assert await cluster.admin.delete_segment(
        first.status.broker, "default", "orders", "0000-7fff-0"
    )
    marked = await cluster.store.delete(ScalableTopic.KIND, "default", "orders")  # finalizer
    await until_cached(cluster.informers, marked)
    assert await cluster.lifecycle.reconcile("default", "orders")
    assert (await cluster.store.list(ScalableTopic.KIND)).items == []
    assert (await cluster.store.list(Segment.KIND)).items == []
    for url in cluster.broker_urls:
        for descriptor in ("0000-7fff-0", "8000-ffff-1"):
            assert not await cluster.admin.delete_segment(url, "default", "orders", descriptor)
    assert await cluster.lifecycle.reconcile("default", "orders")  # nothing left: settled


async def test_a_new_leader_shows_itself_in_the_status(cluster: Cluster) -> None:
    await cluster.store.create(topic_manifest(2))
    assert await cluster.lifecycle.reconcile("default", "orders")
    successor = TopicLifecycle(
        cluster.store,
        cluster.informers,
        cluster.admin,
        SystemClock(),
        LeaderIdentity("controller-1", "ws://controller-1:8080", 2),
        "scalable-topics",
    )
    assert await successor.reconcile("default", "orders")
    topic = ScalableTopic.model_validate(
        await cluster.store.get(ScalableTopic.KIND, "default", "orders")
    )
    assert topic.status.controller is not None
    assert (topic.status.controller.identity, topic.status.controller.term) == ("controller-1", 2)
    assert topic.status.controller.endpoint == "ws://controller-1:8080"


async def test_a_topic_being_deleted_and_its_segments_say_so(
    cluster: Cluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    await cluster.store.create(topic_manifest(2))
    assert await cluster.lifecycle.reconcile("default", "orders")
    marked = await cluster.store.delete(ScalableTopic.KIND, "default", "orders")
    await until_cached(cluster.informers, marked)
    seen = []
    delete_segment = cluster.admin.delete_segment

    async def observing(url: str, namespace: str, topic: str, descriptor: str) -> bool:
        # What kubectl get st / seg would show while the storage is being removed.
        owner = ScalableTopic.model_validate(
            await cluster.store.get(ScalableTopic.KIND, namespace, topic)
        )
        [ready] = [c for c in owner.status.conditions if c.type == "Ready"]
        segment = Segment.model_validate(
            await cluster.store.get(Segment.KIND, namespace, f"{topic}-{descriptor}")
        )
        seen.append((owner.status.phase, ready.reason, ready.status, segment.status.state))
        return await delete_segment(url, namespace, topic, descriptor)

    monkeypatch.setattr(cluster.admin, "delete_segment", observing)
    assert await cluster.lifecycle.reconcile("default", "orders")
    assert seen == [("Deleting", "Deleting", "False", "Deleting")] * 2
    assert (await cluster.store.list(ScalableTopic.KIND)).items == []


async def test_a_segment_a_full_broker_refused_is_placed_again(
    cluster: Cluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The heartbeats said it had room, but it filled meanwhile: it refuses (507 BrokerFull),
    holds nothing of the segment, and the next pass places it anew."""
    create_segment = cluster.admin.create_segment
    refused: list[str] = []

    async def full_once(url: str, *args: Any, **options: Any) -> dict[str, Any]:
        if not refused:
            refused.append(url)
            raise BrokerAdminError(BROKER_FULL_STATUS, "BrokerFull", "this broker hosts 0")
        return await create_segment(url, *args, **options)

    monkeypatch.setattr(cluster.admin, "create_segment", full_once)
    await cluster.store.create(topic_manifest(1))
    with pytest.raises(BrokerAdminError):
        await cluster.lifecycle.reconcile("default", "orders")
    [segment] = [
        Segment.model_validate(o) for o in cluster.informers.segments_of("default", "orders")
    ]
    assert segment.status.broker is None  # the placement is forgotten
    assert await cluster.lifecycle.reconcile("default", "orders")
    [segment] = [
        Segment.model_validate(o) for o in cluster.informers.segments_of("default", "orders")
    ]
    assert segment.status.broker is not None and segment.status.state == "Active"
