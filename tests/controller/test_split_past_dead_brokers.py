"""Split and merge while brokers die, with a controller manager and broker applications in the
test's loop: a child placed on a broker that died before the layout commit is made on a live
broker instead, and the returning broker removes its copy; a split that can no longer read or
seal its parent is rolled back while nothing is sealed, and waits for the parent's broker once
something may be; the topic's other work goes on meanwhile and the Scaling condition says what
the split waits for.

A broker "dies" here by stopping its application at a chosen moment (its heartbeat Lease is
released: it is not live from then on) and comes back on the same port and disk.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp.test_utils import TestServer

from scalable_topics.admin.broker_admin import BrokerAdmin, BrokerUnreachable
from scalable_topics.controller import scaling
from scalable_topics.controller.leader import ElectionTiming
from scalable_topics.controller.manager import ControllerConfig, ControllerManager
from scalable_topics.controller.scaling import SCALING
from scalable_topics.model.conditions import find_condition
from scalable_topics.model.layout import SegmentLayout
from scalable_topics.model.resources import TOPIC_LABEL, ScalableTopic, Segment
from scalable_topics.model.scale_request import SPLIT_ANNOTATION
from scalable_topics.model.segment import descriptor
from scalable_topics.store import EmbeddedStore
from scalable_topics.store.kinds import EVENT
from scalable_topics.tasks import cancel_and_wait
from support.eventually import eventually
from support.servers import broker_server

FAST = ElectionTiming(lease_duration=3, renew_deadline=2, retry_period=0.5)
HEARTBEAT = 0.5  # a broker's Lease lasts 2 s: live all along while its application runs
NS, TOPIC = "default", "orders"


@dataclass
class Brokers:
    """Broker applications by name, each on a disk of its own; one stopped starts again on the
    same port, so its URL (and identity) stay the same."""

    store: EmbeddedStore
    root: Path
    running: dict[str, TestServer] = field(default_factory=dict)
    ports: dict[str, int] = field(default_factory=dict)

    async def start(self, name: str) -> None:
        server = broker_server(
            self.store,
            self.root / name,
            port=self.ports.get(name, 0),
            heartbeat_seconds=HEARTBEAT,
        )
        await server.start_server()
        self.ports[name] = server.port
        self.running[name] = server

    async def stop(self, name: str) -> None:
        await self.running.pop(name).close()

    def url(self, name: str) -> str:
        return f"ws://127.0.0.1:{self.ports[name]}"

    async def close(self) -> None:
        for name in list(self.running):
            await self.stop(name)


@dataclass
class Cluster:
    store: EmbeddedStore
    brokers: Brokers
    http: aiohttp.ClientSession

    async def topic(self) -> ScalableTopic:
        return ScalableTopic.model_validate(await self.store.get(ScalableTopic.KIND, NS, TOPIC))

    async def segments(self) -> dict[int, Segment]:
        listing = await self.store.list(
            Segment.KIND, namespace=NS, label_selector=f"{TOPIC_LABEL}={TOPIC}"
        )
        segments = [Segment.model_validate(item) for item in listing.items]
        return {s.spec.segment_id: s for s in segments}

    async def hosted(self, name: str) -> set[str]:
        """The descriptors of the topic's segments on the broker's disk."""
        url = self.brokers.url(name).replace("ws://", "http://") + "/admin/v1/segments"
        async with self.http.get(url) as response:
            listing: list[dict[str, Any]] = await response.json()
        return {e["descriptor"] for e in listing if e["topic"] == TOPIC}

    async def events(self) -> list[tuple[str, str, str]]:
        listing = await self.store.list(EVENT.kind, namespace=NS)
        return [(e["type"], e["reason"], e["message"]) for e in listing.items]

    async def create_topic(self, segments: int, subscriptions: list[str]) -> SegmentLayout:
        manifest = {
            "metadata": {"name": TOPIC, "namespace": NS},
            "spec": {
                "initialSegments": segments,
                "subscriptions": [{"name": s, "type": "Stream"} for s in subscriptions],
            },
        }
        await self.store.create(ScalableTopic.model_validate(manifest).to_wire())

        async def ready() -> bool:
            return (await self.topic()).status.phase == "Ready"

        await eventually(ready, "the topic Ready")
        return SegmentLayout.from_status((await self.topic()).status.to_wire())

    async def request_split(self, segment_id: int) -> None:
        await self.store.patch(
            ScalableTopic.KIND,
            NS,
            TOPIC,
            {"metadata": {"annotations": {SPLIT_ANNOTATION: str(segment_id)}}},
        )

    async def finished(self, result: str) -> ScalableTopic:
        async def done() -> bool:
            last = (await self.topic()).status.last_operation
            return last is not None and last.result == result

        await eventually(done, f"the split {result}")
        return await self.topic()

    async def broker_of(self, segment_id: int) -> str:
        broker = (await self.segments())[segment_id].status.broker
        assert broker is not None
        return broker

    async def subscriptions_of(self, segment_id: int) -> list[str]:
        segment = (await self.segments())[segment_id]
        assert segment.status.broker is not None
        admin = BrokerAdmin(self.http)
        return await admin.subscriptions(
            segment.status.broker, NS, TOPIC, segment.metadata.name.removeprefix(f"{TOPIC}-")
        )


@contextlib.asynccontextmanager
async def running_cluster(tmp_path: Path) -> AsyncIterator[Cluster]:
    """Brokers "a" and "b" and one controller. With equal loads placement breaks ties by
    identity, so segment 0 of a new topic goes to the broker of the lower identity, and the two
    children of a split of it go one to each broker, however late its load is reported."""
    async with (
        await EmbeddedStore.open(tmp_path / "store.db") as store,
        aiohttp.ClientSession() as http,
    ):
        brokers = Brokers(store, tmp_path)
        manager = ControllerManager(store, ControllerConfig("controller-0", timing=FAST, shards=1))
        task: asyncio.Task[None] | None = None
        try:
            await brokers.start("a")
            await brokers.start("b")
            task = asyncio.create_task(manager.run())
            yield Cluster(store, brokers, http)
        finally:
            if task is not None:
                await cancel_and_wait(task)
            await brokers.close()


def name_of(cluster: Cluster, url: str) -> str:
    return next(n for n in cluster.brokers.ports if cluster.brokers.url(n) == url)


def children_of(layout: SegmentLayout, segment_id: int) -> dict[str, int]:
    """The descriptors of the children a split of ``segment_id`` gets, with their ids."""
    change = layout.plan_split(segment_id)
    return {descriptor(c.segment_id, c.hash_range): c.segment_id for c in change.children}


@pytest.mark.parametrize("dies", ["before-storage", "before-answering"])
async def test_a_child_whose_broker_died_before_the_commit_is_made_on_a_live_broker(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, dies: str
) -> None:
    async with running_cluster(tmp_path) as cluster:
        layout = await cluster.create_topic(1, ["billing"])
        live = name_of(cluster, await cluster.broker_of(0))
        dead = "b" if live == "a" else "a"
        children = children_of(layout, 0)
        create = BrokerAdmin.create_segment
        killed: list[str] = []

        async def create_then_die(
            self: BrokerAdmin, url: str, namespace: str, topic: str, name: str, **kw: Any
        ) -> dict[str, Any]:
            if killed or url != cluster.brokers.url(dead) or name not in children:
                return await create(self, url, namespace, topic, name, **kw)
            killed.append(name)
            if dies == "before-storage":
                await cluster.brokers.stop(dead)
                return await create(self, url, namespace, topic, name, **kw)
            await create(self, url, namespace, topic, name, **kw)
            await cluster.brokers.stop(dead)
            raise BrokerUnreachable(f"{url} died before answering")

        monkeypatch.setattr(BrokerAdmin, "create_segment", create_then_die)
        await cluster.request_split(0)
        topic = await cluster.finished("Succeeded")

        assert len(killed) == 1  # one child was placed on the broker that died
        moved = children[killed[0]]
        last = topic.status.last_operation
        assert last is not None and last.epoch == 1
        assert sorted(s.id for s in topic.status.segments if s.state == "Active") == sorted(
            children.values()
        )
        segments = await cluster.segments()
        for child in children.values():
            assert segments[child].status.broker == cluster.brokers.url(live)
            assert segments[child].status.state == "Active"
            assert await cluster.subscriptions_of(child) == ["billing"]
        assert await cluster.hosted(live) >= children.keys()
        assert (
            "Warning",
            scaling.PLACING_CHILD,
            f"split of segment 0: child {moved}'s broker {cluster.brokers.url(dead)} is gone: "
            "placing it on another",
        ) in await cluster.events()

        # Back on its disk: a copy it made of the child is removed, since the child's object
        # names the other broker.
        await cluster.brokers.start(dead)

        async def nothing_left() -> bool:
            return await cluster.hosted(dead) == set()

        await eventually(nothing_left, "the returning broker holding nothing of the topic")


async def test_a_planned_split_whose_parents_broker_is_gone_is_rolled_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with running_cluster(tmp_path) as cluster:
        layout = await cluster.create_topic(1, ["billing"])
        parent_url = await cluster.broker_of(0)
        gone = name_of(cluster, parent_url)
        children = children_of(layout, 0)
        create = BrokerAdmin.create_segment
        killed: list[str] = []

        async def parent_broker_dies(
            self: BrokerAdmin, url: str, namespace: str, topic: str, name: str, **kw: Any
        ) -> dict[str, Any]:
            # The first child is made; the parent's broker dies before the step is recorded.
            made = await create(self, url, namespace, topic, name, **kw)
            if killed or name not in children:
                return made
            killed.append(name)
            await cluster.brokers.stop(gone)
            raise BrokerUnreachable(f"{url} died before answering")

        monkeypatch.setattr(BrokerAdmin, "create_segment", parent_broker_dies)
        await cluster.request_split(0)
        topic = await cluster.finished("RolledBack")
        assert killed

        assert topic.status.pending_operation is None and topic.status.epoch == 0
        assert topic.status.phase == "Ready"
        last = topic.status.last_operation
        assert last is not None
        assert last.message == (
            f"split of segment 0 rolled back: segment 0's broker {parent_url} is gone: its "
            "subscriptions cannot be read and it cannot be sealed"
        )
        assert ("Warning", "ScalingRolledBack", last.message) in await cluster.events()
        assert sorted(await cluster.segments()) == [0]  # the children's objects are gone
        other = "b" if gone == "a" else "a"
        assert await cluster.hosted(other) == set()

        # Back on its disk: whatever it held of the children is removed; its segment stays.
        await cluster.brokers.start(gone)

        async def only_the_parent() -> bool:
            return await cluster.hosted(gone) == {layout.get(0).descriptor}

        await eventually(only_the_parent, "the returning broker holding only segment 0")
        assert children.keys().isdisjoint(await cluster.hosted(gone))


@pytest.mark.parametrize("dies", ["before-sealing", "before-answering"])
async def test_a_split_waits_for_its_parents_broker_once_children_exist_and_the_topic_goes_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, dies: str
) -> None:
    async with running_cluster(tmp_path) as cluster:
        layout = await cluster.create_topic(2, ["billing"])
        parent_url = await cluster.broker_of(0)
        gone = name_of(cluster, parent_url)
        assert await cluster.broker_of(1) != parent_url
        terminate = BrokerAdmin.terminate_segment
        killed: list[str] = []

        async def parent_broker_dies(
            self: BrokerAdmin, url: str, namespace: str, topic: str, name: str
        ) -> int:
            if killed or url != parent_url:
                return await terminate(self, url, namespace, topic, name)
            killed.append(name)
            if dies == "before-sealing":
                await cluster.brokers.stop(gone)
                return await terminate(self, url, namespace, topic, name)
            await terminate(self, url, namespace, topic, name)  # sealed: the split must go on
            await cluster.brokers.stop(gone)
            raise BrokerUnreachable(f"{url} died before answering")

        monkeypatch.setattr(BrokerAdmin, "terminate_segment", parent_broker_dies)
        await cluster.request_split(0)
        waits = (
            f"split of segment 0 waits for broker {parent_url} (segment 0's broker) to "
            "come back to seal it"
        )

        async def condition_says_why() -> bool:
            topic = await cluster.topic()
            condition = find_condition(topic.status.conditions, SCALING)
            return condition is not None and condition.message == waits

        await eventually(condition_says_why, "the Scaling condition naming the dead broker")
        topic = await cluster.topic()
        pending = topic.status.pending_operation
        assert pending is not None and pending.step == "ChildrenCreated"  # not rolled back
        condition = find_condition(topic.status.conditions, SCALING)
        assert condition is not None and condition.reason == scaling.WAITING_FOR_BROKER

        # The rest of the topic's work goes on: a subscription declared now reaches the
        # segment whose broker is live.
        raw = await cluster.store.get(ScalableTopic.KIND, NS, TOPIC)
        raw["spec"]["subscriptions"].append({"name": "audit", "type": "Queue"})
        await cluster.store.replace(raw)

        async def audit_on_segment_1() -> bool:
            return "audit" in await cluster.subscriptions_of(1)

        await eventually(audit_on_segment_1, "the new subscription on segment 1")
        assert (await cluster.topic()).status.pending_operation is not None

        # The parent's broker comes back: the split is finished, and the subscription reaches
        # the children too.
        await cluster.brokers.start(gone)
        topic = await cluster.finished("Succeeded")
        last = topic.status.last_operation
        assert last is not None and last.epoch == 1
        children = children_of(layout, 0).values()

        async def audit_everywhere() -> bool:
            for segment_id in (1, *children):
                if "audit" not in await cluster.subscriptions_of(segment_id):
                    return False
            return True

        await eventually(audit_everywhere, "the new subscription on every active segment")
