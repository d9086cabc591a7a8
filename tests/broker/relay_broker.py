"""A broker on an embedded store with a FakeController leading topic default/orders, for the
tests of the relays of consumer registrations and exclusive producer grants."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dag_objects import create_topic
from fake_controller import FakeController

from scalable_topics.store import EmbeddedStore, NotFound
from scalable_topics.store.informers import Informers
from support.leases import put_lease, topic_lease
from support.servers import broker_server


@dataclass
class RelayBroker:
    store: EmbeddedStore
    broker_url: str
    controller: FakeController

    async def lead(self, controller: FakeController) -> None:
        """Point the topic's shard Lease at ``controller``, as a new leader's acquisition
        does."""
        try:
            lease = await topic_lease(self.store, "default", "orders")
        except NotFound:
            await put_lease(self.store, "fake", controller.url)
            return
        transitions = lease["spec"].get("leaseTransitions", 0) + 1
        await put_lease(self.store, "fake", controller.url, transitions)


@contextlib.asynccontextmanager
async def relay_broker(tmp_path: Path, **settings: Any) -> AsyncIterator[RelayBroker]:
    """``settings``: further BrokerConfig fields."""
    async with await EmbeddedStore.open(tmp_path / "store.db") as store:
        await create_topic(store, "default", "orders", None)
        informers = Informers(store, "scalable-topics")
        informers.start()
        server = broker_server(store, tmp_path / "broker", informers, **settings)
        await server.start_server()
        controller = FakeController()
        await controller.start()
        ready = RelayBroker(store, f"http://127.0.0.1:{server.port}", controller)
        await ready.lead(controller)
        async with asyncio.timeout(10):  # the broker knows the topic and its leader
            while informers.leader_endpoint("default", "orders") != controller.url:
                await asyncio.sleep(0.01)
        try:
            yield ready
        finally:
            await server.close()
            await controller.close()
            await informers.stop()
