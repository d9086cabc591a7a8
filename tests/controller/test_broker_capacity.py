"""A broker hosts as many segments as its open files allow (or --max-segments): past that it
refuses new ones (507 BrokerFull), announces its capacity with its heartbeat, and the
controller places segments on brokers with room."""

from __future__ import annotations

import asyncio
import resource
from pathlib import Path

import aiohttp
import pytest

from scalable_topics.admin.broker_admin import BROKER_FULL_STATUS, BrokerAdmin, BrokerAdminError
from scalable_topics.broker.open_files import (
    FILES_PER_SEGMENT,
    RESERVED_FILES,
    FileBudget,
    file_budget,
    raise_open_files_limit,
    segment_capacity,
)
from scalable_topics.controller.brokers import registered_brokers
from scalable_topics.controller.manager import ControllerManager
from scalable_topics.model.resources import ScalableTopic, Segment
from scalable_topics.store import EmbeddedStore
from scalable_topics.store.informers import Informers
from scalable_topics.tasks import cancel_and_wait
from support.eventually import eventually
from support.servers import broker_server, controller_config


def test_the_capacity_is_what_the_open_files_leave_after_a_reserve_and_the_connections() -> None:
    files = RESERVED_FILES + 10 * FILES_PER_SEGMENT + FILES_PER_SEGMENT - 1
    assert segment_capacity(files, connections=0) == 10
    assert segment_capacity(files + 30, connections=30) == 10
    assert segment_capacity(100, connections=0) == 0
    # Connections come first, up to half the files, so that few files still host segments.
    assert file_budget(10_000, limit=1_048_576) == FileBudget(1_048_576, 10_000, 345_850)
    assert file_budget(10_000, limit=20_000) == FileBudget(20_000, 10_000, 2_992)
    assert file_budget(10_000, limit=4_096) == FileBudget(4_096, 2_048, 341)
    assert file_budget(10_000, limit=1_024) == FileBudget(1_024, 512, 0)
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    try:
        assert raise_open_files_limit() == hard  # the soft limit goes up to the hard one
        assert raise_open_files_limit(soft) == soft
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


async def test_a_full_broker_refuses_new_segments_but_not_its_own(tmp_path: Path) -> None:
    async with await EmbeddedStore.open(tmp_path / "store.db") as store:
        server = broker_server(store, tmp_path / "b", max_segments=2)
        await server.start_server()
        url = f"ws://127.0.0.1:{server.port}"
        try:
            async with aiohttp.ClientSession() as http:
                admin = BrokerAdmin(http)
                for index in range(2):
                    await admin.create_segment(url, "default", f"t{index}", "0000-ffff-0")
                with pytest.raises(BrokerAdminError) as full:
                    await admin.create_segment(url, "default", "t2", "0000-ffff-0")
                assert (full.value.status, full.value.code) == (BROKER_FULL_STATUS, "BrokerFull")
                assert "hosts 2 segments" in full.value.message
                # Creating one it hosts is idempotent, full or not.
                await admin.create_segment(url, "default", "t0", "0000-ffff-0")
        finally:
            await server.close()


async def test_segments_go_to_brokers_with_room(tmp_path: Path) -> None:
    async with await EmbeddedStore.open(tmp_path / "store.db") as store:
        informers = Informers(store, "scalable-topics")
        informers.start()
        small = broker_server(store, tmp_path / "small", broker_id="small", max_segments=1)
        large = broker_server(store, tmp_path / "large", broker_id="large")
        for server in (small, large):
            await server.start_server()
        manager = ControllerManager(store, controller_config("controller-0"))
        running = asyncio.create_task(manager.run())
        try:
            capacities = lambda: {b.identity: b.capacity for b in registered_brokers(informers)}  # noqa: E731
            await eventually(lambda: capacities().get("small") == 1, "the small broker's capacity")
            await store.create(
                ScalableTopic.model_validate(
                    {
                        "metadata": {"name": "orders", "namespace": "default"},
                        "spec": {"initialSegments": 4},
                    }
                ).to_wire()
            )

            async def ready() -> bool:
                raw = await store.get(ScalableTopic.KIND, "default", "orders")
                return (raw.get("status") or {}).get("phase") == "Ready"

            await eventually(ready, "the topic Ready")
            placed = [
                Segment.model_validate(o).status.broker
                for o in (await store.list(Segment.KIND)).items
            ]
            assert sorted(placed).count(f"ws://127.0.0.1:{small.port}") == 1
            assert sorted(placed).count(f"ws://127.0.0.1:{large.port}") == 3
        finally:
            await cancel_and_wait(running)
            for server in (small, large):
                await server.close()
            await informers.stop()
