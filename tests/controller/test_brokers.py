"""Brokers register with a heartbeat Lease; the controller finds the live ones and places."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from pathlib import Path

import aiohttp
from aiohttp.test_utils import TestServer

from scalable_topics.broker.app import build_app
from scalable_topics.broker.config import BrokerConfig
from scalable_topics.controller.brokers import registered_brokers
from scalable_topics.model.placement import BrokerInfo, broker_lease_name, choose_broker
from scalable_topics.store import EmbeddedStore
from scalable_topics.store.informers import Informers


async def live_brokers(informers: Informers, expected: set[str]) -> dict[str, BrokerInfo]:
    """The live brokers as the controller's informers show them, once they are ``expected``."""
    async with asyncio.timeout(20):
        while True:
            now = datetime.now(UTC)
            live = {b.identity: b for b in registered_brokers(informers) if b.is_live(now)}
            if set(live) == expected:
                return live
            await asyncio.sleep(0.01)


async def test_brokers_register_report_load_and_leave(tmp_path: Path) -> None:
    async with await EmbeddedStore.open(tmp_path / "store.db") as store:
        informers = Informers(store, "scalable-topics")
        informers.start()
        servers = []
        for index in range(2):
            config = BrokerConfig(
                data_dir=tmp_path / f"broker-{index}",
                store_url="embedded:unused.db",
                broker_id=f"broker-{index}",
            )
            server = TestServer(build_app(config, store=store), host="127.0.0.1")
            await server.start_server()
            servers.append(server)
        try:
            async with aiohttp.ClientSession() as http:
                url = f"http://127.0.0.1:{servers[0].port}/admin/v1/segments/default/orders/0000-ffff-0"
                async with http.put(url, json={}) as response:
                    assert response.status == 201
            brokers = await live_brokers(informers, {"broker-0", "broker-1"})
            now = datetime.now(UTC)
            assert (
                brokers["broker-0"].url == "ws://127.0.0.1:6650"
            )  # the configured advertised address
            # broker-0 announced its load at its first beat (before the segment): both look idle,
            # so the name decides; once it reports the segment, broker-1 is the lighter one.
            assert choose_broker(list(brokers.values()), now).identity == "broker-0"
            assert (
                choose_broker(list(brokers.values()), now, planned={"broker-0": 1}).identity
                == "broker-1"
            )
        finally:
            await servers[0].close()

        # A clean shutdown releases the lease at once (its holder cleared), not by expiry.
        def held() -> bool:
            lease = informers.leases.get("scalable-topics", broker_lease_name("broker-0"))
            return bool(lease and lease["spec"].get("holderIdentity"))

        async with asyncio.timeout(20):
            while held():
                await asyncio.sleep(0.01)
        await live_brokers(informers, {"broker-1"})
        await servers[1].close()
        await informers.stop()
