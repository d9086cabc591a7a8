"""Stream consumers register through a real broker with a controller that serves its endpoint:
round-robin assignments, pushes on join, reconnection within the grace period, expiry, and
layout changes with undrained sealed parents (Pulsar bug #25642)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime
from pathlib import Path

import pytest
from aiohttp.test_utils import TestServer
from stream_consumers import StreamConsumer, segment_ids

from scalable_topics.controller.leader import ElectionTiming
from scalable_topics.controller.manager import ControllerManager
from scalable_topics.model.layout import SegmentLayout
from scalable_topics.model.resources import ScalableTopic, Segment, segment_object_name
from scalable_topics.protocol import BatchMessage
from scalable_topics.store import EmbeddedStore
from support.eventually import eventually
from support.servers import controller_config
from support.wire_client import WireClient

pytestmark = pytest.mark.slow

FAST = ElectionTiming(lease_duration=3, renew_deadline=2, retry_period=0.5)
GRACE = 4.0
TOPIC = "default/orders"


async def registered(store: EmbeddedStore) -> dict[str, list[int]]:
    topic = ScalableTopic.model_validate(await store.get(ScalableTopic.KIND, "default", "orders"))
    entry = next((e for e in topic.status.subscriptions if e.name == "s"), None)
    return {c.name: c.assigned_segments for c in entry.consumers} if entry else {}


@pytest.fixture
async def cluster(
    tmp_path: Path, make_broker: Callable[..., TestServer]
) -> AsyncIterator[tuple[EmbeddedStore, str]]:
    """A broker, a controller serving consumer sessions, and a Ready topic of 4 segments with
    one Stream subscription "s"."""
    async with await EmbeddedStore.open(tmp_path / "store.db") as store:
        broker = make_broker(store, "b")
        await broker.start_server()
        config = controller_config("controller-0", timing=FAST, consumer_grace_period=GRACE)
        manager = asyncio.create_task(ControllerManager(store, config).run())
        try:
            await store.create(
                ScalableTopic.model_validate(
                    {
                        "metadata": {"name": "orders", "namespace": "default"},
                        "spec": {
                            "initialSegments": 4,
                            "subscriptions": [{"name": "s", "type": "Stream"}],
                        },
                    }
                ).to_wire()
            )

            async def ready() -> bool:
                raw = await store.get(ScalableTopic.KIND, "default", "orders")
                return ScalableTopic.model_validate(raw).status.phase == "Ready"

            await eventually(ready)
            yield store, f"http://127.0.0.1:{broker.port}"
        finally:
            manager.cancel()
            await asyncio.gather(manager, return_exceptions=True)
            await broker.close()


async def test_assignments_follow_joins_reconnections_expiry_and_layout_changes(
    cluster: tuple[EmbeddedStore, str],
) -> None:
    store, broker_url = cluster
    amy = await StreamConsumer.join(broker_url, TOPIC, "s", "amy")
    assert segment_ids(await amy.next_assignment()) == [0, 1, 2, 3]
    bob = await StreamConsumer.join(broker_url, TOPIC, "s", "bob")
    first = await bob.next_assignment()
    assert segment_ids(first) == [1, 3]
    assert all(s.broker_url == broker_url.replace("http", "ws") for s in first.segments)
    assert segment_ids(await amy.next_assignment()) == [0, 2]  # balanced round-robin
    assert await registered(store) == {"amy": [0, 2], "bob": [1, 3]}

    # A third consumer joins: bob gives it one segment; amy keeps hers and is not told.
    cat = await StreamConsumer.join(broker_url, TOPIC, "s", "cat")
    assert segment_ids(await cat.next_assignment()) == [3]
    assert segment_ids(await bob.next_assignment()) == [1]

    # cat's connection drops; it comes back through a new connection within the grace period.
    await cat.disconnect()
    cat = await StreamConsumer.join(broker_url, TOPIC, "s", "cat")
    assert segment_ids(await cat.next_assignment()) == [3]
    # Then it leaves for good: the next push bob gets is the rebalance after the leave, so
    # nothing was pushed to it for the reconnection.
    await cat.leave()
    assert segment_ids(await bob.next_assignment()) == [1, 3]
    assert await registered(store) == {"amy": [0, 2], "bob": [1, 3]}
    await cat.disconnect()

    # bob goes away and stays away: after the grace period amy reads everything.
    await bob.disconnect()
    assert await registered(store) == {"amy": [0, 2], "bob": [1, 3]}
    everything = await amy.next_assignment()
    assert segment_ids(everything) == [0, 1, 2, 3]
    assert await registered(store) == {"amy": [0, 1, 2, 3]}

    # Segment 1 holds a message nobody consumed when a split seals it.
    producer = await WireClient.connect(broker_url)
    await producer.open_producer(1, TOPIC, 1)
    await producer.send(1, 0, BatchMessage(b"before the split"))
    await producer.close()
    bob = await StreamConsumer.join(broker_url, TOPIC, "s", "bob")
    assert segment_ids(await bob.next_assignment()) == [1, 3]
    assert segment_ids(await amy.next_assignment()) == [0, 2]
    raw = await store.get(ScalableTopic.KIND, "default", "orders")
    split = SegmentLayout.from_status(raw["status"]).split(1, datetime.now(UTC))  # 1 -> 4, 5
    await store.patch_status(ScalableTopic.KIND, "default", "orders", {"status": split.to_status()})
    # By range: 0, 1 (sealed, with backlog), 4, 5, 2, 3.
    amy_split = await amy.assignment_where([0, 4, 2])
    bob_split = await bob.assignment_where([1, 5, 3])
    assert amy_split.layout_epoch == bob_split.layout_epoch == split.epoch
    assert amy_split.term == everything.term

    # Once every message of 1 is acknowledged for "s", it leaves the assignment.
    parent = segment_object_name("orders", split.get(1).descriptor)
    await store.patch_status(
        Segment.KIND, "default", parent, {"status": {"drained": {"s": "2026-01-01T00:00:00Z"}}}
    )
    # Sticky: only the drained parent leaves (bob's); amy keeps hers and is not told.
    drained = await bob.assignment_where([5, 3])
    assert drained.layout_epoch >= split.epoch
    assert await registered(store) == {"amy": [0, 4, 2], "bob": [5, 3]}
    await amy.disconnect()
    await bob.disconnect()


async def test_refusals_reach_the_client_with_their_code(
    cluster: tuple[EmbeddedStore, str],
) -> None:
    from scalable_topics.protocol import ErrorCode
    from support.wire_client import RequestFailed

    _, broker_url = cluster
    client = await WireClient.connect(broker_url)
    try:
        cases = [
            ("default/nothing", "s", ErrorCode.TOPIC_NOT_FOUND),
            (TOPIC, "missing", ErrorCode.SUBSCRIPTION_NOT_FOUND),
            ("no-namespace", "s", ErrorCode.INVALID_REQUEST),
        ]
        for registration_id, (topic, subscription, code) in enumerate(cases, start=1):
            with pytest.raises(RequestFailed) as refused:
                await client.register_consumer(registration_id, topic, subscription, "amy")
            assert refused.value.code is code
        await client.register_consumer(10, TOPIC, "s", "amy")
        with pytest.raises(RequestFailed) as busy:
            await client.register_consumer(11, TOPIC, "s", "amy")
        assert busy.value.code is ErrorCode.CONSUMER_BUSY
        with pytest.raises(RequestFailed) as unknown:
            await client.unregister_consumer(12)
        assert unknown.value.code is ErrorCode.UNKNOWN_REGISTRATION
    finally:
        await client.close()
