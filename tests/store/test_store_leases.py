"""LeaseLock over the store port: client-go's tryAcquireOrRenew rules, on every adapter."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

from store_testkit import LEASE, Backend

from scalable_topics.model.clock import ManualClock
from scalable_topics.model.timefmt import format_time
from scalable_topics.store import LeaseLock, Store
from scalable_topics.store.port import Object

ENDPOINT = "scalabletopics.dev/endpoint"


async def lease_spec(store: Store) -> dict[str, object]:
    spec: dict[str, object] = (await store.get(LEASE, "default", "leader"))["spec"]
    return spec


async def test_lease_expiry_and_takeover_count_transitions(store_backend: Backend) -> None:
    clock = ManualClock()
    store_a, store_b = await store_backend.new_store(), await store_backend.new_store()
    a = LeaseLock(store_a, "default", "leader", "a", 10, clock, annotations={ENDPOINT: "a:7000"})
    b = LeaseLock(store_b, "default", "leader", "b", 10, clock, annotations={ENDPOINT: "b:7000"})

    assert await a.try_acquire_or_renew()
    acquired_at = format_time(clock.now())
    assert await lease_spec(store_a) == {
        "holderIdentity": "a",
        "leaseDurationSeconds": 10,
        "acquireTime": acquired_at,
        "renewTime": acquired_at,
        "leaseTransitions": 0,
    }
    lease = await store_b.get(LEASE, "default", "leader")
    assert lease["metadata"]["annotations"] == {ENDPOINT: "a:7000"}

    assert not await b.try_acquire_or_renew()  # held and not expired
    assert b.record is not None
    assert (b.record.holder_identity, b.record.annotations[ENDPOINT]) == ("a", "a:7000")

    clock.advance(4)
    assert await a.try_acquire_or_renew()  # renewal keeps the term
    spec = await lease_spec(store_a)
    assert (spec["acquireTime"], spec["renewTime"]) == (acquired_at, format_time(clock.now()))
    assert spec["leaseTransitions"] == 0

    clock.advance(9)  # 13 s since b first looked, but b saw the renewal only now
    assert not await b.try_acquire_or_renew()
    clock.advance(9.5)
    assert not await b.try_acquire_or_renew()
    clock.advance(1)  # a full duration since b last saw the record change
    assert await b.try_acquire_or_renew()
    taken_at = format_time(clock.now())
    assert await lease_spec(store_b) == {
        "holderIdentity": "b",
        "leaseDurationSeconds": 10,
        "acquireTime": taken_at,
        "renewTime": taken_at,
        "leaseTransitions": 1,
    }
    lease = await store_a.get(LEASE, "default", "leader")
    assert lease["metadata"]["annotations"] == {ENDPOINT: "b:7000"}

    assert not await a.try_acquire_or_renew()  # a lost it
    assert not a.is_leader
    assert b.is_leader

    clock.advance(3)
    assert await b.try_acquire_or_renew()
    spec = await lease_spec(store_b)
    assert (spec["acquireTime"], spec["leaseTransitions"]) == (taken_at, 1)


async def test_release_then_takeover_counts_a_transition(store_backend: Backend) -> None:
    clock = ManualClock()
    store = await store_backend.new_store()
    a = LeaseLock(store, "default", "leader", "a", 15, clock, annotations={ENDPOINT: "a:1"})
    b = LeaseLock(store, "default", "leader", "b", 15, clock)
    assert await a.try_acquire_or_renew()
    assert not await b.try_acquire_or_renew()

    clock.advance(1)
    assert await a.release()
    spec = await lease_spec(store)
    assert spec == {
        "holderIdentity": "",
        "leaseDurationSeconds": 1,
        "acquireTime": format_time(clock.now()),
        "renewTime": format_time(clock.now()),
        "leaseTransitions": 0,
    }
    assert "annotations" not in (await store.get(LEASE, "default", "leader"))["metadata"]
    assert not a.is_leader

    assert await b.try_acquire_or_renew()  # nobody holds it: no need to wait
    spec = await lease_spec(store)
    assert (spec["holderIdentity"], spec["leaseTransitions"]) == ("b", 1)

    before = await store.get(LEASE, "default", "leader")
    assert await a.release()  # a holds nothing: nothing to write
    assert await store.get(LEASE, "default", "leader") == before


async def test_expiry_uses_the_local_monotonic_clock_not_the_holders_timestamps(
    store_backend: Backend,
) -> None:
    holder_clock = ManualClock(datetime(2020, 1, 1, tzinfo=UTC))  # far behind
    local_clock = ManualClock(datetime(2026, 1, 1, tzinfo=UTC))
    store = await store_backend.new_store()
    holder = LeaseLock(store, "default", "leader", "holder", 10, holder_clock)
    candidate = LeaseLock(store, "default", "leader", "candidate", 10, local_clock)
    assert await holder.try_acquire_or_renew()

    # By the wall clock the renewTime is six years old; the lease is still not the candidate's.
    assert not await candidate.try_acquire_or_renew()
    local_clock.advance(9.9)
    assert not await candidate.try_acquire_or_renew()
    local_clock.advance(0.2)
    assert await candidate.try_acquire_or_renew()
    assert (await lease_spec(store))["leaseTransitions"] == 1


async def test_racing_candidates_have_one_winner(store_backend: Backend) -> None:
    clock = ManualClock()
    stores = [await store_backend.new_store() for _ in range(2)]
    locks = [LeaseLock(stores[i % 2], "default", "leader", f"c{i}", 10, clock) for i in range(6)]
    results = await asyncio.gather(*(lock.try_acquire_or_renew() for lock in locks))
    assert results.count(True) == 1  # creation race: AlreadyExists loses
    winner = locks[results.index(True)]
    assert await winner.release()

    results = await asyncio.gather(*(lock.try_acquire_or_renew() for lock in locks))
    assert results.count(True) == 1  # takeover race on the released lease: Conflict loses
    spec = await lease_spec(stores[0])
    assert spec["holderIdentity"] == locks[results.index(True)].identity
    assert spec["leaseTransitions"] == 1


async def test_a_release_is_not_lost_to_a_cache_behind_the_last_renewal(
    store_backend: Backend,
) -> None:
    """The cache may not hold the holder's last renewal yet (its answer lost to a cancel at
    shutdown, or the watch catching up after an outage): the release's Conflict must not
    leave the lease held for a whole term."""
    clock = ManualClock()
    store = await store_backend.new_store()
    cache: list[Object] = []
    a = LeaseLock(
        store, "default", "leader", "a", 15, clock, read=lambda: cache[-1] if cache else None
    )
    assert await a.try_acquire_or_renew()
    cache.append(await store.get(LEASE, "default", "leader"))
    clock.advance(2)
    assert await a.try_acquire_or_renew()  # the cache never hears of this renewal

    clock.advance(1)
    assert await a.release()
    assert (await lease_spec(store))["holderIdentity"] == ""
    assert not a.is_leader


async def test_a_release_that_finds_another_holder_in_the_store_writes_nothing(
    store_backend: Backend,
) -> None:
    clock = ManualClock()
    store = await store_backend.new_store()
    cache: list[Object] = []
    a = LeaseLock(
        store, "default", "leader", "a", 15, clock, read=lambda: cache[-1] if cache else None
    )
    b = LeaseLock(store, "default", "leader", "b", 15, clock)
    assert await a.try_acquire_or_renew()
    cache.append(await store.get(LEASE, "default", "leader"))
    assert not await b.try_acquire_or_renew()
    clock.advance(16)
    assert await b.try_acquire_or_renew()  # a's lease expired; a's cache has not seen it go

    taken = await store.get(LEASE, "default", "leader")
    assert await a.release()
    assert await store.get(LEASE, "default", "leader") == taken
    assert not a.is_leader
