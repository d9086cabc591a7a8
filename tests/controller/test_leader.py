"""Leader election timing, on fake loop time (looptime) and an in-memory lease store."""

from __future__ import annotations

import asyncio
import copy
from typing import Any

import pytest

from scalable_topics.controller.leader import ElectionTiming, LeaderElector
from scalable_topics.model.clock import SystemClock
from scalable_topics.store import AlreadyExists, Conflict, LeaseLock, NotFound, StoreError

TIMING = ElectionTiming(lease_duration=15, renew_deadline=10, retry_period=2)


class LeaseObjects:
    """Just what LeaseLock uses of the store port, with resourceVersion compare-and-swap, and a
    switch that makes one candidate's writes fail (a partitioned leader)."""

    def __init__(self) -> None:
        self.objects: dict[tuple[str, str, str], dict[str, Any]] = {}
        self.revision = 0
        self.partitioned: set[str] = set()

    async def get(self, kind: str, namespace: str, name: str) -> dict[str, Any]:
        await asyncio.sleep(0)
        try:
            return copy.deepcopy(self.objects[(kind, namespace, name)])
        except KeyError:
            raise NotFound(kind, namespace, name) from None

    async def create(self, obj: dict[str, Any]) -> dict[str, Any]:
        self._check(obj)
        key = (obj["kind"], obj["metadata"]["namespace"], obj["metadata"]["name"])
        if key in self.objects:
            raise AlreadyExists(*key)
        return self._store(key, obj)

    async def replace(self, obj: dict[str, Any]) -> dict[str, Any]:
        self._check(obj)
        key = (obj["kind"], obj["metadata"]["namespace"], obj["metadata"]["name"])
        current = self.objects[key]["metadata"]["resourceVersion"]
        if obj["metadata"]["resourceVersion"] != current:
            raise Conflict(*key, obj["metadata"]["resourceVersion"], current)
        return self._store(key, obj)

    def _check(self, obj: dict[str, Any]) -> None:
        holder = obj["spec"].get("holderIdentity")
        if holder in self.partitioned:
            raise StoreError(f"{holder} cannot reach the store")

    def _store(self, key: tuple[str, str, str], obj: dict[str, Any]) -> dict[str, Any]:
        self.revision += 1
        stored = copy.deepcopy(obj)
        stored["metadata"]["resourceVersion"] = str(self.revision)
        self.objects[key] = stored
        return copy.deepcopy(stored)


class Candidate:
    def __init__(self, store: LeaseObjects, identity: str) -> None:
        loop = asyncio.get_running_loop()
        clock = SystemClock(loop.time)
        lock = LeaseLock(
            store, "default", "orders-controller", identity, 15, clock, {"endpoint": identity}
        )  # type: ignore[arg-type]
        self.identity = identity
        self.led: list[tuple[int, float]] = []  # (term, started)
        self.stopped: list[float] = []
        self.elector = LeaderElector(lock, TIMING, clock, self._lead, jitter=lambda: 0.5)
        self.task = loop.create_task(self.elector.run())

    async def _lead(self, term: int) -> None:
        loop = asyncio.get_running_loop()
        self.led.append((term, loop.time()))
        try:
            await asyncio.Event().wait()
        finally:
            self.stopped.append(loop.time())


@pytest.mark.looptime
async def test_one_leader_and_failover_within_lease_duration_plus_retry() -> None:
    store = LeaseObjects()
    loop = asyncio.get_running_loop()
    first = Candidate(store, "a")
    await asyncio.sleep(0.1)
    second = Candidate(store, "b")
    await asyncio.sleep(60)
    assert [term for term, _ in first.led] == [0]
    assert second.led == []  # renewed every renew interval (5 s), never expires
    lease = store.objects[("Lease", "default", "orders-controller")]
    assert lease["spec"]["holderIdentity"] == "a"
    assert lease["metadata"]["annotations"] == {"endpoint": "a"}

    # A crash: the leader stops, and its last renewal stays in the store unreleased.
    first.task.cancel()
    await asyncio.gather(first.task, return_exceptions=True)
    store.objects[("Lease", "default", "orders-controller")] = lease
    crashed_at = loop.time()
    await asyncio.sleep(30)
    ((term, started),) = second.led
    assert term == 1  # the transition count is the new term
    # Not before the lease could have expired (the last renewal is at most a renew interval
    # old), and within lease duration + one retry.
    assert TIMING.lease_duration - TIMING.renew_interval <= started - crashed_at
    assert started - crashed_at <= TIMING.lease_duration + TIMING.retry_period * 1.2


@pytest.mark.looptime
async def test_a_leader_that_cannot_renew_stops_before_anyone_else_starts() -> None:
    store = LeaseObjects()
    first = Candidate(store, "a")
    await asyncio.sleep(0.1)
    second = Candidate(store, "b")
    await asyncio.sleep(10)
    store.partitioned.add("a")  # a keeps running but its writes no longer land
    partitioned_at = asyncio.get_running_loop().time()
    await asyncio.sleep(40)
    assert len(first.led) == 1
    assert len(first.stopped) == 1
    ((term, started),) = second.led
    assert term == 1
    assert first.stopped[0] < started  # never two leaders acting at once
    assert first.stopped[0] - partitioned_at <= TIMING.renew_deadline
    assert started - partitioned_at >= TIMING.lease_duration - TIMING.renew_interval
    assert first.task.done()  # run() returned: leadership lost
    first.task.result()
    second.task.cancel()
    await asyncio.gather(second.task, return_exceptions=True)
    assert store.objects[("Lease", "default", "orders-controller")]["spec"]["holderIdentity"] == ""


@pytest.mark.looptime
async def test_a_leader_renews_once_per_renew_interval_and_retries_a_failed_renewal() -> None:
    store = LeaseObjects()
    leader = Candidate(store, "a")  # acquires at 0, renews at 5, 10, ...
    await asyncio.sleep(0.1)
    assert leader.led
    before = store.revision
    await asyncio.sleep(60)
    assert TIMING.renew_interval == TIMING.renew_deadline / 2
    assert store.revision - before == 60 / TIMING.renew_interval  # client-go's cadence: 30
    # An outage from 62.6 to 66.6 fails the renewal due at 65 and its retries: the next one,
    # a quarter retry period later (not a renew interval), succeeds well within the deadline.
    await asyncio.sleep(2.5)
    store.partitioned.add("a")
    before = store.revision
    await asyncio.sleep(4)
    assert store.revision == before
    store.partitioned.discard("a")
    await asyncio.sleep(TIMING.retry_period / 4)
    assert store.revision == before + 1
    assert leader.stopped == []
    assert store.objects[("Lease", "default", "orders-controller")]["spec"]["holderIdentity"] == "a"
    leader.task.cancel()
    await asyncio.gather(leader.task, return_exceptions=True)


def test_the_renew_interval_is_half_the_deadline_and_never_below_the_retry_period() -> None:
    assert ElectionTiming(15, 10, 2).renew_interval == 5
    assert ElectionTiming(5, 4, 0.5).renew_interval == 2
    assert ElectionTiming(3, 2.5, 2).renew_interval == 2


def test_timing_that_could_overlap_leaders_is_refused() -> None:
    with pytest.raises(ValueError, match="must exceed renew_deadline"):
        ElectionTiming(lease_duration=10, renew_deadline=10, retry_period=2)
    with pytest.raises(ValueError, match=r"1\.2 x retry_period"):
        ElectionTiming(lease_duration=15, renew_deadline=2, retry_period=2)
