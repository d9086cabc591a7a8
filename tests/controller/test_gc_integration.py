"""Garbage collection against the embedded store and real broker applications on loopback:
drained sealed segments are pruned (layout, storage, object), nothing else is, and a pass that
died between steps is finished by the next."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
from aiohttp.test_utils import TestServer
from segment_traffic import drain, produce
from topic_cluster import (
    NAMESPACE,
    TOPIC,
    Cluster,
    read_topic,
    running_cluster,
    segments_by_id,
    split_by_hand,
    topic_manifest,
)

from scalable_topics.admin.broker_admin import BrokerAdmin, BrokerAdminError
from scalable_topics.controller.gc import SegmentCollector
from scalable_topics.model.clock import ManualClock, SystemClock
from scalable_topics.model.layout import SegmentLayout
from scalable_topics.model.resources import ScalableTopic, Segment
from scalable_topics.protocol import SegmentSubscriptionType
from scalable_topics.store import EmbeddedStore

PARENT = "0000-ffff-0"


@pytest.fixture
async def cluster(tmp_path: Path, make_broker: Callable[..., TestServer]) -> AsyncIterator[Cluster]:
    async with running_cluster(tmp_path, make_broker) as running:
        yield running


async def sealed_parent_with_backlog(
    cluster: Cluster,
    subscriptions: list[tuple[str, str]] | None = None,
    retention: dict[str, int] | None = None,
    clock: ManualClock | None = None,
) -> str:
    """One segment with three messages, split by hand; returns the parent's broker."""
    manifest = topic_manifest(
        initial=1,
        subscriptions=[("billing", "Stream")] if subscriptions is None else subscriptions,
        retention=retention,
    )
    await cluster.store.create(manifest)
    assert await cluster.lifecycle().reconcile(NAMESPACE, TOPIC)
    broker = (await segments_by_id(cluster.store))[0].status.broker
    assert broker is not None
    await produce(broker, NAMESPACE, TOPIC, 0, [b"m1", b"m2", b"m3"])
    await split_by_hand(cluster, 0, clock or SystemClock())
    return broker


async def storage_exists(cluster: Cluster, broker: str, descriptor: str) -> bool:
    try:
        await cluster.admin.stats(broker, NAMESPACE, TOPIC, descriptor)
    except BrokerAdminError as error:
        if error.status == 404:
            return False
        raise
    return True


async def test_a_drained_sealed_segment_is_pruned_an_undrained_one_kept(
    cluster: Cluster,
) -> None:
    broker = await sealed_parent_with_backlog(cluster)
    lifecycle = cluster.lifecycle()
    assert await lifecycle.reconcile(NAMESPACE, TOPIC)  # children created, parent kept
    topic = await read_topic(cluster.store)
    assert topic.status.epoch == 1
    assert sorted(s.id for s in topic.status.segments) == [0, 1, 2]
    assert await storage_exists(cluster, broker, PARENT)

    assert await drain(broker, NAMESPACE, TOPIC, 0, "billing", 3) == [b"m1", b"m2", b"m3"]
    assert await lifecycle.reconcile(NAMESPACE, TOPIC)

    topic = await read_topic(cluster.store)
    layout = SegmentLayout.from_status(topic.status.to_wire())  # checks the invariants
    assert layout.epoch == 2
    assert sorted(layout.segments) == [1, 2]
    assert [layout.get(1).parent_ids, layout.get(2).parent_ids] == [(0,), (0,)]
    assert sorted(await segments_by_id(cluster.store)) == [1, 2]
    assert not await storage_exists(cluster, broker, PARENT)
    events = await cluster.store.list("Event", namespace=NAMESPACE)
    pruned = [e["message"] for e in events.items if e["reason"] == "SegmentPruned"]
    assert len(pruned) == 1 and pruned[0].startswith(f"segment 0 ({PARENT}) was pruned")

    # Nothing more to do: a second pass writes nothing.
    before = (await cluster.store.get(ScalableTopic.KIND, NAMESPACE, TOPIC))["metadata"]
    assert await lifecycle.reconcile(NAMESPACE, TOPIC)
    after = (await cluster.store.get(ScalableTopic.KIND, NAMESPACE, TOPIC))["metadata"]
    assert after["resourceVersion"] == before["resourceVersion"]


async def test_a_subscription_a_consumer_made_holds_the_segment_too(cluster: Cluster) -> None:
    broker = await sealed_parent_with_backlog(cluster)
    assert await cluster.lifecycle().reconcile(NAMESPACE, TOPIC)
    await drain(broker, NAMESPACE, TOPIC, 0, "billing", 3)
    # Created at Earliest by a client on the sealed segment: three messages unacknowledged.
    await cluster.admin.create_subscription(broker, NAMESPACE, TOPIC, PARENT, "replay")
    outcome = await SegmentCollector(
        cluster.store, cluster.informers, cluster.admin, SystemClock()
    ).collect(NAMESPACE, TOPIC)
    assert outcome.pruned == []
    assert outcome.kept == {0: "subscriptions replay are not drained"}
    assert 0 in await segments_by_id(cluster.store)


async def test_nothing_is_pruned_while_a_split_is_pending(cluster: Cluster) -> None:
    broker = await sealed_parent_with_backlog(cluster)
    assert await cluster.lifecycle().reconcile(NAMESPACE, TOPIC)
    await drain(broker, NAMESPACE, TOPIC, 0, "billing", 3)
    raw = await cluster.store.get(ScalableTopic.KIND, NAMESPACE, TOPIC)
    raw["status"]["pendingOperation"] = {
        "kind": "Split",
        "baseEpoch": 1,
        "parentIds": [1],
        "children": [
            {"id": 3, "hashRange": {"start": 0, "end": 0x3FFF}},
            {"id": 4, "hashRange": {"start": 0x4000, "end": 0x7FFF}},
        ],
        "subscriptions": ["billing"],
    }
    written = await cluster.store.replace_status(raw)

    collector = SegmentCollector(cluster.store, cluster.informers, cluster.admin, SystemClock())
    outcome = await collector.collect(NAMESPACE, TOPIC)
    assert (outcome.pruned, outcome.finished) == ([], [])
    unchanged = await cluster.store.get(ScalableTopic.KIND, NAMESPACE, TOPIC)
    assert unchanged["metadata"]["resourceVersion"] == written["metadata"]["resourceVersion"]
    assert await storage_exists(cluster, broker, PARENT)

    del unchanged["status"]["pendingOperation"]
    await cluster.store.replace_status(unchanged)
    assert (await collector.collect(NAMESPACE, TOPIC)).pruned == [0]


class DiesDeletingStorage(BrokerAdmin):
    def __init__(self, admin: BrokerAdmin) -> None:
        self.__dict__.update(admin.__dict__)

    async def delete_segment(self, *args: Any) -> bool:
        raise RuntimeError("the controller died")


class DiesDeletingObjects:
    """The store, except that the controller dies when it deletes a Segment object."""

    def __init__(self, store: EmbeddedStore) -> None:
        self._store = store

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)

    async def delete(self, kind: str, *args: Any, **kwargs: Any) -> Any:
        if kind == Segment.KIND:
            raise RuntimeError("the controller died")
        return await self._store.delete(kind, *args, **kwargs)


async def test_a_pass_that_died_after_the_layout_is_finished_by_the_next(
    cluster: Cluster,
) -> None:
    broker = await sealed_parent_with_backlog(cluster)
    assert await cluster.lifecycle().reconcile(NAMESPACE, TOPIC)
    await drain(broker, NAMESPACE, TOPIC, 0, "billing", 3)

    dying = SegmentCollector(
        cluster.store, cluster.informers, DiesDeletingStorage(cluster.admin), SystemClock()
    )
    with pytest.raises(RuntimeError):
        await dying.collect(NAMESPACE, TOPIC)
    topic = await read_topic(cluster.store)
    assert (topic.status.epoch, sorted(s.id for s in topic.status.segments)) == (2, [1, 2])
    assert 0 in await segments_by_id(cluster.store)  # the leftover
    assert await storage_exists(cluster, broker, PARENT)

    dying_later = SegmentCollector(
        DiesDeletingObjects(cluster.store),  # type: ignore[arg-type]
        cluster.informers,
        cluster.admin,
        SystemClock(),
    )
    with pytest.raises(RuntimeError):
        await dying_later.collect(NAMESPACE, TOPIC)
    assert not await storage_exists(cluster, broker, PARENT)
    assert 0 in await segments_by_id(cluster.store)

    outcome = await SegmentCollector(
        cluster.store, cluster.informers, cluster.admin, SystemClock()
    ).collect(NAMESPACE, TOPIC)
    assert outcome.finished == [f"{TOPIC}-{PARENT}"]
    assert outcome.pruned == []
    assert sorted(await segments_by_id(cluster.store)) == [1, 2]
    assert (await read_topic(cluster.store)).status.epoch == 2  # pruned once, not twice


async def test_without_subscriptions_retention_decides(cluster: Cluster) -> None:
    clock = ManualClock()
    broker = await sealed_parent_with_backlog(
        cluster, subscriptions=[], retention={"maxAgeSeconds": 3600}, clock=clock
    )
    assert await cluster.lifecycle(clock).reconcile(NAMESPACE, TOPIC)
    collector = SegmentCollector(cluster.store, cluster.informers, cluster.admin, clock)
    clock.advance(3599)
    outcome = await collector.collect(NAMESPACE, TOPIC)
    assert outcome.kept == {0: "no subscription, within the retention"}
    clock.advance(1)
    assert (await collector.collect(NAMESPACE, TOPIC)).pruned == [0]
    assert not await storage_exists(cluster, broker, PARENT)


async def test_without_subscriptions_or_retention_a_sealed_segment_goes_at_once(
    cluster: Cluster,
) -> None:
    broker = await sealed_parent_with_backlog(cluster, subscriptions=[])
    assert await cluster.lifecycle().reconcile(NAMESPACE, TOPIC)
    assert sorted(s.id for s in (await read_topic(cluster.store)).status.segments) == [1, 2]
    assert not await storage_exists(cluster, broker, PARENT)


async def test_generations_are_pruned_oldest_first_in_one_pass(cluster: Cluster) -> None:
    broker = await sealed_parent_with_backlog(cluster)
    lifecycle = cluster.lifecycle()
    assert await lifecycle.reconcile(NAMESPACE, TOPIC)
    child = (await segments_by_id(cluster.store))[1]
    assert child.status.broker is not None
    await produce(child.status.broker, NAMESPACE, TOPIC, 1, [b"c1"])
    await split_by_hand(cluster, 1, SystemClock())
    assert await lifecycle.reconcile(NAMESPACE, TOPIC)
    assert sorted(s.id for s in (await read_topic(cluster.store)).status.segments) == [
        0,
        1,
        2,
        3,
        4,
    ]
    # The child is drained but its parent is not: it must wait for it.
    shared = SegmentSubscriptionType.SHARED  # unordered: reads the child before its parent
    await drain(child.status.broker, NAMESPACE, TOPIC, 1, "billing", 1, shared)
    assert await lifecycle.reconcile(NAMESPACE, TOPIC)
    assert 1 in await segments_by_id(cluster.store)

    await drain(broker, NAMESPACE, TOPIC, 0, "billing", 3)
    assert await lifecycle.reconcile(NAMESPACE, TOPIC)
    topic = await read_topic(cluster.store)
    layout = SegmentLayout.from_status(topic.status.to_wire())
    assert (layout.epoch, sorted(layout.segments)) == (4, [2, 3, 4])
    assert sorted(await segments_by_id(cluster.store)) == [2, 3, 4]


async def test_without_subscriptions_a_size_limit_counts_the_newer_segments(
    cluster: Cluster,
) -> None:
    broker = await sealed_parent_with_backlog(
        cluster, subscriptions=[], retention={"maxSizeBytes": 10**9}
    )
    parent_size = int((await cluster.admin.stats(broker, NAMESPACE, TOPIC, PARENT))["sizeBytes"])
    raw = await cluster.store.get(ScalableTopic.KIND, NAMESPACE, TOPIC)
    raw["spec"]["retention"] = {"maxSizeBytes": parent_size}  # keep as much as the parent holds
    await cluster.store.replace(raw)
    assert await cluster.lifecycle().reconcile(NAMESPACE, TOPIC)
    collector = SegmentCollector(cluster.store, cluster.informers, cluster.admin, SystemClock())
    assert (await collector.collect(NAMESPACE, TOPIC)).kept == {
        0: "no subscription, within the retention"
    }

    child = (await segments_by_id(cluster.store))[1]
    assert child.status.broker is not None
    await produce(child.status.broker, NAMESPACE, TOPIC, 1, [b"m1", b"m2", b"m3"] * 2)
    assert (await collector.collect(NAMESPACE, TOPIC)).pruned == [0]
    assert not await storage_exists(cluster, broker, PARENT)


async def test_a_pruned_segment_is_deleting_while_its_storage_is_removed(
    cluster: Cluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    broker = await sealed_parent_with_backlog(cluster)
    lifecycle = cluster.lifecycle()
    assert await lifecycle.reconcile(NAMESPACE, TOPIC)
    await drain(broker, NAMESPACE, TOPIC, 0, "billing", 3)
    seen = []
    delete_segment = cluster.admin.delete_segment

    async def observing(url: str, namespace: str, topic: str, descriptor: str) -> bool:
        obj = Segment.model_validate(
            await cluster.store.get(Segment.KIND, namespace, f"{topic}-{descriptor}")
        )
        seen.append((descriptor, obj.status.state))
        return await delete_segment(url, namespace, topic, descriptor)

    monkeypatch.setattr(cluster.admin, "delete_segment", observing)
    assert await lifecycle.reconcile(NAMESPACE, TOPIC)
    assert seen == [(PARENT, "Deleting")]
    assert sorted(await segments_by_id(cluster.store)) == [1, 2]
