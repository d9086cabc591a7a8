"""Keyed producers and an ordered consumer run while 20 random splits and merges happen.

Afterwards every acknowledged message was consumed exactly once, each key's messages arrived
in the order they were sent, and a consumer that starts at Earliest only after all the splits
still reads every message, including those written before them (Pulsar bug #25642).

The producer here is deliberately small: it routes each key by the layout it reads from the
store, sends one message at a time, and when a segment is terminated waits for the layout that
seals it and re-sends to the child. The broker's drain gate keeps per-key order on the consumer
side: a child is dispatched only after its parents are drained.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
from asyncio import FIRST_COMPLETED
from collections import Counter, defaultdict
from collections.abc import AsyncIterator, Callable, Coroutine
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from aiohttp.test_utils import TestServer

from scalable_topics.controller.leader import ElectionTiming
from scalable_topics.controller.manager import ControllerConfig, ControllerManager
from scalable_topics.kubeapi.running import KubeApiSettings, start_kube_api
from scalable_topics.listening import listening_socket
from scalable_topics.model.hashing import hash_key
from scalable_topics.model.layout import SegmentLayout
from scalable_topics.model.resources import TOPIC_LABEL, ScalableTopic, Segment
from scalable_topics.model.scale_request import (
    MERGE_ANNOTATION,
    REQUESTER_ANNOTATION,
    SPLIT_ANNOTATION,
)
from scalable_topics.protocol import (
    BatchMessage,
    EndOfSegment,
    ErrorCode,
    SegmentSubscriptionType,
)
from scalable_topics.store import UNLIMITED, EmbeddedStore, Store, open_store
from support.wire_client import RequestFailed, WireClient

pytestmark = pytest.mark.slow

TOPIC = "default/orders"
OPERATIONS = 20
KEYS_PER_PRODUCER = 16
PRODUCERS = 3
SYSTEM_NAMESPACE = "scalable-topics"  # the controller's and brokers' default, for their Leases
# Each reader's permits: it gives them back as it consumes. Fewer than one segment's share of
# the messages, so that a reader that never gave them back would stall.
PERMITS = 200


@dataclass
class View:
    """The layout and where each segment is served, as the store has them now."""

    layout: SegmentLayout
    brokers: dict[int, str]


async def read_view(store: Store) -> View:
    topic = ScalableTopic.model_validate(await store.get(ScalableTopic.KIND, "default", "orders"))
    listing = await store.list(
        Segment.KIND, namespace="default", label_selector=f"{TOPIC_LABEL}=orders"
    )
    brokers = {}
    for item in listing.items:
        segment = Segment.model_validate(item)
        if segment.status.broker is not None:
            brokers[segment.spec.segment_id] = segment.status.broker
    return View(SegmentLayout.from_status(topic.status.to_wire()), brokers)


@dataclass
class KeyedProducer:
    store: Store
    name: str
    keys: list[str]
    acked: list[tuple[str, int]] = field(default_factory=list)
    reroutes: int = 0
    _clients: dict[int, WireClient] = field(default_factory=dict)

    async def run(self, stop: asyncio.Event) -> None:
        sequence = 0
        try:
            while not stop.is_set():
                for key in self.keys:
                    await self._publish(key, sequence)
                sequence += 1
        finally:
            for client in self._clients.values():
                await client.close()

    async def _publish(self, key: str, sequence: int) -> None:
        payload = f"{key}:{sequence}".encode()
        while True:
            view = await read_view(self.store)
            segment_id = view.layout.find_active(hash_key(key)).segment_id
            if segment_id not in view.brokers:
                await asyncio.sleep(0.02)
                continue
            try:
                # Opening can meet the segment sealed too, by an operation after this view.
                client = await self._producer(segment_id, view.brokers[segment_id])
                await client.send(1, len(self.acked), BatchMessage(payload, key=key))
            except RequestFailed as failure:
                if failure.code is not ErrorCode.SEGMENT_TERMINATED:
                    raise
                self.reroutes += 1
                await self._await_sealed(view.layout.epoch, segment_id)
                continue
            self.acked.append((key, sequence))
            return

    async def _producer(self, segment_id: int, broker_url: str) -> WireClient:
        client = self._clients.get(segment_id)
        if client is None:
            client = await WireClient.connect(broker_url)
            try:
                await client.open_producer(1, TOPIC, segment_id, name=f"{self.name}-{segment_id}")
            except BaseException:
                await client.close()
                raise
            self._clients[segment_id] = client
        return client

    async def _await_sealed(self, epoch: int, segment_id: int) -> None:
        """The segment was terminated: its split or merge commits the layout next."""
        async with asyncio.timeout(30):
            while True:
                layout = (await read_view(self.store)).layout
                if layout.epoch > epoch and not layout.get(segment_id).is_active:
                    return
                await asyncio.sleep(0.01)


@dataclass
class OrderedConsumer:
    """Reads every segment of the layout for one subscription (Exclusive per segment), acks as
    it goes, and follows new segments as the layout grows."""

    store: Store
    subscription: str
    received: list[tuple[str, int]] = field(default_factory=list)
    _readers: dict[int, asyncio.Task[None]] = field(default_factory=dict)
    per_segment: Counter[int] = field(default_factory=Counter)
    _arrived: asyncio.Event = field(default_factory=asyncio.Event)

    async def wait_received(self, count: int, running: asyncio.Task[None]) -> None:
        """Return once ``count`` messages arrived, or ``running`` (this consumer's run) ended;
        a stall fails with what each segment's reader is doing."""
        try:
            async with asyncio.timeout(60):
                while len(self.received) < count and not running.done():
                    self._arrived.clear()
                    arrived = asyncio.ensure_future(self._arrived.wait())
                    try:
                        await asyncio.wait([running, arrived], return_when=FIRST_COMPLETED)
                    finally:
                        arrived.cancel()
        except TimeoutError:
            readers = {
                segment_id: f"{self.per_segment[segment_id]} read, "
                + ("ended" if task.done() else "reading")
                for segment_id, task in self._readers.items()
            }
            raise AssertionError(
                f"{self.subscription}: {len(self.received)} of {count} messages after 60 s; "
                f"readers {readers}"
            ) from None

    async def run(self, stop: asyncio.Event) -> None:
        try:
            while not stop.is_set():
                view = await read_view(self.store)
                for segment_id in view.layout.segments:
                    if segment_id not in self._readers and segment_id in view.brokers:
                        self._readers[segment_id] = asyncio.create_task(
                            self._read(segment_id, view.brokers[segment_id], stop)
                        )
                for task in self._readers.values():
                    if task.done() and task.exception() is not None:
                        raise task.exception()  # type: ignore[misc]
                await asyncio.sleep(0.05)
        finally:
            for task in self._readers.values():
                task.cancel()
            await asyncio.gather(*self._readers.values(), return_exceptions=True)

    async def _read(self, segment_id: int, broker_url: str, stop: asyncio.Event) -> None:
        client = await WireClient.connect(broker_url)
        try:
            await client.subscribe(
                1,
                TOPIC,
                segment_id,
                self.subscription,
                SegmentSubscriptionType.EXCLUSIVE,
                permits=PERMITS,
            )
            unflowed = 0  # messages received since permits were last given back
            while not stop.is_set():
                try:
                    message = await client.receive(1, timeout=0.2)
                except ConnectionError:
                    reader = client._reader
                    why = reader.exception() if reader is not None and reader.done() else None
                    raise AssertionError(
                        f"segment {segment_id}: connection lost: {why!r}"
                    ) from None
                except TimeoutError:
                    if any(isinstance(e, EndOfSegment) for e in _drain(client.events)):
                        return
                    continue
                key, sequence = message.payload.decode().split(":")
                self.received.append((key, int(sequence)))
                self.per_segment[segment_id] += 1
                self._arrived.set()
                await client.ack(1, message.message_id, receipt=False)
                unflowed += 1
                if unflowed >= PERMITS // 2:  # as a client refills its receiver queue
                    await client.flow(1, unflowed)
                    unflowed = 0
        finally:
            await client.close()


def _drain(queue: asyncio.Queue[object]) -> list[object]:
    items = []
    while not queue.empty():
        items.append(queue.get_nowait())
    return items


@contextlib.asynccontextmanager
async def opened_store(path: Path, kind: str) -> AsyncIterator[Store]:
    """The store the system runs on: the embedded file itself, or the kubernetes adapter
    through the Kubernetes API served over that file (the Kubernetes path)."""
    if kind == "embedded":
        async with await EmbeddedStore.open(path / "store.db") as store:
            yield store
        return
    sock = listening_socket("127.0.0.1", 0)
    settings = KubeApiSettings(
        store_url=f"embedded://{path / 'store.db'}",
        token_file=path / "kube-api.token",
        kubeconfig=path / "kubeconfig",
        namespaces=(SYSTEM_NAMESPACE,),  # where Leases live, as the operator's manifests make it
    )
    kube_api = await start_kube_api(settings, sock)
    try:
        adapter = open_store(f"kubernetes://{settings.kubeconfig}", budget=UNLIMITED)
        try:
            yield adapter
        finally:
            await adapter.close()
    finally:
        await kube_api.stop()


@pytest.fixture(params=["embedded", "kubeapi"])
async def running(
    request: pytest.FixtureRequest, tmp_path: Path, make_broker: Callable[..., TestServer]
) -> AsyncIterator[Store]:
    async with opened_store(tmp_path, request.param) as store:
        servers = [make_broker(store, f"b{i}") for i in range(2)]
        for server in servers:
            await server.start_server()
        timing = ElectionTiming(lease_duration=3, renew_deadline=2, retry_period=0.5)
        manager = ControllerManager(store, ControllerConfig("controller-0", timing=timing))
        task = asyncio.create_task(manager.run())
        try:
            await store.create(
                ScalableTopic.model_validate(
                    {
                        "metadata": {"name": "orders", "namespace": "default"},
                        "spec": {
                            "initialSegments": 2,
                            "subscriptions": [
                                {"name": "billing", "type": "Stream"},
                                {"name": "late", "type": "Stream"},
                            ],
                        },
                    }
                ).to_wire()
            )
            async with asyncio.timeout(30):
                while (
                    ScalableTopic.model_validate(
                        await store.get(ScalableTopic.KIND, "default", "orders")
                    ).status.phase
                    != "Ready"
                ):
                    await asyncio.sleep(0.05)
            yield store
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
            for server in servers:
                await server.close()


async def scale_randomly(store: Store, seed: int) -> list[str]:
    rng = random.Random(seed)
    done = []
    for index in range(OPERATIONS):
        await asyncio.sleep(rng.uniform(0.05, 0.3))  # let traffic flow between operations
        layout = (await read_view(store)).layout
        active = layout.active
        if len(active) == 1 or (len(active) < 6 and rng.random() < 0.55):
            target = rng.choice([s for s in active if s.hash_range.can_split()])
            annotation, value = SPLIT_ANNOTATION, str(target.segment_id)
        else:
            first = rng.randrange(len(active) - 1)
            annotation = MERGE_ANNOTATION
            value = f"{active[first].segment_id},{active[first + 1].segment_id}"
        token = f"op-{index}"
        await store.patch(
            ScalableTopic.KIND,
            "default",
            "orders",
            {"metadata": {"annotations": {annotation: value, REQUESTER_ANNOTATION: token}}},
        )
        async with asyncio.timeout(30):
            while True:
                topic = ScalableTopic.model_validate(
                    await store.get(ScalableTopic.KIND, "default", "orders")
                )
                last = topic.status.last_operation
                if last is not None and last.requested_by == token:
                    break
                await asyncio.sleep(0.01)
        assert last.result == "Succeeded", last.message
        done.append(f"{annotation.split('/')[1]}={value}")
    return done


@contextlib.asynccontextmanager
async def running_tasks(
    work: list[Coroutine[Any, Any, None]], stop: asyncio.Event
) -> AsyncIterator[list[asyncio.Task[None]]]:
    """Run ``work``; on leaving, set ``stop`` and await every task, so that their failures
    are raised here (the first one) and none outlives the test."""
    tasks = [asyncio.create_task(each) for each in work]
    try:
        yield tasks
    finally:
        stop.set()
        outcomes = await asyncio.gather(*tasks, return_exceptions=True)
    for outcome in outcomes:
        if isinstance(outcome, BaseException):
            raise outcome


def check_exactly_once_in_order(
    acked: list[tuple[str, int]], received: list[tuple[str, int]]
) -> None:
    by_key: dict[str, list[int]] = defaultdict(list)
    for key, sequence in received:
        by_key[key].append(sequence)
    sent: dict[str, list[int]] = defaultdict(list)
    for key, sequence in acked:
        sent[key].append(sequence)
    for key, sequences in sent.items():
        assert by_key[key] == sequences, f"key {key}: got {by_key[key]}, sent {sequences}"
    assert set(by_key) == set(sent)


async def test_splits_and_merges_under_load_lose_nothing_and_keep_per_key_order(
    running: Store,
) -> None:
    store = running
    stop_producing, stop_consuming = asyncio.Event(), asyncio.Event()
    producers = [
        KeyedProducer(store, f"p{n}", [f"p{n}-key{k}" for k in range(KEYS_PER_PRODUCER)])
        for n in range(PRODUCERS)
    ]
    billing = OrderedConsumer(store, "billing")
    async with (
        running_tasks([p.run(stop_producing) for p in producers], stop_producing) as producing,
        running_tasks([billing.run(stop_consuming)], stop_consuming) as consuming,
    ):
        operations = await scale_randomly(store, seed=20261122)
        stop_producing.set()
        await asyncio.gather(*producing)
        acked = [item for p in producers for item in p.acked]
        await billing.wait_received(len(acked), consuming[0])
        await asyncio.sleep(0.3)  # anything beyond the acked set would be a duplicate: let it show

    layout = (await read_view(store)).layout
    layout.check_invariants()
    assert layout.epoch == OPERATIONS, operations
    assert sum(p.reroutes for p in producers) > 0  # producers really ran into sealed segments
    check_exactly_once_in_order(acked, billing.received)

    # A consumer that starts only now, at Earliest, still reads the messages written before the
    # splits: sealed segments with a backlog for its subscription are still served.
    late = OrderedConsumer(store, "late")
    stop_late = asyncio.Event()
    async with running_tasks([late.run(stop_late)], stop_late) as reading:
        await late.wait_received(len(acked), reading[0])
        await asyncio.sleep(0.3)
    check_exactly_once_in_order(acked, late.received)
    print(
        f"{len(acked)} messages, {OPERATIONS} operations, "
        f"{sum(p.reroutes for p in producers)} re-routes"
    )
