"""The autoscaler in a real controller, with a real broker and real Stream consumers: a burst
of consumers on one segment splits the topic until each has a segment, every split asked by
the autoscaler through the scale request path, its cooldown committed with the layout."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

import pytest
from aiohttp.test_utils import TestServer
from stream_consumers import StreamConsumer

from scalable_topics.controller.leader import ElectionTiming
from scalable_topics.controller.manager import ControllerManager
from scalable_topics.model.layout import SegmentLayout
from scalable_topics.model.resources import ScalableTopic
from scalable_topics.store import EmbeddedStore
from scalable_topics.store.kinds import EVENT
from support.eventually import eventually
from support.servers import controller_config

pytestmark = pytest.mark.slow

FAST = ElectionTiming(lease_duration=3, renew_deadline=2, retry_period=0.5)


async def test_a_burst_of_four_stream_consumers_splits_one_segment_into_four(
    tmp_path: Path, make_broker: Callable[..., TestServer]
) -> None:
    async with await EmbeddedStore.open(tmp_path / "store.db") as store:
        broker = make_broker(store, "b")
        await broker.start_server()
        config = controller_config("controller-0", timing=FAST, consumer_grace_period=10)
        manager = asyncio.create_task(ControllerManager(store, config).run())
        consumers: list[StreamConsumer] = []
        try:
            await store.create(
                ScalableTopic.model_validate(
                    {
                        "metadata": {"name": "orders", "namespace": "default"},
                        "spec": {
                            "initialSegments": 1,
                            "subscriptions": [{"name": "s", "type": "Stream"}],
                            "autoScale": {"splitCooldownSeconds": 1},
                        },
                    }
                ).to_wire()
            )

            async def topic() -> ScalableTopic:
                raw = await store.get(ScalableTopic.KIND, "default", "orders")
                return ScalableTopic.model_validate(raw)

            async def ready() -> bool:
                return (await topic()).status.phase == "Ready"

            await eventually(ready, "the topic Ready")
            url = f"http://127.0.0.1:{broker.port}"
            for name in ("amy", "bob", "cat", "dan"):
                consumers.append(await StreamConsumer.join(url, "default/orders", "s", name))

            async def four_segments() -> bool:
                current = await topic()
                layout = SegmentLayout.from_status(current.status.to_wire())
                return len(layout.active) == 4 and current.status.pending_operation is None

            await eventually(four_segments, "4 active segments")
            current = await topic()
            last = current.status.last_operation
            assert last is not None and (last.kind, last.result) == ("Split", "Succeeded")
            assert (last.requested_by or "").startswith("autoscaler@controller-0/")
            auto_scale = current.status.auto_scale
            assert auto_scale is not None and auto_scale.last_split_time == last.finished_at
            assert auto_scale.last_action is not None
            assert auto_scale.last_action.rule == "consumers"
            events = (await store.list(EVENT.kind, namespace="default")).items
            auto_splits = [e["message"] for e in events if e["reason"] == "AutoSplit"]
            assert len(auto_splits) == 3
            assert all("rule consumers" in m and "subscription 's' has" in m for m in auto_splits)
            # Four consumers, four segments: nothing more to split.
            assert len([e for e in events if e["reason"] == "Split"]) == 3
        finally:
            for consumer in consumers:
                await consumer.disconnect()
            manager.cancel()
            await asyncio.gather(manager, return_exceptions=True)
            await broker.close()
