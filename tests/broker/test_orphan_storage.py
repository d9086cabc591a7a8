"""A returning broker removes the storage of segments that no longer exist, and empty copies of
segments placed on another broker, and nothing else."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, cast

import pytest

from scalable_topics.broker.config import BrokerConfig
from scalable_topics.broker.orphan_storage import (
    is_placed_elsewhere,
    reclaim_orphaned_storage,
    store_knows_broker,
)
from scalable_topics.broker.registration import Registration
from scalable_topics.broker.registry import SegmentRegistry
from scalable_topics.model.hash_range import HashRange
from scalable_topics.model.layout import SegmentLayout
from scalable_topics.model.placement import BROKER_URL_ANNOTATION, broker_lease_name
from scalable_topics.model.resources import (
    TOPIC_LABEL,
    ProducerAccessMode,
    ScalableTopic,
    Segment,
    segment_object_name,
)
from scalable_topics.model.segment import descriptor
from scalable_topics.protocol import BatchMessage, Send
from scalable_topics.store import EmbeddedStore, Store
from scalable_topics.store.kinds import LEASE

NOW = datetime(2026, 1, 1, tzinfo=UTC)


class NoParents:
    def parents_drained(
        self, namespace: str, topic: str, parents: tuple[int, ...], subscription: str
    ) -> bool:
        return True

    def mark_drained(self, namespace: str, topic: str, descriptor: str, subscription: str) -> None:
        pass

    def listen(
        self, namespace: str, topic: str, parents: tuple[int, ...], callback: Callable[[], None]
    ) -> Callable[[], None]:
        return lambda: None


@dataclass
class Broker:
    store: EmbeddedStore
    registry: SegmentRegistry
    config: BrokerConfig

    async def host(self, topic: str, segment_id: int, start: int, end: int) -> str:
        name = descriptor(segment_id, HashRange(start, end))
        await self.registry.create("default", topic, name, (), [], 0)
        return f"{topic}/{name}"

    async def write_to(self, topic: str, segment_id: int) -> None:
        segment = self.registry.get("default", topic, segment_id)
        await segment.open_producer("p", "p", ProducerAccessMode.SHARED, None, None)  # type: ignore[arg-type]
        await segment.publish("p", Send(1, 0, (BatchMessage(b"m", "k"),)))
        await segment.close_producer("p")

    async def reclaim(self, store: Store | None = None) -> list[str]:
        return await reclaim_orphaned_storage(store or self.store, self.registry, self.config)

    def hosted(self) -> set[str]:
        return {f"{s.key.topic}/{s.meta.descriptor}" for s in self.registry}


@pytest.fixture
async def broker(tmp_path: Path) -> AsyncIterator[Broker]:
    async with await EmbeddedStore.open(tmp_path / "store.db") as store:
        config = BrokerConfig(
            data_dir=tmp_path / "broker", store_url="embedded:unused.db", port=7000
        )
        registry = SegmentRegistry(config, NoParents())
        await registry.start()
        try:
            yield Broker(store, registry, config)
        finally:
            await registry.close()


async def make_topic(
    store: EmbeddedStore,
    name: str,
    layout: SegmentLayout,
    pending: dict[str, Any] | None = None,
    deleting: bool = False,
) -> None:
    manifest = ScalableTopic.model_validate(
        {"metadata": {"name": name, "namespace": "default", "finalizers": ["test/hold"]}}
    ).to_wire()
    raw = await store.create(manifest)
    raw["status"] = layout.to_status()
    if pending is not None:
        raw["status"]["pendingOperation"] = pending
    await store.replace_status(raw)
    if deleting:
        await store.delete(ScalableTopic.KIND, "default", name)


async def make_object(
    store: EmbeddedStore,
    topic: str,
    segment_id: int,
    start: int,
    end: int,
    broker: str | None = None,
) -> None:
    name = segment_object_name(topic, descriptor(segment_id, HashRange(start, end)))
    await store.create(
        Segment.model_validate(
            {
                "metadata": {
                    "name": name,
                    "namespace": "default",
                    "labels": {TOPIC_LABEL: topic},
                },
                "spec": {
                    "topic": topic,
                    "segmentId": segment_id,
                    "hashRange": {"start": start, "end": end},
                },
            }
        ).to_wire()
    )
    if broker is not None:
        await store.patch_status(Segment.KIND, "default", name, {"status": {"broker": broker}})


async def make_broker_lease(
    store: EmbeddedStore, identity: str, url: str | None, namespace: str = "scalable-topics"
) -> None:
    """A broker's heartbeat Lease carrying ``url`` (None: released, it carries none)."""
    annotations = {} if url is None else {BROKER_URL_ANNOTATION: url}
    await store.create(
        {
            "apiVersion": LEASE.api_version,
            "kind": LEASE.kind,
            "metadata": {
                "name": broker_lease_name(identity),
                "namespace": namespace,
                "annotations": annotations,
            },
            "spec": {"holderIdentity": identity if url else "", "leaseDurationSeconds": 15},
        }
    )


async def test_only_storage_of_segments_that_no_longer_exist_is_removed(broker: Broker) -> None:
    # live: 0 split into 2 and 3, 0 pruned; a split of 1 into 4 and 5 is being made.
    layout = SegmentLayout.initial(2, NOW).split(0, NOW).prune(0)
    pending = {**layout.plan_split(1).to_dict(), "step": "Planned"}
    await make_topic(broker.store, "live", layout, pending)
    await make_object(broker.store, "live", 1, 0x8000, 0xFFFF)
    await make_object(broker.store, "live", 2, 0x0000, 0x3FFF)
    await make_topic(broker.store, "leaving", SegmentLayout.initial(1, NOW), deleting=True)

    kept = {
        await broker.host("live", 1, 0x8000, 0xFFFF),  # its object exists
        await broker.host("live", 2, 0x0000, 0x3FFF),
        # No object (deleted by hand), but the layout holds it: the data is live.
        await broker.host("live", 3, 0x4000, 0x7FFF),
        # A child of the pending split, its object not made yet or being rolled back.
        await broker.host("live", 4, 0x8000, 0xBFFF),
    }
    reclaimed = {
        await broker.host("live", 0, 0x0000, 0x7FFF),  # pruned
        await broker.host("live", 6, 0x8000, 0xBFFF),  # a child rolled back earlier
        await broker.host("gone", 0, 0x0000, 0xFFFF),  # its topic was deleted
        await broker.host("leaving", 0, 0x0000, 0xFFFF),  # its topic is being deleted
    }

    done = await broker.reclaim()

    assert sorted(done) == sorted(f"default/{entry}" for entry in reclaimed)
    assert broker.hosted() == kept


class ChangedAfterListingSegments:
    """The store, changed by ``meanwhile`` just after the broker listed the Segment objects."""

    def __init__(self, store: EmbeddedStore) -> None:
        self._store = store

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)

    async def list(
        self, kind: str, namespace: str | None = None, label_selector: str | None = None
    ) -> Any:
        listing = await self._store.list(kind, namespace, label_selector)
        if kind == Segment.KIND:
            await self.meanwhile()
        return listing

    async def meanwhile(self) -> None:
        raise NotImplementedError


class CreatedMeanwhile(ChangedAfterListingSegments):
    """A topic of the same name is created again (with the segment's object) just after the
    broker read that it was gone."""

    async def meanwhile(self) -> None:
        await make_topic(self._store, "orders", SegmentLayout.initial(1, NOW))
        await make_object(self._store, "orders", 0, 0x0000, 0xFFFF)


async def test_storage_whose_object_appears_before_the_deletion_is_kept(broker: Broker) -> None:
    entry = await broker.host("orders", 0, 0x0000, 0xFFFF)
    done = await broker.reclaim(cast(Store, CreatedMeanwhile(broker.store)))
    assert done == []
    assert broker.hosted() == {entry}


def test_only_an_empty_copy_placed_on_another_registered_broker_is_left_behind() -> None:
    others = {"ws://b:1"}
    assert is_placed_elsewhere("ws://b:1", "ws://a:1", others, written=False)
    assert not is_placed_elsewhere("ws://b:1", "ws://a:1", others, written=True)
    assert not is_placed_elsewhere("ws://a:1", "ws://a:1", others | {"ws://a:1"}, written=False)
    assert not is_placed_elsewhere("ws://c:1", "ws://a:1", others, written=False)
    assert not is_placed_elsewhere(None, "ws://a:1", others, written=False)


async def test_an_empty_copy_of_a_segment_placed_on_another_broker_is_removed(
    broker: Broker,
) -> None:
    # A split of 0 into 1 and 2 is being made (or was committed): the children were made here,
    # then placed on another broker while this one was gone.
    layout = SegmentLayout.initial(1, NOW)
    pending = {**layout.plan_split(0).to_dict(), "step": "Planned"}
    await make_topic(broker.store, "orders", layout, pending)
    own, other = broker.config.url, "ws://127.0.0.1:7001"
    await make_broker_lease(broker.store, broker.config.identity, own)
    await make_broker_lease(broker.store, "127.0.0.1:7001", other)
    await make_broker_lease(broker.store, "127.0.0.1:7002", None)  # released
    await make_object(broker.store, "orders", 0, 0x0000, 0xFFFF, own)
    await make_object(broker.store, "orders", 1, 0x0000, 0x7FFF, other)
    await make_object(broker.store, "orders", 2, 0x8000, 0xFFFF, other)
    await make_object(broker.store, "orders", 3, 0x0000, 0x3FFF, "ws://127.0.0.1:7002")
    await make_object(broker.store, "orders", 4, 0x4000, 0x7FFF, "ws://127.0.0.1:7009")
    await make_object(broker.store, "orders", 5, 0x8000, 0xBFFF)

    kept = {
        await broker.host("orders", 0, 0x0000, 0xFFFF),  # placed here
        await broker.host("orders", 2, 0x8000, 0xFFFF),  # placed elsewhere, but written here
        await broker.host("orders", 3, 0x0000, 0x3FFF),  # its broker's Lease carries no URL
        await broker.host("orders", 4, 0x4000, 0x7FFF),  # no broker is known by that URL
        await broker.host("orders", 5, 0x8000, 0xBFFF),  # not placed
    }
    await broker.write_to("orders", 2)
    reclaimed = await broker.host("orders", 1, 0x0000, 0x7FFF)

    assert await broker.reclaim() == [f"default/{reclaimed}"]
    assert broker.hosted() == kept


class PlacedHereMeanwhile(ChangedAfterListingSegments):
    """The controller places the segment on this broker again just after the broker listed
    its objects (its other broker died too)."""

    def __init__(self, store: EmbeddedStore, object_name: str, url: str) -> None:
        super().__init__(store)
        self._object_name, self._url = object_name, url

    async def meanwhile(self) -> None:
        await self._store.patch_status(
            Segment.KIND, "default", self._object_name, {"status": {"broker": self._url}}
        )


async def test_a_copy_placed_here_again_before_the_deletion_is_kept(broker: Broker) -> None:
    await make_topic(broker.store, "orders", SegmentLayout.initial(1, NOW))
    await make_broker_lease(broker.store, "127.0.0.1:7001", "ws://127.0.0.1:7001")
    await make_object(broker.store, "orders", 0, 0x0000, 0xFFFF, "ws://127.0.0.1:7001")
    entry = await broker.host("orders", 0, 0x0000, 0xFFFF)
    name = segment_object_name("orders", descriptor(0, HashRange(0x0000, 0xFFFF)))
    store = PlacedHereMeanwhile(broker.store, name, broker.config.url)
    assert await broker.reclaim(cast(Store, store)) == []
    assert broker.hosted() == {entry}


async def test_a_store_that_never_saw_the_broker_proves_nothing_about_its_storage(
    tmp_path: Path, broker: Broker
) -> None:
    config = BrokerConfig(data_dir=tmp_path / "broker", store_url="embedded:unused.db", port=7001)
    assert not await store_knows_broker(broker.store, config.system_namespace, config.identity, 0)
    registration = Registration(broker.store, config, lambda: (0, 0.0))
    await registration.start()
    await registration.stop()  # released, not removed: the store remembers the broker
    assert await store_knows_broker(broker.store, config.system_namespace, config.identity, 0)
