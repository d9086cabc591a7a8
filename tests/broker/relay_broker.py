"""A broker on an embedded store with a FakeController leading topic default/orders, for the
tests of the relays of consumer registrations and exclusive producer grants."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

from fake_controller import FakeController

from scalable_topics.model.resources import CONTROLLER_ENDPOINT_ANNOTATION, controller_lease_name
from scalable_topics.store import EmbeddedStore, NotFound
from support.servers import broker_server


@dataclass
class RelayBroker:
    store: EmbeddedStore
    broker_url: str
    controller: FakeController

    async def lead(self, controller: FakeController) -> None:
        """Point the topic's Lease at ``controller``, as a new leader's acquisition does."""
        name = controller_lease_name("orders")
        annotations = {CONTROLLER_ENDPOINT_ANNOTATION: controller.url}
        try:
            lease = await self.store.get("Lease", "default", name)
        except NotFound:
            await self.store.create(
                {
                    "apiVersion": "coordination.k8s.io/v1",
                    "kind": "Lease",
                    "metadata": {"name": name, "namespace": "default", "annotations": annotations},
                    "spec": {"holderIdentity": "fake", "leaseDurationSeconds": 15},
                }
            )
            return
        lease["metadata"]["annotations"] = annotations
        lease["spec"]["leaseTransitions"] = lease["spec"].get("leaseTransitions", 0) + 1
        await self.store.replace(lease)


@contextlib.asynccontextmanager
async def relay_broker(tmp_path: Path) -> AsyncIterator[RelayBroker]:
    async with await EmbeddedStore.open(tmp_path / "store.db") as store:
        server = broker_server(store, tmp_path / "broker")
        await server.start_server()
        controller = FakeController()
        await controller.start()
        ready = RelayBroker(store, f"http://127.0.0.1:{server.port}", controller)
        await ready.lead(controller)
        try:
            yield ready
        finally:
            await server.close()
            await controller.close()
