"""The store's request budget (store/budget.py): the token bucket keeps rate and burst, waiting
Lease requests go before bulk ones, and a budgeted store spends one token per request. Time is
fake (looptime), so every figure below is exact."""

from __future__ import annotations

import asyncio
import itertools
import math
from collections.abc import Coroutine
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import looptime
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scalable_topics.store import (
    BudgetedStore,
    BudgetSettings,
    LeaseLock,
    Priority,
    RequestBudget,
    StoreClosed,
    TokenBucket,
)
from scalable_topics.store.budget import priority_of
from scalable_topics.tasks import cancel_and_wait
from support.memory_store import MemoryBackend, MemoryStore

TOPIC = "ScalableTopic"

# -- the pure bucket ------------------------------------------------------------------------------

rates = st.sampled_from([0.5, 1.0, 3.0, 10.0, 250.0])
bursts = st.integers(1, 20)
gaps = st.lists(st.floats(0, 5, allow_nan=False), max_size=60)


def fifo_grants(bucket: TokenBucket, arrivals: list[float]) -> list[float]:
    """When each request, arriving at the given times, gets its token, served in order: at
    once if a token is there, else at the bucket's ``ready_at``."""
    grants: list[float] = []
    for arrival in arrivals:
        now = max(arrival, grants[-1] if grants else arrival)
        if not bucket.take(now):
            now = bucket.ready_at(now)
            assert bucket.take(now), "ready_at promised a token"
        grants.append(now)
    return grants


@given(qps=rates, burst=bursts, gaps=gaps)
def test_no_window_grants_more_than_burst_plus_the_rate(
    qps: float, burst: int, gaps: list[float]
) -> None:
    arrivals = list(itertools.accumulate(gaps))
    grants = fifo_grants(TokenBucket(qps, burst, 0.0), arrivals)
    for first in range(len(grants)):
        for last in range(first, len(grants)):
            granted = last - first + 1
            assert granted <= burst + qps * (grants[last] - grants[first]) + 1e-6


@given(qps=rates, burst=bursts, gaps=gaps)
def test_a_request_waits_only_for_the_token_it_lacks(
    qps: float, burst: int, gaps: list[float]
) -> None:
    arrivals = list(itertools.accumulate(gaps))
    grants = fifo_grants(TokenBucket(qps, burst, 0.0), arrivals)
    for index, (arrival, granted) in enumerate(zip(arrivals, grants, strict=True)):
        start = max(arrival, grants[index - 1] if index else arrival)
        assert start <= granted <= start + 1 / qps + 1e-9


def test_an_idle_bucket_fills_up_to_its_burst_and_no_further() -> None:
    bucket = TokenBucket(2.0, 3, now=0.0)
    assert [bucket.take(0.0) for _ in range(4)] == [True, True, True, False]
    assert bucket.ready_at(0.0) == 0.5
    assert bucket.tokens(100.0) == 3
    bucket.give_back()
    assert bucket.tokens(100.0) == 3


@pytest.mark.parametrize(
    ("qps", "burst", "message"),
    [
        (-1.0, 1, "qps must be a number >= 0"),
        (math.inf, 1, "qps must be a number >= 0"),
        (math.nan, 1, "qps must be a number >= 0"),
        (0.0, 5, "needs a rate"),
        (5.0, 0, "burst must be at least 1"),
    ],
)
def test_impossible_settings_are_refused(qps: float, burst: int, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        BudgetSettings(qps, burst)


def test_requests_on_leases_have_priority() -> None:
    assert priority_of("Lease") is Priority.LEASE
    assert {priority_of(kind) for kind in ("ScalableTopic", "Segment", "Event")} == {Priority.BULK}


# -- the budget on fake loop time -----------------------------------------------------------------


@dataclass
class Granted:
    name: str
    priority: Priority
    at: float


async def take(budget: RequestBudget, name: str, priority: Priority, log: list[Granted]) -> None:
    await budget.acquire(priority)
    log.append(Granted(name, priority, asyncio.get_running_loop().time()))


@pytest.mark.looptime
async def test_a_burst_goes_at_once_then_one_request_per_token() -> None:
    budget = RequestBudget(BudgetSettings(qps=4, burst=3))
    start = asyncio.get_running_loop().time()
    log: list[Granted] = []
    await asyncio.gather(*(take(budget, f"r{i}", Priority.BULK, log) for i in range(9)))
    assert [g.name for g in log] == [f"r{i}" for i in range(9)]  # first come, first served
    assert [g.at - start for g in log] == pytest.approx(
        [0, 0, 0, 0.25, 0.5, 0.75, 1.0, 1.25, 1.5], abs=1e-5
    )
    assert budget.waited[Priority.BULK] == 6
    assert budget.wait_seconds[Priority.BULK] == pytest.approx(sum([0.25 * k for k in range(1, 7)]))


@pytest.mark.looptime
async def test_a_lease_request_goes_before_every_waiting_bulk_request() -> None:
    budget = RequestBudget(BudgetSettings(qps=1, burst=1))
    loop = asyncio.get_running_loop()
    start = loop.time()
    log: list[Granted] = []
    await take(budget, "first", Priority.BULK, log)  # the bucket is empty now
    bulk = [loop.create_task(take(budget, f"bulk-{i}", Priority.BULK, log)) for i in range(20)]
    await asyncio.sleep(0.5)
    assert budget.waiting(Priority.BULK) == 20
    renewal = loop.create_task(take(budget, "renewal", Priority.LEASE, log))
    await renewal
    assert (log[1].name, log[1].at - start) == ("renewal", pytest.approx(1.0, abs=1e-5))
    await asyncio.gather(*bulk)
    assert [g.name for g in log[2:]] == [f"bulk-{i}" for i in range(20)]
    assert budget.waited == {Priority.LEASE: 1, Priority.BULK: 20}


arrivals = st.lists(
    st.tuples(st.integers(0, 40), st.sampled_from(list(Priority))), min_size=1, max_size=40
)


@settings(max_examples=60, deadline=None)
@given(qps=st.sampled_from([1.0, 2.0, 5.0]), burst=st.integers(1, 4), script=arrivals)
def test_waiters_are_served_by_priority_then_arrival_within_the_rate(
    qps: float, burst: int, script: list[tuple[int, Priority]]
) -> None:
    """Requests arrive one by one, near tenths of a second; each one granted is the first by
    (priority, arrival) of those waiting then, and the grants keep burst and rate."""
    arrivals_at = [
        (tenths / 10 + 0.01 + position * 1e-4, priority)
        for position, (tenths, priority) in enumerate(sorted(script))
    ]
    log: list[tuple[int, float]] = []

    async def scenario() -> None:
        loop = asyncio.get_running_loop()
        budget = RequestBudget(BudgetSettings(qps, burst))
        start = loop.time()

        async def request(index: int, at: float, priority: Priority) -> None:
            await asyncio.sleep(at)
            await budget.acquire(priority)
            log.append((index, loop.time() - start))

        await asyncio.gather(
            *(request(i, at, priority) for i, (at, priority) in enumerate(arrivals_at))
        )

    run_on_fake_time(scenario())
    assert sorted(index for index, _ in log) == list(range(len(arrivals_at)))
    granted_at = dict(log)
    for index, at in log:
        rank = (arrivals_at[index][1], arrivals_at[index][0])
        for other, (other_arrival, other_priority) in enumerate(arrivals_at):
            waiting_then = other_arrival < at - 1e-6 and granted_at[other] > at + 1e-6
            assert not (waiting_then and (other_priority, other_arrival) < rank), (
                f"request {other} ({other_priority.name}, arrived {other_arrival}) waited "
                f"while {index} ({rank[0].name}, arrived {rank[1]}) was served at {at}"
            )
    times = sorted(at for _, at in log)
    for first in range(len(times)):
        for last in range(first, len(times)):
            assert last - first + 1 <= burst + qps * (times[last] - times[first]) + 1e-4


def run_on_fake_time(scenario: Coroutine[Any, Any, None]) -> None:
    loop = looptime.new_event_loop(start=0)
    try:
        loop.run_until_complete(scenario)
    finally:
        loop.close()


@pytest.mark.looptime
async def test_a_cancelled_waiter_takes_no_token_with_it() -> None:
    budget = RequestBudget(BudgetSettings(qps=1, burst=1))
    loop = asyncio.get_running_loop()
    start = loop.time()
    log: list[Granted] = []
    await take(budget, "first", Priority.BULK, log)
    gone = loop.create_task(take(budget, "gone", Priority.BULK, log))
    kept = loop.create_task(take(budget, "kept", Priority.BULK, log))
    await asyncio.sleep(0.5)
    await cancel_and_wait(gone)
    await kept
    assert [(g.name, g.at - start) for g in log[1:]] == [("kept", pytest.approx(1.0, abs=1e-5))]


@pytest.mark.looptime
async def test_a_token_granted_to_a_request_cancelled_before_it_ran_goes_to_the_next() -> None:
    budget = RequestBudget(BudgetSettings(qps=1, burst=1))
    loop = asyncio.get_running_loop()
    start = loop.time()
    log: list[Granted] = []
    await take(budget, "first", Priority.BULK, log)
    granted = loop.create_task(take(budget, "granted", Priority.BULK, log))
    kept = loop.create_task(take(budget, "kept", Priority.BULK, log))
    await asyncio.sleep(0)  # both wait; the budget's timer is due at start + 1
    # Due at the same instant and scheduled after the budget's timer: it runs once "granted"
    # has its token and before that task resumes.
    loop.call_at(start + 1, granted.cancel)
    await kept
    assert granted.cancelled()
    assert [(g.name, g.at - start) for g in log[1:]] == [("kept", pytest.approx(1.0, abs=1e-5))]


@pytest.mark.looptime
async def test_closing_fails_the_waiting_requests_and_every_later_one() -> None:
    budget = RequestBudget(BudgetSettings(qps=1, burst=1))
    await budget.acquire(Priority.BULK)
    waiting = asyncio.get_running_loop().create_task(budget.acquire(Priority.LEASE))
    await asyncio.sleep(0.1)
    budget.close()
    with pytest.raises(StoreClosed):
        await waiting
    with pytest.raises(StoreClosed):
        await budget.acquire(Priority.BULK)


async def test_an_unlimited_budget_never_waits() -> None:
    budget = RequestBudget(BudgetSettings(0, 0))
    for _ in range(10_000):
        await budget.acquire(Priority.BULK)
    assert budget.waited == {}


# -- the budgeted store ---------------------------------------------------------------------------


def topic(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "scalabletopics.dev/v1alpha1",
        "kind": TOPIC,
        "metadata": {"name": name, "namespace": "default"},
        "spec": {},
    }


@pytest.mark.looptime
async def test_every_request_spends_a_token_and_a_watch_only_when_it_opens() -> None:
    loop = asyncio.get_running_loop()
    store = BudgetedStore(MemoryStore(), BudgetSettings(qps=1, burst=1))
    start = loop.time()
    created = await store.create(topic("a"))
    await store.get(TOPIC, "default", "a")
    await store.patch(TOPIC, "default", "a", {"spec": {"n": 1}})
    assert loop.time() - start == pytest.approx(2.0, abs=1e-5)
    async with store.watch(TOPIC, resource_version=created["metadata"]["resourceVersion"]) as w:
        assert loop.time() - start == pytest.approx(3.0, abs=1e-5)
        events = [await anext(w) for _ in range(1)]
        assert loop.time() - start == pytest.approx(3.0, abs=1e-5)  # events are free
    assert [e.object["spec"] for e in events] == [{"n": 1}]
    await store.delete(TOPIC, "default", "a")
    assert store.requests == {
        ("create", TOPIC): 1,
        ("get", TOPIC): 1,
        ("patch", TOPIC): 1,
        ("watch", TOPIC): 1,
        ("delete", TOPIC): 1,
    }
    assert store.budget.waited[Priority.BULK] == 4
    await store.close()
    with pytest.raises(StoreClosed):
        await store.list(TOPIC)


class LoopClock:
    """Wall time that moves with the loop's (fake) time, so every renewal writes a new record."""

    def __init__(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._epoch = datetime(2026, 1, 1, tzinfo=UTC)

    def now(self) -> datetime:
        return self._epoch + timedelta(seconds=self._loop.time())

    def monotonic(self) -> float:
        return self._loop.time()


@pytest.mark.looptime
async def test_a_flood_of_bulk_requests_never_delays_a_lease_renewal_past_its_term() -> None:
    """One process's budget (5 requests/s) carries both its Lease renewals and 50 tasks that
    list as fast as they are let: each bulk request waits about 10 s for its turn, longer than
    a renewal (a get and a replace) may take. The holder keeps its 15 s lease for two minutes
    all the same, while a rival in another process checks it every 2 s."""
    backend = MemoryBackend()
    holder_store = BudgetedStore(MemoryStore(backend), BudgetSettings(qps=5, burst=5))
    rival_store = MemoryStore(backend)
    clock = LoopClock()
    holder = LeaseLock(holder_store, "default", "orders", "holder", 15, clock)
    rival = LeaseLock(rival_store, "default", "orders", "rival", 15, clock)
    loop = asyncio.get_running_loop()
    assert await holder.try_acquire_or_renew()

    async def bulk() -> None:
        while True:
            await holder_store.list(TOPIC)

    async def renew() -> None:
        while True:
            await asyncio.sleep(2)
            await holder.try_acquire_or_renew()

    rival_won: list[float] = []

    async def campaign() -> None:
        while True:
            await asyncio.sleep(2)
            if await rival.try_acquire_or_renew():
                rival_won.append(loop.time())
                return

    tasks = [loop.create_task(bulk()) for _ in range(50)]
    tasks += [loop.create_task(renew()), loop.create_task(campaign())]
    try:
        await asyncio.sleep(120)
    finally:
        for task in tasks:
            await cancel_and_wait(task)
    assert rival_won == []
    lease = await rival_store.get("Lease", "default", "orders")
    assert lease["spec"]["holderIdentity"] == "holder"
    assert holder_store.budget.waiting(Priority.BULK) == 0  # all cancelled
    # The flood took what the renewals left of 5 requests/s, each after a long wait.
    assert holder_store.requests[("list", TOPIC)] > 400
    assert holder_store.budget.wait_seconds[Priority.BULK] > 50 * 60
    await holder_store.close()
