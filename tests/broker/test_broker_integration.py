"""A real broker process on loopback: keyed messages through every subscription type."""

from __future__ import annotations

import asyncio
import itertools
from collections import defaultdict

import pytest

from scalable_topics.protocol import (
    BatchMessage,
    DeliveredMessage,
    EndOfSegment,
    ErrorCode,
    ProducerAccessMode,
    ProducerClosed,
    Seek,
    SegmentSubscriptionType,
)
from support.broker_process import BrokerProcess
from support.wire_client import RequestFailed, WireClient

TOPIC = "default/orders"
KEYS = [f"key-{i}" for i in range(12)]


async def make_segment(
    broker: BrokerProcess, descriptor: str = "0000-ffff-0", **body: object
) -> None:
    status, payload = await broker.admin("PUT", f"/default/orders/{descriptor}", body)
    assert status == 201, payload


async def produce(
    client: WireClient, count: int, producer_id: int = 1, batch: int = 10
) -> list[tuple[str, bytes]]:
    """Send ``count`` keyed messages in batches; return (key, payload) in send order."""
    sent: list[tuple[str, bytes]] = []
    sequence = 0
    futures = []
    while len(sent) < count:
        messages = []
        for _ in range(min(batch, count - len(sent))):
            key = KEYS[len(sent) % len(KEYS)]
            payload = f"{key}:{len(sent)}".encode()
            messages.append(BatchMessage(payload, key))
            sent.append((key, payload))
        futures.append(client.send_batch(producer_id, sequence, messages))
        sequence += len(messages)
    async with asyncio.timeout(30):
        receipts = await asyncio.gather(*futures)
    assert all(type(r).__name__ == "SendReceipt" for r in receipts), receipts
    return sent


def per_key(messages: list[DeliveredMessage]) -> dict[str, list[bytes]]:
    grouped: dict[str, list[bytes]] = defaultdict(list)
    for message in messages:
        assert message.key is not None
        grouped[message.key].append(message.payload)
    return grouped


@pytest.mark.parametrize(
    "kind",
    [
        SegmentSubscriptionType.EXCLUSIVE,
        SegmentSubscriptionType.FAILOVER,
        SegmentSubscriptionType.SHARED,
        SegmentSubscriptionType.KEY_SHARED,
    ],
)
async def test_every_message_delivered_once_with_per_key_order(
    broker: BrokerProcess, kind: SegmentSubscriptionType
) -> None:
    await make_segment(broker, subscriptions=["sub"])
    producer = await WireClient.connect(broker.ws_url)
    consumers = [await WireClient.connect(broker.ws_url) for _ in range(2)]
    try:
        await producer.open_producer(1, TOPIC, 0)
        sent = await produce(producer, 600)
        attached = consumers[:1] if kind is SegmentSubscriptionType.EXCLUSIVE else consumers
        for index, client in enumerate(attached):
            await client.subscribe(1, TOPIC, 0, "sub", kind, name=f"c{index}", permits=50)
        received: dict[int, list[DeliveredMessage]] = {i: [] for i in range(len(attached))}

        async def drain(index: int, client: WireClient) -> None:
            while sum(len(r) for r in received.values()) < len(sent):
                try:
                    message = await client.receive(1, timeout=1.0)
                except TimeoutError:
                    continue
                received[index].append(message)
                await client.ack(1, message.message_id, receipt=False)
                await client.flow(1, 1)

        async with asyncio.timeout(60):
            await asyncio.gather(*(drain(i, c) for i, c in enumerate(attached)))
        everything = [m for messages in received.values() for m in messages]
        assert sorted(m.payload for m in everything) == sorted(p for _, p in sent)  # exactly once
        expected = per_key([DeliveredMessage(None, p, k, {}, None, 0) for k, p in sent])  # type: ignore[arg-type]
        if kind is not SegmentSubscriptionType.SHARED:
            for messages in received.values():
                for key, payloads in per_key(messages).items():
                    # each consumer sees its keys' messages in the order they were sent
                    assert payloads == [p for p in expected[key] if p in set(payloads)]
        if kind is SegmentSubscriptionType.KEY_SHARED:
            # The second consumer joins once, so a key moves at most once, and only after the
            # first consumer acknowledged everything it had of that key: along send order, a
            # key's owner changes at most once.
            owner = {m.payload: i for i, messages in received.items() for m in messages}
            for key in KEYS:
                owners = [owner[p] for k, p in sent if k == key]
                switches = sum(1 for a, b in itertools.pairwise(owners) if a != b)
                assert switches <= 1, (key, owners)
    finally:
        for client in [producer, *consumers]:
            await client.close()


async def test_nacked_message_is_redelivered_with_its_count(broker: BrokerProcess) -> None:
    await make_segment(broker, subscriptions=["sub"])
    client = await WireClient.connect(broker.ws_url)
    try:
        await client.open_producer(1, TOPIC, 0)
        await client.send(1, 0, BatchMessage(b"first", "k"), BatchMessage(b"second", "k"))
        await client.subscribe(1, TOPIC, 0, "sub", SegmentSubscriptionType.SHARED)
        first, second = await client.receive_n(1, 2)
        assert (first.payload, first.redelivery_count) == (b"first", 0)
        await client.ack(1, second.message_id)
        await client.nack(1, first.message_id, delay_ms=100)
        again = await client.receive(1)
        assert (again.payload, again.redelivery_count) == (b"first", 1)
        assert again.message_id == first.message_id
    finally:
        await client.close()


async def test_seek_replays_from_an_entry(broker: BrokerProcess) -> None:
    await make_segment(broker, subscriptions=["sub"])
    client = await WireClient.connect(broker.ws_url)
    try:
        await client.open_producer(1, TOPIC, 0)
        for sequence in range(5):
            await client.send(1, sequence, BatchMessage(f"m{sequence}".encode()))
        await client.subscribe(1, TOPIC, 0, "sub", SegmentSubscriptionType.EXCLUSIVE)
        messages = await client.receive_n(1, 5)
        await client.ack(1, messages[-1].message_id, cumulative=True)
        await client.request(Seek(client.next_id(), 1, messages[2].message_id))
        await client.flow(1, 10)
        replayed = await client.receive_n(1, 3)
        assert [m.payload for m in replayed] == [b"m2", b"m3", b"m4"]
    finally:
        await client.close()


async def test_retried_batch_is_not_written_twice(broker: BrokerProcess) -> None:
    await make_segment(broker, subscriptions=["sub"])
    client = await WireClient.connect(broker.ws_url)
    try:
        await client.open_producer(1, TOPIC, 0, name="steady")
        first = await client.send(1, 0, BatchMessage(b"once"))
        retry = await client.send(1, 0, BatchMessage(b"once"))
        assert not first.duplicate
        assert retry.duplicate
        assert retry.message_id == first.message_id
        _, stats = await broker.admin("GET", "/default/orders/0000-ffff-0/stats")
        assert stats["lastEntryId"] == 0  # type: ignore[index]
    finally:
        await client.close()


async def test_terminated_segment_refuses_writes_and_tells_consumers_it_ended(
    broker: BrokerProcess,
) -> None:
    await make_segment(broker, subscriptions=["sub"])
    client = await WireClient.connect(broker.ws_url)
    try:
        await client.open_producer(1, TOPIC, 0, name="p")
        stored = await client.send(1, 0, BatchMessage(b"last words"))
        status, body = await broker.admin("POST", "/default/orders/0000-ffff-0/terminate")
        assert (status, body) == (200, {"lastEntryId": 0})
        closed = await client.next_event(ProducerClosed)
        assert closed.code is ErrorCode.SEGMENT_TERMINATED
        # A producer that lost the answers may reopen to learn what was stored, and only that.
        reopened = await client.open_producer(2, TOPIC, 0, name="p")
        assert reopened.last_sequence_id == 0
        again = await client.send(2, 0, BatchMessage(b"last words"))
        assert (again.message_id, again.duplicate) == (stored.message_id, True)
        with pytest.raises(RequestFailed) as refused:
            await client.send(2, 1, BatchMessage(b"too late"))
        assert refused.value.code is ErrorCode.SEGMENT_TERMINATED
        await client.subscribe(1, TOPIC, 0, "sub", SegmentSubscriptionType.EXCLUSIVE)
        message = await client.receive(1)
        await client.ack(1, message.message_id)
        end = await client.next_event(EndOfSegment)
        assert end.last_entry_id == 0
    finally:
        await client.close()


async def test_exclusive_producers(broker: BrokerProcess) -> None:
    await make_segment(broker, subscriptions=["sub"])
    first, second, third = [await WireClient.connect(broker.ws_url) for _ in range(3)]
    try:
        opened = await first.open_producer(
            1, TOPIC, 0, name="leader-1", mode=ProducerAccessMode.EXCLUSIVE
        )
        assert opened.producer_epoch == 1
        with pytest.raises(RequestFailed) as busy:
            await second.open_producer(
                1, TOPIC, 0, name="leader-2", mode=ProducerAccessMode.EXCLUSIVE
            )
        assert busy.value.code is ErrorCode.PRODUCER_BUSY
        waiting = asyncio.ensure_future(
            second.open_producer(
                2, TOPIC, 0, name="leader-2", mode=ProducerAccessMode.WAIT_FOR_EXCLUSIVE
            )
        )
        await asyncio.sleep(0.3)
        assert not waiting.done()
        await first.send(1, 0, BatchMessage(b"from leader-1"))
        await first.close_producer(1)
        taken = await waiting
        assert taken.producer_epoch == 2
        await second.send(2, 0, BatchMessage(b"from leader-2"))
        # A fencing producer takes over; the old holder's late send is refused.
        fencer = await third.open_producer(
            1, TOPIC, 0, name="leader-3", mode=ProducerAccessMode.EXCLUSIVE_WITH_FENCING
        )
        assert fencer.producer_epoch == 3
        fenced = await second.next_event(ProducerClosed)
        assert fenced.code is ErrorCode.PRODUCER_FENCED
        with pytest.raises(RequestFailed) as late:
            await second.send(2, 1, BatchMessage(b"late from leader-2"))
        assert late.value.code is ErrorCode.PRODUCER_FENCED
        await third.send(1, 0, BatchMessage(b"from leader-3"))
        await third.subscribe(9, TOPIC, 0, "sub", SegmentSubscriptionType.EXCLUSIVE)
        log = [m.payload for m in await third.receive_n(9, 3)]
        assert log == [b"from leader-1", b"from leader-2", b"from leader-3"]
        with pytest.raises(TimeoutError):
            await third.receive(9, timeout=0.5)
    finally:
        for client in (first, second, third):
            await client.close()


async def test_seek_by_timestamp_starts_at_the_first_message_published_then(
    broker: BrokerProcess,
) -> None:
    await make_segment(broker, subscriptions=["sub"])
    client = await WireClient.connect(broker.ws_url)
    try:
        await client.open_producer(1, TOPIC, 0)
        await client.send(1, 0, BatchMessage(b"old"))
        await asyncio.sleep(0.05)
        await client.send(1, 1, BatchMessage(b"new-1"))
        await client.send(1, 2, BatchMessage(b"new-2"))
        await client.subscribe(1, TOPIC, 0, "sub", SegmentSubscriptionType.EXCLUSIVE)
        messages = await client.receive_n(1, 3)
        await client.ack(1, messages[-1].message_id, cumulative=True)
        await client.request(Seek(client.next_id(), 1, None, messages[1].publish_time_ms))
        await client.flow(1, 10)
        assert [m.payload for m in await client.receive_n(1, 2)] == [b"new-1", b"new-2"]
        with pytest.raises(TimeoutError):
            await client.receive(1, timeout=0.3)
    finally:
        await client.close()


async def test_a_conditional_fence_is_refused_while_another_producer_is_connected(
    broker: BrokerProcess,
) -> None:
    """The segment admin API a topic-wide Exclusive or WaitForExclusive grant uses: the check
    for other producers and the reservation are one step on the broker."""
    await make_segment(broker, subscriptions=["sub"])
    segment = "/default/orders/0000-ffff-0"
    shared = await WireClient.connect(broker.ws_url)
    try:
        await shared.open_producer(1, TOPIC, 0, name="shared-1")
        status, busy = await broker.admin(
            "POST", segment + "/fence", {"epoch": 1, "holder": "amy", "ifFree": True}
        )
        assert status == 409 and isinstance(busy, dict)
        assert (busy["code"], busy["producers"]) == ("ProducerBusy", ["shared-1"])
        status, connected = await broker.admin("GET", segment + "/producers")
        assert (status, connected) == (
            200,
            [{"name": "shared-1", "accessMode": "Shared", "epoch": 0}],
        )
        # Untouched: no epoch raised, nothing reserved, and the Shared producer keeps writing.
        status, stats = await broker.admin("GET", segment + "/stats")
        assert isinstance(stats, dict) and (stats["producerEpoch"], stats["reservedFor"]) == (
            0,
            None,
        )
        await shared.send(1, 0, BatchMessage(b"still producing"))
        # A release of the claim undone raises no epoch either: nobody is fenced.
        status, released = await broker.admin("POST", segment + "/release", {"epoch": 1})
        assert (status, released) == (200, {"producerEpoch": 0})
        await shared.send(1, 1, BatchMessage(b"still producing"))

        await shared.close_producer(1)
        status, fenced = await broker.admin(
            "POST", segment + "/fence", {"epoch": 1, "holder": "amy", "ifFree": True}
        )
        assert (status, fenced) == (200, {"producerEpoch": 1})
        with pytest.raises(RequestFailed) as reserved:
            await shared.open_producer(2, TOPIC, 0, name="shared-1")
        assert reserved.value.code is ErrorCode.PRODUCER_BUSY
        status, released = await broker.admin("POST", segment + "/release", {"epoch": 1})
        assert (status, released) == (200, {"producerEpoch": 1})
        await shared.open_producer(3, TOPIC, 0, name="shared-1")
    finally:
        await shared.close()
