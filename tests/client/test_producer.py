"""The Producer through the public client API, against brokers and a controller on loopback."""

from __future__ import annotations

import asyncio
import itertools
from collections import defaultdict
from pathlib import Path

import pytest

from scalable_topics.client import Client, Producer
from scalable_topics.client.errors import (
    ClientClosed,
    MessageTooLarge,
    NotFound,
    ProducerBusy,
    ProducerFenced,
)
from scalable_topics.model.hashing import hash_key
from scalable_topics.model.layout import SegmentLayout
from scalable_topics.protocol import EndOfSegment, MessageId, SegmentSubscriptionType
from scalable_topics.store.informers import Informers
from support.inprocess_service import Service, running_service
from support.wire_client import WireClient

pytestmark = pytest.mark.slow

TOPIC = "default/orders"


async def read_everything(service: Service, subscription: str, expected: int) -> list[str]:
    """Every payload of every segment, through an Exclusive subscription per segment."""
    layout = await service.layout("orders")
    payloads: list[str] = []
    clients = []
    by_broker = {s.spec.segment_id: s.status.broker for s in await _segments(service)}

    async def read(segment_id: int) -> None:
        client = await WireClient.connect(by_broker[segment_id])
        clients.append(client)
        await client.subscribe(
            1, TOPIC, segment_id, subscription, SegmentSubscriptionType.EXCLUSIVE, permits=1 << 20
        )
        while True:
            try:
                message = await client.receive(1, timeout=0.2)
            except TimeoutError:
                events = [client.events.get_nowait() for _ in range(client.events.qsize())]
                if any(isinstance(e, EndOfSegment) for e in events):
                    return
                continue
            payloads.append(message.payload.decode())
            await client.ack(1, message.message_id, receipt=False)

    readers = [asyncio.create_task(read(s)) for s in layout.segments]
    try:
        async with asyncio.timeout(30):
            while len(payloads) < expected:
                failed = [r.exception() for r in readers if r.done() and r.exception()]
                assert not failed, failed
                await asyncio.sleep(0.05)
        await asyncio.sleep(0.3)  # anything beyond would be a duplicate: let it show
    finally:
        for reader in readers:
            reader.cancel()
        await asyncio.gather(*readers, return_exceptions=True)
        for client in clients:
            await client.close()
    return payloads


async def _segments(service: Service) -> list:
    from scalable_topics.model.resources import TOPIC_LABEL, Segment

    listing = await service.store.list(
        Segment.KIND, namespace="default", label_selector=f"{TOPIC_LABEL}=orders"
    )
    return [Segment.model_validate(item) for item in listing.items]


def assert_dag_order(layout: SegmentLayout, ids_by_key: dict[str, list[MessageId]]) -> None:
    """Each key's ids, in send order, only move forward: later in the same segment, or into a
    descendant of it."""
    for key, ids in ids_by_key.items():
        for earlier, later in itertools.pairwise(ids):
            if earlier.segment_id == later.segment_id:
                assert (earlier.entry_id, earlier.batch_index) < (
                    later.entry_id,
                    later.batch_index,
                ), f"{key}: {earlier} then {later}"
            else:
                assert later.segment_id in layout.descendants(earlier.segment_id), (
                    f"{key}: {earlier} then {later}, not a descendant"
                )
            assert layout.get(later.segment_id).hash_range.contains(hash_key(key))


async def send_until_refused(producer: Producer) -> None:
    """Send until a send fails: the revocation reaches a fenced producer shortly after."""
    for _ in range(50):
        await producer.send(b"late", key="k")
        await asyncio.sleep(0.05)


async def create_when_released(client: Client) -> Producer:
    async with asyncio.timeout(10):
        while True:
            try:
                return await client.create_producer(TOPIC)
            except ProducerBusy:
                await asyncio.sleep(0.1)


async def test_keyed_messages_survive_splits_and_merges_in_order(tmp_path: Path) -> None:
    async with running_service(tmp_path) as service:
        await service.create_topic("orders", initial=2, subscriptions=[("audit", "Stream")])
        async with Client(service.url) as client:
            producer = await client.create_producer(TOPIC, batching_max_delay=0.002)
            keys = [f"customer-{n}" for n in range(40)]
            sent: dict[str, list[asyncio.Future[MessageId | None]]] = defaultdict(list)
            stop = asyncio.Event()

            async def produce() -> None:
                sequence = 0
                while not stop.is_set():
                    for key in keys:
                        future = await producer.send_async(f"{key}:{sequence}".encode(), key=key)
                        sent[key].append(future)
                    sequence += 1
                    await asyncio.sleep(0.01)

            producing = asyncio.create_task(produce())
            operations = await service.scale_randomly("orders", operations=10, seed=7)
            stop.set()
            await producing
            await producer.flush()
            ids_by_key = {key: [f.result() for f in futures] for key, futures in sent.items()}
            await producer.close()

        total = sum(len(ids) for ids in ids_by_key.values())
        assert all(i is not None for ids in ids_by_key.values() for i in ids)
        layout = await service.layout("orders")
        assert layout.epoch == 10, operations
        assert_dag_order(layout, ids_by_key)  # type: ignore[arg-type]
        payloads = await read_everything(service, "audit", total)
        assert sorted(payloads) == sorted(
            f"{key}:{n}" for key, ids in ids_by_key.items() for n in range(len(ids))
        )


async def test_a_segment_placed_on_a_broker_that_has_not_opened_it_is_waited_for(
    tmp_path: Path,
) -> None:
    """The controller records a segment's broker before that broker creates it, so the layout
    can name a broker that answers SegmentNotFound: producers and consumers ask again, and do
    not take the segment for gone."""
    from scalable_topics.model.resources import Segment

    async with running_service(tmp_path) as service:
        await service.create_topic("orders", initial=1)
        [segment] = await _segments(service)
        home = segment.status.broker
        [elsewhere] = [url for url in service.url.split(",") if url != home]

        async def place(broker: str | None) -> None:
            await service.store.patch_status(
                Segment.KIND, "default", segment.metadata.name, {"status": {"broker": broker}}
            )

            def placed(caches: Informers) -> bool:
                cached = caches.segments.get("default", segment.metadata.name) or {}
                return (cached.get("status") or {}).get("broker") == broker

            await service.brokers_show(placed, f"segment 0 placed on {broker}")

        await place(elsewhere)
        async with Client(service.url) as client:
            opening = asyncio.create_task(client.create_producer(TOPIC))
            subscribing = asyncio.create_task(client.subscribe_queue(TOPIC, "s"))
            await asyncio.sleep(1.0)  # both asked the broker that lacks it, maybe often
            assert not opening.done() and not subscribing.done()
            await place(home)
            producer, consumer = await opening, await subscribing
            message_id = await producer.send(b"arrived", key="k")
            assert message_id is not None and message_id.segment_id == 0
            assert (await consumer.receive(wait_seconds=10)).payload == b"arrived"


async def test_a_producer_opening_on_a_deleted_topic_fails_with_not_found(tmp_path: Path) -> None:
    from scalable_topics.model.resources import ScalableTopic, Segment

    async with running_service(tmp_path) as service:
        await service.create_topic("orders", initial=1)
        [segment] = await _segments(service)
        [elsewhere] = [url for url in service.url.split(",") if url != segment.status.broker]
        await service.store.patch_status(
            Segment.KIND, "default", segment.metadata.name, {"status": {"broker": elsewhere}}
        )

        def moved(caches: Informers) -> bool:
            cached = caches.segments.get("default", segment.metadata.name) or {}
            return (cached.get("status") or {}).get("broker") == elsewhere

        await service.brokers_show(moved, "segment 0 placed elsewhere")
        async with Client(service.url, operation_timeout=60) as client:
            opening = asyncio.create_task(client.create_producer(TOPIC))
            await asyncio.sleep(0.5)  # asking the broker that lacks the segment
            await service.store.delete(ScalableTopic.KIND, "default", "orders")
            # Answered by the deletion itself, not by the operation timeout giving up.
            await asyncio.wait({opening}, timeout=30)
            assert opening.done()
            with pytest.raises(NotFound, match="deleted"):
                opening.result()


async def test_keyless_messages_spread_over_active_segments(tmp_path: Path) -> None:
    async with running_service(tmp_path, brokers=1) as service:
        await service.create_topic("orders", initial=3)
        async with Client(service.url) as client:
            producer = await client.create_producer(TOPIC, batching_max_delay=0)
            ids = [await producer.send(f"m{n}".encode()) for n in range(9)]
            assert sorted({i.segment_id for i in ids if i is not None}) == [0, 1, 2]


async def test_bad_input_gets_clear_errors(tmp_path: Path) -> None:
    async with running_service(tmp_path, brokers=1) as service:
        await service.create_topic("orders")
        async with Client(service.url) as client:
            with pytest.raises(NotFound, match="orders-missing"):
                await client.create_producer("default/orders-missing")
            producer = await client.create_producer(TOPIC)
            with pytest.raises(MessageTooLarge, match="over the brokers' limit"):
                await producer.send(b"x" * (6 * 1024 * 1024))
            assert await producer.send(b"fine", key="k") is not None
            await producer.close()
            with pytest.raises(ClientClosed):
                await producer.send(b"late")


async def test_exclusive_producer_fences_and_refuses_others(tmp_path: Path) -> None:
    async with running_service(tmp_path, brokers=1) as service:
        await service.create_topic("orders", initial=2)
        async with Client(service.url) as client:
            first = await client.create_producer(TOPIC, name="writer-a", access_mode="Exclusive")
            assert first.epoch is not None
            await first.send(b"a1", key="k")
            with pytest.raises(ProducerBusy):
                await client.create_producer(TOPIC, name="writer-b", access_mode="Exclusive")
            with pytest.raises(ProducerBusy):
                await client.create_producer(TOPIC)  # Shared, while the topic is held
            second = await client.create_producer(
                TOPIC, name="writer-b", access_mode="ExclusiveWithFencing"
            )
            assert second.epoch is not None and second.epoch > first.epoch
            await second.send(b"b1", key="k")
            with pytest.raises(ProducerFenced):
                await send_until_refused(first)
            await second.close()
            # Released: the controller lifts the segments' reservations shortly after.
            shared = await create_when_released(client)
            assert await shared.send(b"s1", key="k") is not None
