"""An embedded store with broker applications on loopback, and topic helpers, for controller
integration tests (subscriptions, stats, garbage collection)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
from aiohttp.test_utils import TestServer

from scalable_topics.admin.broker_admin import BrokerAdmin
from scalable_topics.controller.brokers import registered_brokers
from scalable_topics.controller.lifecycle import LeaderIdentity, TopicLifecycle
from scalable_topics.model.clock import Clock, SystemClock
from scalable_topics.model.layout import SegmentLayout
from scalable_topics.model.resources import TOPIC_LABEL, ScalableTopic, Segment
from scalable_topics.store import EmbeddedStore, Store
from scalable_topics.store.informers import Informers
from scalable_topics.store.write_through import WriteThroughStore

NAMESPACE, TOPIC = "default", "orders"
WAIT = 20.0


@dataclass
class Cluster:
    """``store`` writes through the controller's ``informers``: what a test writes there, a
    controller pass reads at once; brokers' writes arrive through the informers' watches."""

    store: WriteThroughStore
    informers: Informers
    admin: BrokerAdmin
    servers: list[TestServer]

    @property
    def broker_urls(self) -> list[str]:
        return [f"ws://127.0.0.1:{server.port}" for server in self.servers]

    def lifecycle(self, clock: Clock | None = None) -> TopicLifecycle:
        leader = LeaderIdentity("controller-0", "ws://controller-0:8080", 1)
        return TopicLifecycle(
            self.store,
            self.informers,
            self.admin,
            clock or SystemClock(),
            leader,
            "scalable-topics",
        )

    async def settled(self, check: Callable[[], bool], what: str) -> None:
        """Wait until the controller's informers show ``check`` (a broker's write, say)."""
        try:
            async with asyncio.timeout(WAIT):
                while not check():
                    await asyncio.sleep(0.01)
        except TimeoutError:
            raise AssertionError(f"the informers never showed {what}") from None


async def until_cached(informers: Informers, written: dict[str, Any]) -> None:
    """Wait until the informers hold ``written`` (or a later version of the object): after a
    write that did not go through them (a patch with no resourceVersion, another process's)."""
    informer = next(i for i in informers.all if i.kind == written["kind"])
    metadata = written["metadata"]
    version = int(metadata["resourceVersion"])
    try:
        async with asyncio.timeout(WAIT):
            while True:
                cached = informer.get(metadata.get("namespace", ""), metadata["name"])
                if cached is not None and int(cached["metadata"]["resourceVersion"]) >= version:
                    return
                await asyncio.sleep(0.005)
    except TimeoutError:
        raise AssertionError(f"the informers never showed {metadata['name']}") from None


@asynccontextmanager
async def controller_informers(store: Store) -> AsyncIterator[tuple[WriteThroughStore, Informers]]:
    """Running informers on ``store``, and the store writing through them, as a controller
    process has them."""
    informers = Informers(store, "scalable-topics")
    informers.start()
    try:
        await informers.wait_synced()
        yield informers.writing_through(store), informers
    finally:
        await informers.stop()


@asynccontextmanager
async def running_cluster(
    tmp_path: Path, make_broker: Callable[..., TestServer], brokers: int = 2
) -> AsyncIterator[Cluster]:
    async with (
        await EmbeddedStore.open(tmp_path / "store.db") as store,
        aiohttp.ClientSession() as http,
    ):
        informers = Informers(store, "scalable-topics")
        informers.start()
        servers: list[TestServer] = []
        try:
            for index in range(brokers):
                server = make_broker(store, f"b{index}")
                await server.start_server()
                servers.append(server)
            await informers.wait_synced()
            cluster = Cluster(
                informers.writing_through(store), informers, BrokerAdmin(http), servers
            )
            await cluster.settled(
                lambda: len(registered_brokers(informers)) == brokers, "every broker registered"
            )
            yield cluster
        finally:
            for server in servers:
                await server.close()
            await informers.stop()


def topic_manifest(
    initial: int = 1,
    subscriptions: Sequence[tuple[str, str]] = (("billing", "Stream"),),
    retention: dict[str, int] | None = None,
) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "initialSegments": initial,
        "subscriptions": [{"name": n, "type": t} for n, t in subscriptions],
    }
    if retention is not None:
        spec["retention"] = retention
    return ScalableTopic.model_validate(
        {"metadata": {"name": TOPIC, "namespace": NAMESPACE}, "spec": spec}
    ).to_wire()


async def read_topic(store: Store) -> ScalableTopic:
    return ScalableTopic.model_validate(await store.get(ScalableTopic.KIND, NAMESPACE, TOPIC))


async def segments_by_id(store: Store) -> dict[int, Segment]:
    listing = await store.list(
        Segment.KIND, namespace=NAMESPACE, label_selector=f"{TOPIC_LABEL}={TOPIC}"
    )
    segments = [Segment.model_validate(item) for item in listing.items]
    return {s.spec.segment_id: s for s in segments}


async def set_subscriptions(store: Store, subscriptions: Sequence[tuple[str, str]]) -> None:
    """Change spec.subscriptions, as ``kubectl edit`` would."""
    raw = await store.get(ScalableTopic.KIND, NAMESPACE, TOPIC)
    raw["spec"]["subscriptions"] = [{"name": n, "type": t} for n, t in subscriptions]
    await store.replace(raw)


async def split_by_hand(cluster: Cluster, segment_id: int, clock: Clock) -> SegmentLayout:
    """Seal ``segment_id`` on its broker and write the split layout (the next reconcile
    creates the children), standing in for the controller's split protocol."""
    topic = await read_topic(cluster.store)
    layout = SegmentLayout.from_status(topic.status.to_wire())
    parent = (await segments_by_id(cluster.store))[segment_id]
    assert parent.status.broker is not None
    await cluster.admin.terminate_segment(
        parent.status.broker, NAMESPACE, TOPIC, layout.get(segment_id).descriptor
    )
    split = layout.split(segment_id, clock.now())
    raw = topic.to_wire()
    raw["status"] = {**topic.status.to_wire(), **split.to_status()}
    await cluster.store.replace_status(raw)
    return split


async def subscriptions_on_brokers(cluster: Cluster) -> dict[int, list[str]]:
    """What each segment's broker holds, by segment id."""
    topic = await read_topic(cluster.store)
    layout = SegmentLayout.from_status(topic.status.to_wire())
    objects = await segments_by_id(cluster.store)
    result = {}
    for info in layout.segments.values():
        broker = objects[info.segment_id].status.broker
        assert broker is not None
        result[info.segment_id] = await cluster.admin.subscriptions(
            broker, NAMESPACE, TOPIC, info.descriptor
        )
    return result
