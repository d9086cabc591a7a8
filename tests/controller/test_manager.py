"""Controller processes' managers in one test: each topic is led by exactly one of them through
the ownership shards they share; a failover and a new replica move shards; a topic whose spec
cannot be carried out says so in its status, once, and is not retried until the spec changes."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

from aiohttp.test_utils import TestServer

from scalable_topics.controller.leader import ElectionTiming
from scalable_topics.controller.manager import (
    ENDPOINT_ANNOTATION,
    ControllerConfig,
    ControllerManager,
)
from scalable_topics.model.ownership import (
    SHARD_COUNT_ANNOTATION,
    shard_lease_name,
    shard_of,
)
from scalable_topics.model.resources import ScalableTopic, Segment
from scalable_topics.store import EmbeddedStore, NotFound
from scalable_topics.store.kinds import EVENT, LEASE
from support.eventually import eventually
from support.leases import SYSTEM_NAMESPACE, topic_lease

FAST = ElectionTiming(lease_duration=3, renew_deadline=2, retry_period=0.5)
SHARDS = 4


def topic(name: str, **spec: Any) -> dict[str, Any]:
    return ScalableTopic.model_validate(
        {"metadata": {"name": name, "namespace": "default"}, "spec": {"initialSegments": 1, **spec}}
    ).to_wire()


async def read(store: EmbeddedStore, name: str) -> ScalableTopic:
    return ScalableTopic.model_validate(await store.get(ScalableTopic.KIND, "default", name))


async def phase(store: EmbeddedStore, name: str) -> str | None:
    """The phase as stored (read without the model, which refuses an invalid spec)."""
    raw = await store.get(ScalableTopic.KIND, "default", name)
    return (raw.get("status") or {}).get("phase")


class Replicas:
    """Controller managers on one store, each in a task of its own, stopped at the end."""

    def __init__(self, store: EmbeddedStore) -> None:
        self.store = store
        self.running: dict[str, tuple[ControllerManager, asyncio.Task[None]]] = {}

    def start(self, identity: str, shards: int = SHARDS) -> ControllerManager:
        config = ControllerConfig(
            identity, f"http://{identity}:8080", timing=FAST, shards=shards, concurrent_passes=4
        )
        manager = ControllerManager(self.store, config)
        self.running[identity] = (manager, asyncio.create_task(manager.run()))
        return manager

    async def stop(self, identity: str) -> None:
        _, task = self.running.pop(identity)
        task.cancel()
        await asyncio.wait({task})

    async def stop_all(self) -> None:
        for identity in list(self.running):
            await self.stop(identity)

    def led(self) -> dict[str, set[tuple[str, str]]]:
        return {identity: set(m.led_topics) for identity, (m, _) in self.running.items()}


@contextlib.asynccontextmanager
async def replicas(store: EmbeddedStore) -> AsyncIterator[Replicas]:
    running = Replicas(store)
    try:
        yield running
    finally:
        await running.stop_all()


async def test_each_topic_is_led_by_one_replica_and_ready_and_deletion_cleans_up(
    tmp_path: Path, make_broker: Callable[..., TestServer]
) -> None:
    async with await EmbeddedStore.open(tmp_path / "store.db") as store, replicas(store) as run:
        broker = make_broker(store, "b")
        run.start("controller-0")
        run.start("controller-1")
        names = [f"t{i}" for i in range(8)]
        for name in names:
            await store.create(topic(name))
        # No broker is registered yet: the leaders keep retrying until one is.
        await asyncio.sleep(1)
        assert (await read(store, "t0")).status.phase != "Ready"
        await broker.start_server()
        try:

            async def all_ready() -> bool:
                phases = [(await read(store, name)).status.phase for name in names]
                return phases == ["Ready"] * len(names)

            await eventually(all_ready, "every topic Ready")
            led = run.led()
            assert led["controller-0"].isdisjoint(led["controller-1"])
            assert led["controller-0"] | led["controller-1"] == {("default", n) for n in names}
            for name in names:
                lease = await topic_lease(store, "default", name)
                holder = lease["spec"]["holderIdentity"]
                assert ("default", name) in led[holder]
                status = (await read(store, name)).status.controller
                assert status is not None
                assert (status.identity, status.term) == (
                    holder,
                    lease["spec"]["leaseTransitions"],
                )
                annotations = lease["metadata"]["annotations"]
                assert annotations[ENDPOINT_ANNOTATION] == f"http://{holder}:8080"
                assert annotations[SHARD_COUNT_ANNOTATION] == str(SHARDS)
            assert len((await store.list(Segment.KIND)).items) == len(names)

            for name in names:
                await store.delete(ScalableTopic.KIND, "default", name)

            async def gone() -> bool:
                remaining = await store.list(ScalableTopic.KIND)
                return remaining.items == [] and (await store.list(Segment.KIND)).items == []

            await eventually(gone, "every topic and segment deleted")

            async def nothing_led() -> bool:
                return all(not topics for topics in run.led().values())

            await eventually(nothing_led, "no topic controller left running")
        finally:
            await broker.close()


async def test_replicas_share_the_shards_and_a_survivor_takes_them_all(tmp_path: Path) -> None:
    async with await EmbeddedStore.open(tmp_path / "store.db") as store, replicas(store) as run:
        first = run.start("controller-0")

        def holds(manager: ControllerManager, count: int) -> bool:
            return manager.ownership is not None and len(manager.ownership.held) == count

        async def first_holds_all() -> bool:
            return holds(first, SHARDS)

        await eventually(first_holds_all, "the only replica holds every shard")
        second = run.start("controller-1")  # it joins: the first hands half over

        async def shared() -> bool:
            return holds(first, SHARDS // 2) and holds(second, SHARDS // 2)

        await eventually(shared, "shards shared")
        assert first.ownership is not None and second.ownership is not None
        assert first.ownership.held.isdisjoint(second.ownership.held)
        terms_before = {
            shard: (await store.get(LEASE.kind, SYSTEM_NAMESPACE, shard_lease_name(shard)))["spec"][
                "leaseTransitions"
            ]
            for shard in range(SHARDS)
        }

        await run.stop("controller-0")  # a clean stop releases its leases at once

        async def second_holds_all() -> bool:
            return holds(second, SHARDS)

        await eventually(second_holds_all, "the survivor holds every shard")
        for shard in range(SHARDS):
            lease = await store.get(LEASE.kind, SYSTEM_NAMESPACE, shard_lease_name(shard))
            assert lease["spec"]["holderIdentity"] == "controller-1"
            if shard not in terms_before or shard in second.ownership.held:
                assert lease["spec"]["leaseTransitions"] >= terms_before[shard]


async def test_a_new_leader_outranks_every_term_stored_on_its_topics(tmp_path: Path) -> None:
    """After the shard count changed, a topic's new shard may have a younger Lease than the
    term its status was written with: taking the shard writes a term above it."""
    async with await EmbeddedStore.open(tmp_path / "store.db") as store, replicas(store) as run:
        created = await store.create(topic("orders"))
        created["status"] = {"controller": {"identity": "old", "term": 41}}
        await store.replace_status(created)
        manager = run.start("controller-0", shards=2)

        async def leading() -> bool:
            return ("default", "orders") in manager.led_topics

        await eventually(leading, "the topic led")
        lease = await store.get(
            LEASE.kind, SYSTEM_NAMESPACE, shard_lease_name(shard_of("default", "orders", 2))
        )
        assert lease["spec"]["leaseTransitions"] >= 42

        async def stamped() -> bool:
            status = (await read(store, "orders")).status.controller
            return status is not None and status.identity == "controller-0"

        await eventually(stamped, "the new leader in status")
        status = (await read(store, "orders")).status.controller
        assert status is not None and status.term >= 42


async def test_a_replica_with_another_shard_count_takes_no_shard(tmp_path: Path) -> None:
    async with await EmbeddedStore.open(tmp_path / "store.db") as store, replicas(store) as run:
        first = run.start("controller-0", shards=4)

        async def holds_all() -> bool:
            return first.ownership is not None and len(first.ownership.held) == 4

        await eventually(holds_all, "the first replica holds its shards")
        other = run.start("controller-1", shards=8)
        await asyncio.sleep(3 * FAST.retry_period)
        assert other.ownership is not None and other.ownership.held == frozenset()
        assert first.ownership is not None and len(first.ownership.held) == 4


async def test_an_invalid_spec_is_shown_once_and_not_retried_until_it_changes(
    tmp_path: Path, make_broker: Callable[..., TestServer]
) -> None:
    async with await EmbeddedStore.open(tmp_path / "store.db") as store, replicas(store) as run:
        broker = make_broker(store, "b")
        await broker.start_server()
        manager = run.start("controller-0")
        try:
            # Written past validation (an old manifest, another tool): the model refuses it.
            bad = topic("orders")
            bad["spec"]["initialSegments"] = 0
            await store.create(bad)

            async def failed() -> bool:
                return await phase(store, "orders") == "Failed"

            await eventually(failed, "phase Failed")
            raw = await store.get(ScalableTopic.KIND, "default", "orders")
            ready = next(c for c in raw["status"]["conditions"] if c["type"] == "Ready")
            assert (ready["status"], ready["reason"]) == ("False", "InvalidSpec")
            assert "spec.initialSegments" in ready["message"]
            assert raw["status"]["observedGeneration"] == raw["metadata"]["generation"]
            assert manager.metrics.count(permanent=True) >= 1

            # Other writes (here: an annotation) do not make it try again.
            passes = manager.metrics.passes._value.get()
            await store.patch(
                ScalableTopic.KIND, "default", "orders", {"metadata": {"annotations": {"a": "b"}}}
            )
            await asyncio.sleep(1)
            assert manager.metrics.passes._value.get() == passes
            events = [
                e
                for e in (await store.list(EVENT.kind, "default")).items
                if e["reason"] == "InvalidSpec"
            ]
            assert len(events) == 1 and events[0]["type"] == "Warning"

            # A spec that can be carried out (a new generation) is taken at once.
            current = await store.get(ScalableTopic.KIND, "default", "orders")
            current["spec"]["initialSegments"] = 2
            await store.replace(current)

            async def ready_now() -> bool:
                return (await read(store, "orders")).status.phase == "Ready"

            await eventually(ready_now, "Ready after the fix")
        finally:
            await broker.close()


async def test_deleting_a_topic_whose_spec_is_invalid_still_goes(
    tmp_path: Path, make_broker: Callable[..., TestServer]
) -> None:
    async with await EmbeddedStore.open(tmp_path / "store.db") as store, replicas(store) as run:
        broker = make_broker(store, "b")
        await broker.start_server()
        run.start("controller-0")
        try:
            await store.create(topic("orders", initialSegments=2))

            async def ready() -> bool:
                return (await read(store, "orders")).status.phase == "Ready"

            await eventually(ready, "Ready")
            current = await store.get(ScalableTopic.KIND, "default", "orders")
            current["spec"]["initialSegments"] = 0  # past validation
            await store.replace(current)

            async def failed() -> bool:
                return await phase(store, "orders") == "Failed"

            await eventually(failed, "phase Failed")
            await store.delete(ScalableTopic.KIND, "default", "orders")

            async def gone() -> bool:
                try:
                    await store.get(ScalableTopic.KIND, "default", "orders")
                except NotFound:
                    return (await store.list(Segment.KIND)).items == []
                return False

            await eventually(gone, "deleted with its segments")
        finally:
            await broker.close()
