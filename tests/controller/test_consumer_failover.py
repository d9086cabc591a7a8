"""The must-show of consumer sessions: the leading ``stctl controller`` process dies (SIGKILL)
while two stream consumers are registered through a broker. Another process leads with a
higher term, the consumers' registrations are re-made with it through the broker within the
grace period and keep their segments (no rebalance), and writes of the dead leader's term are
refused: a write on the resourceVersion it read conflicts, and a coordinator of its term that
reads again finds the newer term and stops."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

import pytest
from aiohttp.test_utils import TestServer
from stream_consumers import StreamConsumer, segment_ids

from scalable_topics.controller.consumers import ConsumerRefused, TopicConsumers
from scalable_topics.model.clock import SystemClock
from scalable_topics.model.resources import ScalableTopic
from scalable_topics.protocol import ConsumerAssignment, ErrorCode, RegistrationClosed
from scalable_topics.store import Conflict, EmbeddedStore
from scalable_topics.store.informers import Informers
from scalable_topics.tasks import cancel_and_wait
from support.controller_process import ControllerProcess
from support.leases import SYSTEM_NAMESPACE, topic_lease

pytestmark = pytest.mark.slow

TOPIC = "default/orders"
GRACE = 60.0  # far above a failover: nobody may lose a segment to it


async def read_topic(store: EmbeddedStore) -> ScalableTopic:
    return ScalableTopic.model_validate(await store.get(ScalableTopic.KIND, "default", "orders"))


async def registrations(store: EmbeddedStore) -> dict[str, tuple[list[int], int]]:
    topic = await read_topic(store)
    entry = next(e for e in topic.status.subscriptions if e.name == "s")
    return {c.name: (c.assigned_segments, c.term) for c in entry.consumers}


async def lease_taken_over(store: EmbeddedStore, old_holder: str) -> float:
    """The loop time at which the topic's Lease first names another holder."""
    loop = asyncio.get_running_loop()
    async with asyncio.timeout(60):
        while True:
            lease = await topic_lease(store, "default", "orders")
            if lease["spec"]["holderIdentity"] not in ("", old_holder):
                return loop.time()
            await asyncio.sleep(0.02)


async def assignment_of_term_above(consumer: StreamConsumer, term: int) -> ConsumerAssignment:
    while True:
        assignment = await consumer.next_assignment(timeout=60)
        if assignment.term > term:
            return assignment


async def test_failover_keeps_every_assignment_and_refuses_the_old_term(
    tmp_path: Path, make_broker: Callable[..., TestServer]
) -> None:
    store_path = tmp_path / "store.db"
    async with await EmbeddedStore.open(store_path) as store:
        broker = make_broker(store, "b")
        await broker.start_server()
        controllers = {}
        for identity in ("controller-a", "controller-b"):
            controllers[identity] = ControllerProcess(
                tmp_path,
                f"embedded://{store_path}",
                identity,
                listen=True,
                extra=("--consumer-grace-period", str(GRACE)),
            )
            controllers[identity].start()
        consumers: list[StreamConsumer] = []
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
            async with asyncio.timeout(60):
                while (await read_topic(store)).status.phase != "Ready":
                    await asyncio.sleep(0.1)

            broker_url = f"http://127.0.0.1:{broker.port}"
            amy = await StreamConsumer.join(broker_url, TOPIC, "s", "amy")
            bob = await StreamConsumer.join(broker_url, TOPIC, "s", "bob")
            consumers += [amy, bob]
            before_amy = await amy.assignment_where([0, 2])
            before_bob = await bob.assignment_where([1, 3])
            old_term = before_amy.term
            assert before_bob.term == old_term
            assert await registrations(store) == {
                "amy": ([0, 2], old_term),
                "bob": ([1, 3], old_term),
            }
            stale_read = await read_topic(store)  # what the old leader last saw

            lease = await topic_lease(store, "default", "orders")
            leader = lease["spec"]["holderIdentity"]
            loop = asyncio.get_running_loop()
            controllers[leader].kill()
            killed_at = loop.time()
            takeover = asyncio.create_task(lease_taken_over(store, leader))

            after_amy = await assignment_of_term_above(amy, old_term)
            after_bob = await assignment_of_term_above(bob, old_term)
            reregistered = loop.time() - killed_at
            led = await takeover - killed_at
            new_lease = await topic_lease(store, "default", "orders")
            new_leader = new_lease["spec"]["holderIdentity"]
            print(
                f"\nfailover: {leader} killed; {new_leader} took the lease {led:.2f}s later "
                f"(term {after_amy.term}, was {old_term}); both consumers re-registered "
                f"{reregistered:.2f}s after the kill"
            )
            assert new_leader != leader
            assert new_lease["spec"]["leaseTransitions"] == after_amy.term > old_term
            # No rebalance: the same segments, now under the new term.
            assert segment_ids(after_amy) == [0, 2]
            assert segment_ids(after_bob) == [1, 3]
            assert after_bob.term == after_amy.term
            new_term = after_amy.term
            assert await registrations(store) == {
                "amy": ([0, 2], new_term),
                "bob": ([1, 3], new_term),
            }
            for consumer in consumers:
                assert not any(isinstance(e, RegistrationClosed) for e in consumer.take_pending())

            # The dead leader's late write, on what it read, is refused.
            with pytest.raises(Conflict):
                await store.patch_status(
                    ScalableTopic.KIND,
                    "default",
                    "orders",
                    {"status": {"subscriptions": []}},
                    resource_version=stale_read.metadata.resource_version,
                )
            # A coordinator of the old term that reads again finds the newer term and stops.
            informers = Informers(store, SYSTEM_NAMESPACE)
            informers.start()
            stale = TopicConsumers(
                store, informers, "default", "orders", old_term, SystemClock(loop.time), GRACE
            )
            running = asyncio.create_task(stale.run())
            try:
                with pytest.raises(ConsumerRefused) as refused:
                    await stale.register("s", "carl", _Silent())
                assert refused.value.code is ErrorCode.NOT_LEADER
            finally:
                await cancel_and_wait(running)
                await informers.stop()
            assert await registrations(store) == {
                "amy": ([0, 2], new_term),
                "bob": ([1, 3], new_term),
            }
        finally:
            for consumer in consumers:
                await consumer.disconnect()
            for process in controllers.values():
                process.stop()
            await broker.close()


class _Silent:
    def assigned(self, grant: object) -> None:
        raise AssertionError("a deposed leader told a consumer its segments")

    def closed(self, code: ErrorCode, message: str) -> None:
        pass
