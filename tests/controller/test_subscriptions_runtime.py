"""Runtime subscriptions against the embedded store and real broker applications on loopback:
added and removed on every segment (active and sealed), resumable, failures reported."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
from aiohttp.test_utils import TestServer
from segment_traffic import produce
from topic_cluster import (
    NAMESPACE,
    TOPIC,
    Cluster,
    read_topic,
    running_cluster,
    segments_by_id,
    set_subscriptions,
    split_by_hand,
    subscriptions_on_brokers,
    topic_manifest,
)

from scalable_topics.admin.broker_admin import BrokerAdmin
from scalable_topics.controller.subscriptions import SUBSCRIPTIONS_READY, SubscriptionSync
from scalable_topics.model.clock import SystemClock
from scalable_topics.model.conditions import find_condition
from scalable_topics.model.resources import ScalableTopic
from scalable_topics.protocol import InitialPosition


@pytest.fixture
async def cluster(tmp_path: Path, make_broker: Callable[..., TestServer]) -> AsyncIterator[Cluster]:
    async with running_cluster(tmp_path, make_broker) as running:
        yield running


async def topic_with_a_sealed_segment(
    cluster: Cluster, subscriptions: list[tuple[str, str]] | None = None
) -> None:
    """Segments 0 (sealed with an unconsumed message, so it is kept; children 2 and 3) and 1."""
    lifecycle = cluster.lifecycle()
    await cluster.store.create(
        topic_manifest(initial=2, subscriptions=subscriptions or [("billing", "Stream")])
    )
    assert await lifecycle.reconcile(NAMESPACE, TOPIC)
    broker = (await segments_by_id(cluster.store))[0].status.broker
    assert broker is not None
    await produce(broker, NAMESPACE, TOPIC, 0, [b"sealed"])
    await split_by_hand(cluster, 0, SystemClock())
    assert await lifecycle.reconcile(NAMESPACE, TOPIC)


async def backlog(cluster: Cluster, segment_id: int, subscription: str) -> int:
    segment = (await segments_by_id(cluster.store))[segment_id]
    assert segment.status.broker is not None
    descriptor = segment.metadata.name.removeprefix(f"{TOPIC}-")
    stats = await cluster.admin.stats(segment.status.broker, NAMESPACE, TOPIC, descriptor)
    return int(stats["subscriptions"][subscription]["backlog"])


async def test_an_added_subscription_reaches_every_segment_from_now_on(cluster: Cluster) -> None:
    await topic_with_a_sealed_segment(cluster)
    objects = await segments_by_id(cluster.store)
    assert objects[1].status.broker is not None
    await produce(objects[1].status.broker, NAMESPACE, TOPIC, 1, [b"before"] * 3)

    await set_subscriptions(cluster.store, [("billing", "Stream"), ("audit", "Queue")])
    assert await cluster.lifecycle().reconcile(NAMESPACE, TOPIC)

    assert await subscriptions_on_brokers(cluster) == {
        0: ["audit", "billing"],
        1: ["audit", "billing"],
        2: ["audit", "billing"],
        3: ["audit", "billing"],
    }
    # Latest: what was produced before does not count for the new subscription.
    assert await backlog(cluster, 1, "billing") == 3
    assert await backlog(cluster, 1, "audit") == 0
    # On the sealed segment it is drained at once, so the children's gate is open for it.
    objects = await segments_by_id(cluster.store)
    assert set(objects[0].status.drained) == {"audit"}
    topic = await read_topic(cluster.store)
    assert [(s.name, s.type, s.state) for s in topic.status.subscriptions] == [
        ("billing", "Stream", "Ready"),
        ("audit", "Queue", "Ready"),
    ]
    condition = find_condition(topic.status.conditions, SUBSCRIPTIONS_READY)
    assert condition is not None and (condition.status, condition.reason) == ("True", "Applied")
    assert condition.observed_generation == topic.metadata.generation

    # Segments made later carry the current subscriptions from the start.
    await split_by_hand(cluster, 1, SystemClock())
    assert await cluster.lifecycle().reconcile(NAMESPACE, TOPIC)
    objects = await segments_by_id(cluster.store)
    assert sorted(objects[4].spec.subscriptions) == ["audit", "billing"]
    on_brokers = await subscriptions_on_brokers(cluster)
    assert on_brokers[4] == on_brokers[5] == ["audit", "billing"]

    events = await cluster.store.list("Event", namespace=NAMESPACE)
    reasons = [e["reason"] for e in events.items]
    assert reasons.count("SubscriptionCreated") == 2  # billing (first pass) and audit


async def test_a_removed_subscription_leaves_every_segment_with_its_registrations(
    cluster: Cluster,
) -> None:
    await topic_with_a_sealed_segment(cluster, [("billing", "Stream"), ("audit", "Queue")])
    # A consumer created a subscription of its own: not declared, never touched.
    objects = await segments_by_id(cluster.store)
    assert objects[2].status.broker is not None
    await cluster.admin.create_subscription(
        objects[2].status.broker, NAMESPACE, TOPIC, "0000-3fff-2", "adhoc", InitialPosition.LATEST
    )
    # billing has a consumer registration and a drained marker on the sealed segment.
    topic_raw = await cluster.store.get(ScalableTopic.KIND, NAMESPACE, TOPIC)
    for entry in topic_raw["status"]["subscriptions"]:
        if entry["name"] == "billing":
            entry["consumers"] = [{"name": "c1", "assignedSegments": [1, 2]}]
    await cluster.store.replace_status(topic_raw)
    await cluster.store.patch_status(
        "Segment",
        NAMESPACE,
        objects[0].metadata.name,
        {"status": {"drained": {"billing": "2026-01-01T00:00:00Z"}}},
    )

    await set_subscriptions(cluster.store, [("audit", "Queue")])
    assert await cluster.lifecycle().reconcile(NAMESPACE, TOPIC)

    assert await subscriptions_on_brokers(cluster) == {
        0: ["audit"],
        1: ["audit"],
        2: ["adhoc", "audit"],
        3: ["audit"],
    }
    topic = await read_topic(cluster.store)
    assert [s.name for s in topic.status.subscriptions] == ["audit"]
    objects = await segments_by_id(cluster.store)
    assert "billing" not in objects[0].status.drained


class CrashingAdmin(BrokerAdmin):
    """Dies (as a controller process would) after ``survive`` subscription creations."""

    def __init__(self, admin: BrokerAdmin, survive: int) -> None:
        self.__dict__.update(admin.__dict__)
        self.left = survive

    async def create_subscription(self, *args: Any, **kwargs: Any) -> None:
        if self.left == 0:
            raise RuntimeError("the controller died")
        self.left -= 1
        await super().create_subscription(*args, **kwargs)


async def test_a_pass_that_died_half_way_is_finished_by_the_next(cluster: Cluster) -> None:
    await topic_with_a_sealed_segment(cluster)
    await set_subscriptions(cluster.store, [("billing", "Stream"), ("audit", "Queue")])
    crashing = SubscriptionSync(
        cluster.store, cluster.informers, CrashingAdmin(cluster.admin, 2), SystemClock()
    )
    with pytest.raises(RuntimeError):
        await crashing.reconcile(NAMESPACE, TOPIC)
    topic = await read_topic(cluster.store)
    assert {s.name: s.state for s in topic.status.subscriptions}["audit"] == "Creating"
    on_brokers = await subscriptions_on_brokers(cluster)
    assert sum("audit" in names for names in on_brokers.values()) == 2  # of 4

    assert await SubscriptionSync(
        cluster.store, cluster.informers, cluster.admin, SystemClock()
    ).reconcile(NAMESPACE, TOPIC)
    on_brokers = await subscriptions_on_brokers(cluster)
    assert all(names == ["audit", "billing"] for names in on_brokers.values())
    topic = await read_topic(cluster.store)
    assert {s.name: s.state for s in topic.status.subscriptions}["audit"] == "Ready"


async def test_an_unreachable_broker_is_reported_and_retried(cluster: Cluster) -> None:
    await topic_with_a_sealed_segment(cluster)
    objects = await segments_by_id(cluster.store)
    down = cluster.servers[0]
    down_url = cluster.broker_urls[0]
    on_down = sorted(o.metadata.name for o in objects.values() if o.status.broker == down_url)
    assert on_down  # placement spreads segments over both brokers
    await down.close()

    await set_subscriptions(cluster.store, [("billing", "Stream"), ("audit", "Queue")])
    assert not await cluster.lifecycle().reconcile(NAMESPACE, TOPIC)

    topic = await read_topic(cluster.store)
    assert {s.name: s.state for s in topic.status.subscriptions}["audit"] == "Creating"
    condition = find_condition(topic.status.conditions, SUBSCRIPTIONS_READY)
    assert condition is not None
    assert (condition.status, condition.reason) == ("False", "SegmentsUnavailable")
    for name in on_down:
        assert name.removeprefix(f"{TOPIC}-") in condition.message
    events = await cluster.store.list("Event", namespace=NAMESPACE)
    assert [e["type"] for e in events.items if e["reason"] == "SubscriptionsNotApplied"] == [
        "Warning"
    ]


async def test_while_a_split_is_pending_nothing_is_concluded(cluster: Cluster) -> None:
    await topic_with_a_sealed_segment(cluster)
    raw = await cluster.store.get(ScalableTopic.KIND, NAMESPACE, TOPIC)
    topic = ScalableTopic.model_validate(raw)
    raw["status"]["pendingOperation"] = {
        "kind": "Split",
        "baseEpoch": topic.status.epoch,
        "parentIds": [1],
        "children": [
            {"id": 4, "hashRange": {"start": 0x8000, "end": 0xBFFF}},
            {"id": 5, "hashRange": {"start": 0xC000, "end": 0xFFFF}},
        ],
        "subscriptions": ["billing"],
    }
    await cluster.store.replace_status(raw)
    await set_subscriptions(cluster.store, [("billing", "Stream"), ("audit", "Queue")])

    sync = SubscriptionSync(cluster.store, cluster.informers, cluster.admin, SystemClock())
    assert await sync.reconcile(NAMESPACE, TOPIC)  # not a failure: waiting
    on_brokers = await subscriptions_on_brokers(cluster)
    assert all("audit" in names for names in on_brokers.values())
    topic = await read_topic(cluster.store)
    assert {s.name: s.state for s in topic.status.subscriptions}["audit"] == "Creating"
    condition = find_condition(topic.status.conditions, SUBSCRIPTIONS_READY)
    assert condition is not None and condition.reason == "OperationPending"

    raw = await cluster.store.get(ScalableTopic.KIND, NAMESPACE, TOPIC)
    del raw["status"]["pendingOperation"]
    await cluster.store.replace_status(raw)
    assert await sync.reconcile(NAMESPACE, TOPIC)
    topic = await read_topic(cluster.store)
    assert {s.name: s.state for s in topic.status.subscriptions}["audit"] == "Ready"
