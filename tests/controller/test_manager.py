"""Two controller processes' managers in one test: one leads each topic, which becomes Ready;
deleting it leaves nothing behind, not even the topic's Lease."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

from aiohttp.test_utils import TestServer

from scalable_topics.controller.leader import ElectionTiming
from scalable_topics.controller.manager import (
    ENDPOINT_ANNOTATION,
    ControllerConfig,
    ControllerManager,
)
from scalable_topics.model.resources import ScalableTopic, Segment
from scalable_topics.store import EmbeddedStore, NotFound
from support.eventually import eventually

FAST = ElectionTiming(lease_duration=3, renew_deadline=2, retry_period=0.5)


async def test_one_leader_per_topic_readies_and_cleans_up(
    tmp_path: Path, make_broker: Callable[..., TestServer]
) -> None:
    async with await EmbeddedStore.open(tmp_path / "store.db") as store:
        broker = make_broker(store, "b")
        managers = [
            ControllerManager(
                store,
                ControllerConfig(f"controller-{i}", f"http://controller-{i}:8080", timing=FAST),
            )
            for i in range(2)
        ]
        tasks = [asyncio.create_task(m.run()) for m in managers]
        try:
            await store.create(
                ScalableTopic.model_validate(
                    {
                        "metadata": {"name": "orders", "namespace": "default"},
                        "spec": {"initialSegments": 3},
                    }
                ).to_wire()
            )
            # No broker is registered yet: the leader keeps retrying until one is.
            await asyncio.sleep(1)
            pending = ScalableTopic.model_validate(
                await store.get(ScalableTopic.KIND, "default", "orders")
            )
            assert pending.status.phase != "Ready"
            await broker.start_server()

            async def ready() -> bool:
                topic = ScalableTopic.model_validate(
                    await store.get(ScalableTopic.KIND, "default", "orders")
                )
                return topic.status.phase == "Ready"

            await eventually(ready)
            topic = ScalableTopic.model_validate(
                await store.get(ScalableTopic.KIND, "default", "orders")
            )
            lease = await store.get("Lease", "default", "orders-controller")
            holder = lease["spec"]["holderIdentity"]
            assert topic.status.controller is not None
            assert topic.status.controller.identity == holder
            assert lease["metadata"]["annotations"][ENDPOINT_ANNOTATION] == f"http://{holder}:8080"
            assert len((await store.list(Segment.KIND)).items) == 3

            await store.delete(ScalableTopic.KIND, "default", "orders")

            async def gone() -> bool:
                try:
                    await store.get("Lease", "default", "orders-controller")
                except NotFound:
                    return (await store.list(ScalableTopic.KIND)).items == []
                return False

            await eventually(gone)
            assert (await store.list(Segment.KIND)).items == []
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            await broker.close()
