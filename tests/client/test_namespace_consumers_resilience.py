"""The namespace consumers' must-show: a namespace stream consumer and a namespace queue
consumer read four topics while a producer writes to each, and meanwhile a broker is killed
(SIGKILL) and restarted and the leading controller is killed (two controllers: the other
takes over). Nothing produced is lost, nothing acknowledged comes again, and the stream
consumer keeps each key's order within its topic."""

from __future__ import annotations

import asyncio
import contextlib
from collections import defaultdict
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field

import pytest
from client_cluster import GRACE_SECONDS, ClientCluster
from namespace_topics import NAMESPACE, create_topics, qualified

from scalable_topics.client import (
    Client,
    NamespaceQueueConsumer,
    NamespaceStreamConsumer,
    ReceivedMessage,
)
from scalable_topics.tasks import cancel_and_wait
from support.controller_process import ControllerProcess
from support.eventually import eventually
from support.leases import topic_lease

pytestmark = pytest.mark.slow

TOPICS = ["t0", "t1", "t2", "t3"]
KEYS = 4
# Messages a producer may send ahead of what both consumers have received.
WINDOW = 40
# Messages both consumers must receive between one fault and the next.
STRIDE = 60


@dataclass
class Tally:
    """What one consumer received, and what it may never receive again."""

    received: list[str] = field(default_factory=list)
    seen: set[str] = field(default_factory=set)
    acknowledged: set[str] = field(default_factory=set)
    violations: list[str] = field(default_factory=list)

    def arrived(self, message: ReceivedMessage) -> str:
        payload = message.payload.decode()
        if payload in self.acknowledged:
            self.violations.append(f"{payload} came again after its acknowledgement")
        topic = payload.split("|")[0]
        if message.topic != topic:
            self.violations.append(f"{payload} came as a message of {message.topic}")
        self.received.append(payload)
        self.seen.add(payload)
        return payload


class Flow:
    """Producers wait for consumers: at most WINDOW messages sent ahead of the slower one."""

    def __init__(self, tallies: list[Tally]) -> None:
        self.sent: list[str] = []
        self._tallies = tallies
        self._changed = asyncio.Condition()

    @property
    def behind(self) -> int:
        return min(len(t.seen) for t in self._tallies)

    async def notify(self) -> None:
        async with self._changed:
            self._changed.notify_all()

    async def wait_for(self, predicate: Callable[[], bool]) -> None:
        async with self._changed:
            await self._changed.wait_for(predicate)


async def produce(client: Client, topic: str, flow: Flow, stop: asyncio.Event) -> None:
    producer = await client.create_producer(qualified(topic))
    try:
        sequence = 0
        while not stop.is_set():
            await flow.wait_for(lambda: stop.is_set() or len(flow.sent) - flow.behind < WINDOW)
            if stop.is_set():
                break
            key = f"k{sequence % KEYS}"
            text = f"{qualified(topic)}|{key}|{sequence}"
            await producer.send(text.encode(), key=key)
            flow.sent.append(text)
            sequence += 1
    finally:
        await producer.close()


async def read_stream(consumer: NamespaceStreamConsumer, tally: Tally, flow: Flow) -> None:
    handed: list[str] = []  # in order: a cumulative acknowledgement covers a prefix
    async for message in consumer:
        handed.append(tally.arrived(message))
        if await consumer.acknowledge_cumulative(message):
            tally.acknowledged.update(handed)
            handed.clear()
        await flow.notify()


async def read_queue(consumer: NamespaceQueueConsumer, tally: Tally, flow: Flow) -> None:
    async for message in consumer:
        payload = tally.arrived(message)
        if await consumer.acknowledge(message):
            tally.acknowledged.add(payload)
        await flow.notify()


def order_problems(received: list[str]) -> list[str]:
    """Per topic and key, messages not seen before must come in the order sent (each the next
    sequence of its key); a message seen before may come again (delivered and not yet
    acknowledged when its session dropped)."""
    last: dict[tuple[str, str], int] = {}
    sequences: dict[tuple[str, str], list[int]] = defaultdict(list)
    problems = []
    for payload in received:
        topic, key, text = payload.split("|")
        sequence = int(text)
        sequences[topic, key].append(sequence)
        known = last.get((topic, key))
        if known is not None and sequence <= known:
            continue  # again
        expected = int(key[1:]) if known is None else known + KEYS
        if sequence != expected:
            problems.append(f"{topic} {key}: {sequence} after {known}")
        last[topic, key] = sequence
    return problems


async def leader_of(cluster: ClientCluster, name: str) -> str:
    lease = await topic_lease(cluster.store, NAMESPACE, name)
    return str(lease["spec"]["holderIdentity"])


async def test_nothing_lost_across_a_broker_restart_and_a_controller_failover(
    cluster: ClientCluster,
) -> None:
    standby = ControllerProcess(
        cluster.root,
        cluster.controller.store_url,
        "controller-1",
        listen=True,
        extra=("--consumer-grace-period", str(GRACE_SECONDS)),
    )
    standby.start()
    controllers = {"controller-0": cluster.controller, "controller-1": standby}
    tasks: list[asyncio.Task[None]] = []
    stop = asyncio.Event()
    try:
        async with cluster.client(operation_timeout=20) as client, _owning(tasks, stop):
            await create_topics(client, TOPICS, subscriptions=[("s", "Stream"), ("q", "Queue")])
            stream = await client.subscribe_stream(
                subscription="s", consumer_name="c1", namespace=NAMESPACE, receive_queue_size=50
            )
            queue = await client.subscribe_queue(
                subscription="q", namespace=NAMESPACE, receive_queue_size=50
            )
            assert stream.attached_topics == queue.attached_topics == set(map(qualified, TOPICS))
            streamed, queued = Tally(), Tally()
            flow = Flow([streamed, queued])
            loop = asyncio.get_running_loop()
            tasks += [
                loop.create_task(read_stream(stream, streamed, flow)),
                loop.create_task(read_queue(queue, queued, flow)),
            ]
            tasks += [loop.create_task(produce(client, t, flow, stop)) for t in TOPICS]

            async def both_received(count: int, what: str) -> None:
                await eventually(lambda: flow.behind >= count, what, timeout=120)

            await both_received(STRIDE, "messages before the faults")
            broker = cluster.brokers[0]
            broker.kill()
            await broker.start()
            await both_received(flow.behind + STRIDE, "messages after the broker restart")

            leader = await leader_of(cluster, "t0")
            controllers[leader].kill()
            await eventually(
                lambda: _led_by_another(cluster, leader), "another controller leading", timeout=60
            )
            await both_received(flow.behind + STRIDE, "messages after the failover")

            stop.set()
            await flow.notify()
            for task in tasks[2:]:
                await task  # a producer's failure fails the test
            sent = set(flow.sent)
            await eventually(
                lambda: sent <= streamed.seen and sent <= queued.seen, "all", timeout=120
            )
            await stream.close()
            await queue.close()
            for task in tasks[:2]:
                await task
        assert len(sent) == len(flow.sent) >= 3 * STRIDE
        assert streamed.violations == [] and queued.violations == []
        assert order_problems(streamed.received) == []
        print(
            f"\n{len(sent)} sent; stream received {len(streamed.received)}, "
            f"queue {len(queued.received)} (with redeliveries); controller {leader} killed"
        )
    finally:
        standby.stop()


@contextlib.asynccontextmanager
async def _owning(tasks: list[asyncio.Task[None]], stop: asyncio.Event) -> AsyncIterator[None]:
    """Cancel and await the test's tasks before its client closes under them."""
    try:
        yield
    finally:
        stop.set()
        for task in tasks:
            await cancel_and_wait(task)


async def _led_by_another(cluster: ClientCluster, old: str) -> bool:
    leaders = [await leader_of(cluster, name) for name in TOPICS]
    return all(leader not in ("", old) for leader in leaders)
