"""A topic leader's consumer sessions, on fake loop time (looptime) and an in-memory store:
round-robin assignments persisted with term and epoch, grace periods, new and stale leaders."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
from led_topic_fixtures import GRACE, NAME, NS, T0, Running, add_segment_object, loop_clock

from scalable_topics.controller.consumers import ConsumerRefused, Grant, TopicConsumers
from scalable_topics.model.layout import SegmentLayout
from scalable_topics.model.resources import (
    ScalableTopic,
    Segment,
    segment_object_name,
)
from scalable_topics.protocol import ErrorCode
from scalable_topics.store import Conflict
from scalable_topics.store.informers import Informers
from support.memory_store import MemoryStore

pytestmark = pytest.mark.looptime


class Channel:
    """A consumer's connection as the coordinator sees it: what it was told, in order."""

    def __init__(self) -> None:
        self.grants: list[Grant] = []
        self.closes: list[tuple[ErrorCode, str]] = []

    def assigned(self, grant: Grant) -> None:
        self.grants.append(grant)

    def closed(self, code: ErrorCode, message: str) -> None:
        self.closes.append((code, message))

    @property
    def segments(self) -> list[int]:
        return [segment.segment_id for segment in self.grants[-1].segments]


async def create_topic(store: MemoryStore, layout: SegmentLayout) -> None:
    await store.create(
        {
            "apiVersion": "scalabletopics.dev/v1alpha1",
            "kind": "ScalableTopic",
            "metadata": {"name": NAME, "namespace": NS},
            "spec": {
                "initialSegments": len(layout.active),
                "subscriptions": [
                    {"name": "orders", "type": "Stream"},
                    {"name": "audit", "type": "Queue"},
                ],
            },
        }
    )
    await write_layout(store, layout)


async def write_layout(store: MemoryStore, layout: SegmentLayout) -> None:
    await store.patch_status(ScalableTopic.KIND, NS, NAME, {"status": layout.to_status()})
    for info in layout.segments.values():
        name = segment_object_name(NAME, info.descriptor)
        try:
            await store.get(Segment.KIND, NS, name)
            continue
        except Exception:
            pass
        await add_segment_object(store, info.segment_id, info.hash_range.start, info.hash_range.end)


async def persisted(store: MemoryStore, subscription: str = "orders") -> dict[str, Any]:
    topic = ScalableTopic.model_validate(await store.get(ScalableTopic.KIND, NS, NAME))
    entry = next(e for e in topic.status.subscriptions if e.name == subscription)
    return {c.name: (c.assigned_segments, c.layout_epoch, c.term) for c in entry.consumers}


@pytest.fixture
async def store() -> MemoryStore:
    memory = MemoryStore()
    await create_topic(memory, SegmentLayout.initial(4, T0))
    return memory


Leader = Callable[[int], TopicConsumers]


@pytest.fixture
async def leader(store: MemoryStore) -> AsyncIterator[Leader]:
    """Start the consumer sessions of one term, on informers of the store as a controller
    process has them; all of them stop at the end of the test."""
    running = Running()
    informers = Informers(store, "scalable-topics")  # type: ignore[arg-type]
    informers.start()
    await informers.wait_synced()
    cached = informers.writing_through(store)  # type: ignore[arg-type]

    def start(term: int) -> TopicConsumers:
        return running.start(TopicConsumers(cached, informers, NS, NAME, term, loop_clock(), GRACE))

    yield start
    await running.stop()
    await informers.stop()


async def test_round_robin_persisted_then_pushed_only_to_consumers_whose_segments_changed(
    store: MemoryStore, leader: Leader
) -> None:
    coordinator = leader(3)
    amy, bob, cat = Channel(), Channel(), Channel()
    await coordinator.register("orders", "amy", amy)
    assert amy.segments == [0, 1, 2, 3]
    await coordinator.register("orders", "bob", bob)
    assert (amy.segments, bob.segments) == ([0, 2], [1, 3])
    assert [(g.term, g.layout_epoch) for g in amy.grants] == [(3, 0), (3, 0)]
    assert bob.grants[-1].segments[0].broker_url == "ws://broker-1"
    assert await persisted(store) == {"amy": ([0, 2], 0, 3), "bob": ([1, 3], 0, 3)}

    await coordinator.register("orders", "cat", cat)
    # Sticky: bob gives 3 up to cat and keeps 1; amy keeps both of hers and hears nothing.
    assert (amy.segments, bob.segments, cat.segments) == ([0, 2], [1], [3])
    assert [len(c.grants) for c in (amy, bob, cat)] == [2, 2, 1]

    await coordinator.unregister("orders", "cat", cat)  # an explicit leave: rebalanced at once
    assert (amy.segments, bob.segments) == ([0, 2], [1, 3])
    assert await persisted(store) == {"amy": ([0, 2], 0, 3), "bob": ([1, 3], 0, 3)}
    assert cat.closes == []


async def test_a_consumer_back_within_its_grace_period_keeps_its_segments_and_disturbs_no_one(
    store: MemoryStore, leader: Leader
) -> None:
    coordinator = leader(1)
    amy, bob = Channel(), Channel()
    await coordinator.register("orders", "amy", amy)
    await coordinator.register("orders", "bob", bob)
    told_amy = len(amy.grants)
    coordinator.detach("orders", "bob", bob)
    await asyncio.sleep(GRACE - 1)
    assert await persisted(store) == {"amy": ([0, 2], 0, 1), "bob": ([1, 3], 0, 1)}
    writes = store.writes
    again = Channel()
    await coordinator.register("orders", "bob", again)
    assert again.segments == [1, 3]
    await asyncio.sleep(GRACE * 2)  # the cancelled deadline passes: nothing happens
    assert len(amy.grants) == told_amy
    assert store.writes == writes
    assert coordinator.connected("orders") == {"amy", "bob"}


async def test_when_the_grace_period_ends_the_segments_move(
    store: MemoryStore, leader: Leader
) -> None:
    coordinator = leader(1)
    amy, bob = Channel(), Channel()
    await coordinator.register("orders", "amy", amy)
    await coordinator.register("orders", "bob", bob)
    loop = asyncio.get_running_loop()
    coordinator.detach("orders", "bob", bob)
    left_at = loop.time()
    while amy.segments != [0, 1, 2, 3]:
        await asyncio.sleep(0.5)
    assert loop.time() - left_at >= GRACE
    assert await persisted(store) == {"amy": ([0, 1, 2, 3], 0, 1)}
    assert bob.closes == []  # its connection was gone already: nothing to tell


async def test_a_new_leader_adopts_every_registration_with_a_fresh_grace_period(
    store: MemoryStore, leader: Leader
) -> None:
    old = leader(1)
    amy, bob = Channel(), Channel()
    await old.register("orders", "amy", amy)
    await old.register("orders", "bob", bob)
    old.detach("orders", "bob", bob)
    await asyncio.sleep(GRACE - 5)  # bob's grace is nearly over under the old leader...
    before = (await store.get(ScalableTopic.KIND, NS, NAME))["metadata"]["resourceVersion"]

    new = leader(2)  # ...when leadership moves (the old one is still running: a stale leader)
    await asyncio.sleep(0.1)
    # The new leader stamped every registration with its term: same segments.
    assert await persisted(store) == {"amy": ([0, 2], 0, 2), "bob": ([1, 3], 0, 2)}
    with pytest.raises(Conflict):  # a late write on what the old leader read is refused
        await store.patch_status(
            ScalableTopic.KIND, NS, NAME, {"status": {"subscriptions": []}}, before
        )

    # amy reconnects to the new leader within the fresh grace period: nothing moves.
    amy_again = Channel()
    await new.register("orders", "amy", amy_again)
    assert amy_again.segments == [0, 2]
    assert amy_again.grants[-1].term == 2

    # The old leader's next write finds the newer term: it refuses and stops serving.
    with pytest.raises(ConsumerRefused) as refused:
        await old.register("orders", "cat", Channel())
    assert refused.value.code is ErrorCode.NOT_LEADER
    assert [code for code, _ in amy.closes] == [ErrorCode.NOT_LEADER]
    assert "cat" not in await persisted(store)

    # bob had 5 s left under the old leader; the new one gives a whole grace period.
    await asyncio.sleep(10)
    assert "bob" in await persisted(store)
    while "bob" in await persisted(store):
        await asyncio.sleep(0.5)
    assert amy_again.segments == [0, 1, 2, 3]
    assert amy_again.grants[-1].term == 2


async def test_layout_changes_reach_consumers_with_the_new_epoch_and_undrained_parents(
    store: MemoryStore, leader: Leader
) -> None:
    coordinator = leader(1)
    amy, bob = Channel(), Channel()
    await coordinator.register("orders", "amy", amy)
    await coordinator.register("orders", "bob", bob)
    layout = SegmentLayout.initial(4, T0).split(1, T0)  # 1 sealed -> 4, 5
    await write_layout(store, layout)
    while bob.grants[-1].layout_epoch != 1:
        await asyncio.sleep(0.01)
    # Ranges: 0, 1 (sealed, not drained), 4, 5 (1's halves), 2, 3: dealt round-robin.
    assert (amy.segments, bob.segments) == ([0, 4, 2], [1, 5, 3])
    assert await persisted(store) == {"amy": ([0, 4, 2], 1, 1), "bob": ([1, 5, 3], 1, 1)}

    parent = segment_object_name(NAME, layout.get(1).descriptor)
    await store.patch_status(
        Segment.KIND, NS, parent, {"status": {"drained": {"orders": "2026-01-01T00:00:00Z"}}}
    )
    while 1 in bob.segments:
        await asyncio.sleep(0.01)
    # Sticky: the drained parent leaves bob, and nothing else moves.
    assert (amy.segments, bob.segments) == ([0, 4, 2], [5, 3])


async def test_requests_that_cannot_be_served_are_refused_with_their_reason(
    store: MemoryStore, leader: Leader
) -> None:
    coordinator = leader(1)
    await coordinator.register("orders", "amy", Channel())
    cases = [
        ("nope", "amy", ErrorCode.SUBSCRIPTION_NOT_FOUND, "declares no subscription 'nope'"),
        ("audit", "amy", ErrorCode.SUBSCRIPTION_TYPE_MISMATCH, "is a Queue subscription"),
        ("orders", "amy", ErrorCode.CONSUMER_BUSY, "connected through another registration"),
    ]
    for subscription, name, code, message in cases:
        with pytest.raises(ConsumerRefused, match=message) as refused:
            await coordinator.register(subscription, name, Channel())
        assert refused.value.code is code
    with pytest.raises(ConsumerRefused) as refused:
        await coordinator.unregister("orders", "amy", Channel())  # not its registration
    assert refused.value.code is ErrorCode.UNKNOWN_REGISTRATION


async def test_a_deleted_subscription_or_topic_ends_its_registrations(
    store: MemoryStore, leader: Leader
) -> None:
    coordinator = leader(1)
    amy = Channel()
    await coordinator.register("orders", "amy", amy)
    await store.patch(
        ScalableTopic.KIND, NS, NAME, {"spec": {"subscriptions": [{"name": "audit"}]}}
    )
    while not amy.closes:
        await asyncio.sleep(0.01)
    assert amy.closes[0][0] is ErrorCode.SUBSCRIPTION_NOT_FOUND
    with pytest.raises(ConsumerRefused) as refused:
        await coordinator.register("orders", "amy", Channel())
    assert refused.value.code is ErrorCode.SUBSCRIPTION_NOT_FOUND

    await store.patch(
        ScalableTopic.KIND, NS, NAME, {"spec": {"subscriptions": [{"name": "s", "type": "Stream"}]}}
    )
    ben = Channel()
    await coordinator.register("s", "ben", ben)
    assert ben.segments == [0, 1, 2, 3]
    await store.delete(ScalableTopic.KIND, NS, NAME)
    while not ben.closes:
        await asyncio.sleep(0.01)
    assert ben.closes[0][0] is ErrorCode.TOPIC_NOT_FOUND


async def test_a_registration_the_store_cannot_record_is_refused_and_forgotten(
    store: MemoryStore, leader: Leader
) -> None:
    coordinator = leader(1)
    await coordinator.register("orders", "amy", Channel())
    store.unavailable = True
    with pytest.raises(ConsumerRefused) as refused:
        await coordinator.register("orders", "bob", Channel())
    assert refused.value.code is ErrorCode.SERVICE_NOT_READY
    store.unavailable = False
    assert coordinator.registrations("orders").keys() == {"amy"}
    bob = Channel()
    await coordinator.register("orders", "bob", bob)  # not ConsumerBusy: nothing was left over
    assert bob.segments == [1, 3]
