"""The whole service in the test's event loop: an embedded store, broker applications on
loopback and a controller, for client tests that need splits and merges but no processes."""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aiohttp.test_utils import TestServer

from scalable_topics.broker.topic_admin import INFORMERS_KEY
from scalable_topics.controller.leader import ElectionTiming
from scalable_topics.controller.manager import ControllerManager
from scalable_topics.model.layout import SegmentLayout
from scalable_topics.model.resources import ScalableTopic
from scalable_topics.model.scale_request import (
    MERGE_ANNOTATION,
    REQUESTER_ANNOTATION,
    SPLIT_ANNOTATION,
)
from scalable_topics.store import EmbeddedStore
from scalable_topics.store.informers import Informers
from scalable_topics.tasks import cancel_and_wait

from .eventually import eventually
from .servers import broker_server, controller_config

TIMEOUT = 30.0  # bounds a failing test only


@dataclass
class Service:
    store: EmbeddedStore
    brokers: list[TestServer]

    @property
    def url(self) -> str:
        return ",".join(f"ws://127.0.0.1:{server.port}" for server in self.brokers)

    async def brokers_show(self, check: Callable[[Informers], bool], what: str) -> None:
        """Wait until every broker's caches of the store pass ``check``: after a write a
        client must see through them (a DAG watch answers from the caches)."""
        caches = [server.app[INFORMERS_KEY] for server in self.brokers]
        await eventually(lambda: all(check(c) for c in caches), what)

    async def create_topic(
        self,
        name: str,
        initial: int = 1,
        subscriptions: Sequence[tuple[str, str]] = (),
        namespace: str = "default",
    ) -> None:
        manifest = ScalableTopic.model_validate(
            {
                "metadata": {"name": name, "namespace": namespace},
                "spec": {
                    "initialSegments": initial,
                    "subscriptions": [{"name": n, "type": t} for n, t in subscriptions],
                },
            }
        )
        await self.store.create(manifest.to_wire())
        async with asyncio.timeout(TIMEOUT):
            while (await self.topic(name, namespace)).status.phase != "Ready":
                await asyncio.sleep(0.02)

    async def topic(self, name: str, namespace: str = "default") -> ScalableTopic:
        return ScalableTopic.model_validate(
            await self.store.get(ScalableTopic.KIND, namespace, name)
        )

    async def layout(self, name: str, namespace: str = "default") -> SegmentLayout:
        return SegmentLayout.from_status((await self.topic(name, namespace)).status.to_wire())

    async def scale(self, name: str, annotation: str, value: str, token: str) -> None:
        """Ask the controller for a split or merge and wait until it succeeded."""
        await self.store.patch(
            ScalableTopic.KIND,
            "default",
            name,
            {"metadata": {"annotations": {annotation: value, REQUESTER_ANNOTATION: token}}},
        )
        async with asyncio.timeout(TIMEOUT):
            while True:
                last = (await self.topic(name)).status.last_operation
                if last is not None and last.requested_by == token:
                    break
                await asyncio.sleep(0.01)
        assert last.result == "Succeeded", last.message

    async def split(self, name: str, segment_id: int, token: str) -> None:
        await self.scale(name, SPLIT_ANNOTATION, str(segment_id), token)

    async def merge(self, name: str, first: int, second: int, token: str) -> None:
        await self.scale(name, MERGE_ANNOTATION, f"{first},{second}", token)

    async def scale_randomly(
        self, name: str, operations: int, seed: int, max_segments: int = 6
    ) -> list[str]:
        """``operations`` random splits and merges with short pauses between them."""
        rng = random.Random(seed)
        done = []
        for index in range(operations):
            await asyncio.sleep(rng.uniform(0.05, 0.25))
            active = (await self.layout(name)).active
            if len(active) == 1 or (len(active) < max_segments and rng.random() < 0.55):
                target = rng.choice([s for s in active if s.hash_range.can_split()])
                await self.split(name, target.segment_id, f"{name}-op-{index}")
                done.append(f"split {target.segment_id}")
            else:
                first = rng.randrange(len(active) - 1)
                a, b = active[first].segment_id, active[first + 1].segment_id
                await self.merge(name, a, b, f"{name}-op-{index}")
                done.append(f"merge {a},{b}")
        return done


@asynccontextmanager
async def running_service(
    tmp_path: Path, brokers: int = 2, **broker_settings: Any
) -> AsyncIterator[Service]:
    """``broker_settings`` are further BrokerConfig fields of every broker."""
    async with await EmbeddedStore.open(tmp_path / "store.db") as store:
        servers = []
        for index in range(brokers):
            server = broker_server(
                store, tmp_path / f"broker-{index}", broker_id=f"broker-{index}", **broker_settings
            )
            await server.start_server()
            servers.append(server)
        timing = ElectionTiming(lease_duration=3, renew_deadline=2, retry_period=0.5)
        manager = ControllerManager(store, controller_config("controller-0", timing=timing))
        running = asyncio.create_task(manager.run())
        try:
            yield Service(store, servers)
        finally:
            await cancel_and_wait(running)
            for server in servers:
                await server.close()
