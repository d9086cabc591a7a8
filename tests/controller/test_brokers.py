"""Brokers register with a heartbeat Lease; the controller finds the live ones and places."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import aiohttp
from aiohttp.test_utils import TestServer

from scalable_topics.broker.app import build_app
from scalable_topics.broker.config import BrokerConfig
from scalable_topics.controller.brokers import registered_brokers
from scalable_topics.model.placement import choose_broker
from scalable_topics.store import EmbeddedStore


async def test_brokers_register_report_load_and_leave(tmp_path: Path) -> None:
    async with await EmbeddedStore.open(tmp_path / "store.db") as store:
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
            brokers = {b.identity: b for b in await registered_brokers(store, "scalable-topics")}
            assert set(brokers) == {"broker-0", "broker-1"}
            now = datetime.now(UTC)
            assert all(b.is_live(now) for b in brokers.values())
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
        remaining = {
            b.identity
            for b in await registered_brokers(store, "scalable-topics")
            if b.is_live(datetime.now(UTC))
        }
        assert remaining == {"broker-1"}  # a clean shutdown releases the lease at once
        await servers[1].close()
