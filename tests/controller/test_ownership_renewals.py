"""How often a replica writes its Leases (controller/ownership.py, leader.py), on fake loop time
(looptime) and an in-memory store: once per renew interval each, not once per retry period."""

from __future__ import annotations

import asyncio
from collections import Counter

import pytest

from scalable_topics.controller.leader import ElectionTiming
from scalable_topics.controller.ownership import ShardOwnership
from scalable_topics.model.clock import SystemClock
from scalable_topics.model.ownership import member_lease_name, shard_lease_name
from scalable_topics.store import EventType
from scalable_topics.store.informer import Change
from scalable_topics.store.informers import Informers
from support.memory_store import MemoryStore

pytestmark = pytest.mark.looptime

SYSTEM = "scalable-topics"
SHARDS = 4
TIMING = ElectionTiming(lease_duration=15, renew_deadline=10, retry_period=2)
WINDOW = 120.0


async def test_a_replica_renews_each_lease_once_per_renew_interval() -> None:
    assert TIMING.renew_interval == 5  # half the renew deadline, where client-go renews every 2 s
    store = MemoryStore()
    informers = Informers(store, SYSTEM)
    informers.start()
    led: list[int] = []
    stopped: list[int] = []

    async def lead(shard: int, term: int, handover: asyncio.Event) -> None:
        led.append(shard)
        try:
            await handover.wait()
        finally:
            stopped.append(shard)

    loop = asyncio.get_running_loop()
    ownership = ShardOwnership(
        store, informers, "a", None, SHARDS, TIMING, SystemClock(loop.time), lead
    )
    writes: Counter[str] = Counter()

    def count(change: Change) -> None:
        if change.type is EventType.MODIFIED:
            writes[change.key[1]] += 1

    running = loop.create_task(ownership.run())
    try:
        await informers.leases.wait_synced()
        async with asyncio.timeout(TIMING.lease_duration):
            while len(ownership.held) < SHARDS:
                await asyncio.sleep(TIMING.retry_period)
        unsubscribe = informers.leases.subscribe(count)
        await asyncio.sleep(WINDOW)
        unsubscribe()
        assert sorted(led) == list(range(SHARDS)) and stopped == []  # never lapsed
        per_window = WINDOW / TIMING.renew_interval  # 24; every retry period would be 60
        names = [member_lease_name("a"), *(shard_lease_name(s) for s in range(SHARDS))]
        assert set(writes) == set(names)
        for name in names:
            assert per_window - 1 <= writes[name] <= per_window + 1, (name, writes)
    finally:
        running.cancel()
        await asyncio.gather(running, return_exceptions=True)
        await informers.stop()
        await store.close()
