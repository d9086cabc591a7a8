"""Deleting a topic while brokers are dead or hung, with real processes: the deletion does not
wait for them, and each removes its storage of the topic when it registers again."""

from __future__ import annotations

import asyncio
import os
import signal
from pathlib import Path

import pytest

from scalable_topics.model.placement import BROKER_SEGMENTS_ANNOTATION, BROKER_URL_ANNOTATION
from scalable_topics.model.resources import TOPIC_LABEL, ScalableTopic, Segment
from scalable_topics.store import EmbeddedStore, NotFound
from scalable_topics.store.kinds import LEASE
from support.broker_process import BrokerProcess
from support.controller_process import ControllerProcess

pytestmark = pytest.mark.slow

TIMEOUT = 60.0  # bounds a failing test only


async def create_ready(store: EmbeddedStore, name: str, segments: int) -> None:
    manifest = {
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"initialSegments": segments},
    }
    await store.create(ScalableTopic.model_validate(manifest).to_wire())
    async with asyncio.timeout(TIMEOUT):
        while True:
            topic = ScalableTopic.model_validate(
                await store.get(ScalableTopic.KIND, "default", name)
            )
            if topic.status.phase == "Ready":
                return
            await asyncio.sleep(0.05)


async def placements(store: EmbeddedStore, topic: str) -> dict[str, str]:
    """Segment object name -> the ws:// URL of its broker."""
    listing = await store.list(
        Segment.KIND, namespace="default", label_selector=f"{TOPIC_LABEL}={topic}"
    )
    segments = [Segment.model_validate(item) for item in listing.items]
    return {s.metadata.name: s.status.broker or "" for s in segments}


async def until_reported(store: EmbeddedStore, brokers: list[BrokerProcess], segments: int) -> None:
    """Wait until each broker's heartbeat Lease reports hosting ``segments`` segments: the
    load placement reads (a heartbeat behind the others would make the next placement skip a
    broker that looks busier)."""
    urls = {b.ws_url for b in brokers}
    async with asyncio.timeout(TIMEOUT):
        while True:
            listing = await store.list(LEASE.kind, namespace="scalable-topics")
            reported = {
                annotations.get(BROKER_URL_ANNOTATION): annotations.get(BROKER_SEGMENTS_ANNOTATION)
                for lease in listing.items
                if (annotations := lease["metadata"].get("annotations") or {})
            }
            if all(reported.get(url) == str(segments) for url in urls):
                return
            await asyncio.sleep(0.05)


async def hosted(broker: BrokerProcess) -> set[str]:
    """What the broker's disk holds, as topic/descriptor."""
    status, listing = await broker.admin("GET", "")
    assert status == 200 and isinstance(listing, list)
    return {f"{entry['topic']}/{entry['descriptor']}" for entry in listing}


async def until_gone(store: EmbeddedStore, topic: str) -> None:
    async with asyncio.timeout(TIMEOUT):
        while True:
            try:
                await store.get(ScalableTopic.KIND, "default", topic)
            except NotFound:
                return
            await asyncio.sleep(0.05)


async def until_reclaimed(broker: BrokerProcess, topic: str) -> set[str]:
    """What the broker holds once none of it belongs to ``topic``."""
    async with asyncio.timeout(TIMEOUT):
        while True:
            left = await hosted(broker)
            if not any(entry.startswith(f"{topic}/") for entry in left):
                return left
            await asyncio.sleep(0.05)


async def test_a_topic_is_deleted_past_dead_brokers_which_reclaim_its_storage_on_return(
    tmp_path: Path,
) -> None:
    store_url = f"embedded://{tmp_path / 'store.db'}"
    brokers = []
    for name in ("a", "b", "c"):
        (tmp_path / name).mkdir()
        brokers.append(BrokerProcess(tmp_path / name, store_url))
    controller = ControllerProcess(
        tmp_path, store_url, "controller-0", extra=("--broker-delete-timeout", "1")
    )
    try:
        for broker in brokers:
            await broker.start()
        controller.start()
        async with await EmbeddedStore.open(tmp_path / "store.db") as store:
            await create_ready(store, "orders", 3)
            await until_reported(store, brokers, 1)
            await create_ready(store, "stock", 3)
            # One segment of each topic on each broker (least-loaded placement).
            for topic in ("orders", "stock"):
                placed = sorted((await placements(store, topic)).values())
                assert placed == sorted(b.ws_url for b in brokers)
            dead, hung, alive = brokers
            stock_before = {b.ws_url: await hosted(b) for b in brokers}

            dead.kill()  # connections refused
            assert hung.process is not None
            os.kill(hung.process.pid, signal.SIGSTOP)  # connections accepted, never answered
            await store.delete(ScalableTopic.KIND, "default", "orders")
            await until_gone(store, "orders")
            assert await placements(store, "orders") == {}
            assert not any(entry.startswith("orders/") for entry in await hosted(alive))

            # Back on the same disk: it finds orders' storage without Segment objects.
            await dead.start()
            left = await until_reclaimed(dead, "orders")
            assert left == {e for e in stock_before[dead.ws_url] if e.startswith("stock/")}
            assert len(await placements(store, "stock")) == 3

            # The hung one may have taken the delete it was sent after the controller gave it
            # up; either way, once it registers again it holds nothing of orders.
            os.kill(hung.process.pid, signal.SIGCONT)
            hung.kill()
            await hung.start()
            left = await until_reclaimed(hung, "orders")
            assert left == {e for e in stock_before[hung.ws_url] if e.startswith("stock/")}
    finally:
        for broker in brokers:
            if broker.process is not None and broker.process.poll() is None:
                os.kill(broker.process.pid, signal.SIGCONT)
        controller.kill()
        for broker in brokers:
            broker.stop()
