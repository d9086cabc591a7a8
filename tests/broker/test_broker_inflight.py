"""The in-flight publish limits on a broker application on loopback (broker/inflight.py).

The disk is held still by replacing the log's fsync (durable_fs.flush_to_disk, looked up at
each call) with one that waits for the test: sends then stay in flight as long as the test
wants, and the assertions read the broker's own counters, never the clock.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import aiohttp
import pytest

from scalable_topics.broker.inflight import PublishCounters
from scalable_topics.broker.metrics import PUBLISH_COUNTERS_KEY
from scalable_topics.broker.storage import durable_fs
from scalable_topics.protocol import (
    BatchMessage,
    ErrorCode,
    ProducerClosed,
    SegmentSubscriptionType,
    SendError,
    SendReceipt,
)
from support.eventually import eventually
from support.servers import broker_servers
from support.wire_client import WireClient

TOPIC = "default/orders"


class Disk:
    """fsync that waits while the test holds the disk."""

    def __init__(self, real: Callable[[int], None]) -> None:
        self._real = real
        self._free = threading.Event()
        self._free.set()

    def hold(self) -> None:
        self._free.clear()

    def release(self) -> None:
        self._free.set()

    def flush(self, fd: int) -> None:
        self._free.wait()  # on the log's worker thread
        self._real(fd)


@pytest.fixture
def disk(monkeypatch: pytest.MonkeyPatch) -> Iterator[Disk]:
    held = Disk(durable_fs.flush_to_disk)
    monkeypatch.setattr(durable_fs, "flush_to_disk", held.flush)
    try:
        yield held
    finally:
        held.release()  # never leave a worker thread waiting


@dataclass
class Broker:
    url: str
    counters: PublishCounters

    async def segment(self, subscriptions: tuple[str, ...] = ("sub",)) -> None:
        async with (
            aiohttp.ClientSession() as http,
            http.put(
                f"http://{self.url}/admin/v1/segments/default/orders/0000-ffff-0",
                json={"subscriptions": list(subscriptions)},
            ) as response,
        ):
            assert response.status == 201, await response.text()

    async def client(self) -> WireClient:
        return await WireClient.connect(f"ws://{self.url}")


class StartBroker(Protocol):
    async def __call__(self, **settings: int) -> Broker: ...


@pytest.fixture
async def start_broker(tmp_path: Path) -> AsyncIterator[StartBroker]:
    async with broker_servers(tmp_path) as start_server:

        async def start(**settings: int) -> Broker:
            server = await start_server(**settings)
            return Broker(f"127.0.0.1:{server.port}", server.app[PUBLISH_COUNTERS_KEY])

        yield start


def batch(sequence: int, prefix: str = "m") -> list[BatchMessage]:
    return [BatchMessage(f"{prefix}{sequence}".encode(), "k")]


async def test_a_connection_at_its_limit_is_not_read_until_answers_go_out(
    start_broker: StartBroker, disk: Disk
) -> None:
    broker = await start_broker(
        max_pending_publishes_per_connection=8, max_pending_publishes_per_producer=100
    )
    await broker.segment()
    client = await broker.client()
    try:
        await client.open_producer(1, TOPIC, 0)
        disk.hold()
        receipts = [client.send_batch(1, sequence, batch(sequence)) for sequence in range(30)]
        await eventually(lambda: broker.counters.in_flight == 8, "eight sends in flight")
        assert broker.counters.read_pauses_total >= 1
        assert not any(receipt.done() for receipt in receipts)
        disk.release()
        answers = [await receipt for receipt in receipts]
        assert all(isinstance(answer, SendReceipt) for answer in answers), answers
        assert [a.message_id.entry_id for a in answers] == list(range(30))  # type: ignore[union-attr]
        # The 22 other sends waited unread: the broker never held more than its limit.
        assert broker.counters.most_in_flight == 8
        await eventually(lambda: broker.counters.in_flight == 0, "every send answered")
        assert broker.counters.in_flight_bytes == 0
    finally:
        await client.close()


async def test_the_byte_limit_stops_reading_too(start_broker: StartBroker, disk: Disk) -> None:
    # Each send holds 128 (its one message) + 2 x 1000 payload bytes (decoded, and in its log
    # record): the third one crosses 5,000.
    broker = await start_broker(max_pending_publish_bytes_per_connection=5_000)
    await broker.segment()
    client = await broker.client()
    try:
        await client.open_producer(1, TOPIC, 0)
        disk.hold()
        messages = [BatchMessage(b"x" * 1000)]
        receipts = [client.send_batch(1, sequence, messages) for sequence in range(10)]
        await eventually(lambda: broker.counters.in_flight == 3, "three sends in flight")
        assert broker.counters.in_flight_bytes == 3 * 2128
        disk.release()
        answers = [await receipt for receipt in receipts]
        assert all(isinstance(answer, SendReceipt) for answer in answers), answers
        assert broker.counters.most_in_flight == 3
    finally:
        await client.close()


async def test_a_producer_past_its_limit_is_closed_and_the_others_carry_on(
    start_broker: StartBroker, disk: Disk
) -> None:
    broker = await start_broker(
        max_pending_publishes_per_connection=100, max_pending_publishes_per_producer=5
    )
    await broker.segment()
    client = await broker.client()
    try:
        await client.open_producer(1, TOPIC, 0, name="greedy")
        await client.open_producer(2, TOPIC, 0, name="polite")
        disk.hold()
        greedy = [client.send_batch(1, sequence, batch(sequence)) for sequence in range(8)]
        polite = [client.send_batch(2, sequence, batch(sequence, "p")) for sequence in range(5)]
        # The polite producer's sends are read although the greedy one is past its limit.
        await eventually(lambda: broker.counters.in_flight == 13, "every send read")
        assert broker.counters.producers_over_limit_total == 1
        disk.release()
        polite_answers = [await receipt for receipt in polite]
        assert all(isinstance(answer, SendReceipt) for answer in polite_answers)
        answers = [await receipt for receipt in greedy]
        assert [type(a) for a in answers] == [SendReceipt] * 5 + [SendError] * 3
        refusal = answers[5]
        assert isinstance(refusal, SendError)
        assert refusal.code is ErrorCode.SERVICE_NOT_READY
        assert "greedy" in refusal.message and "limit of 5 sends in flight" in refusal.message
        closed = await client.next_event(ProducerClosed)
        assert (closed.producer_id, closed.code) == (1, ErrorCode.SERVICE_NOT_READY)
        # Its answers in the order of its sends, the refusal and ProducerClosed after them.
        own = [
            (type(a).__name__, getattr(a, "sequence_id", None))
            for a in client.producer_answers
            if a.producer_id == 1
        ]
        assert own[:6] == [("SendReceipt", s) for s in range(5)] + [("SendError", 5)]
        assert ("ProducerClosed", None) in own[6:]
        # Reopened, it resends what was refused: stored once each, after the rest, in order.
        await client.open_producer(1, TOPIC, 0, name="greedy")
        for sequence in range(5, 8):
            await client.send(1, sequence, *batch(sequence))
        await client.subscribe(1, TOPIC, 0, "sub", SegmentSubscriptionType.EXCLUSIVE)
        received = await client.receive_n(1, 13)
        greedy_payloads = [m.payload for m in received if m.payload.startswith(b"m")]
        assert greedy_payloads == [f"m{s}".encode() for s in range(8)]
    finally:
        await client.close()


async def test_refusals_count_as_in_flight_until_written(
    start_broker: StartBroker, disk: Disk
) -> None:
    broker = await start_broker(max_pending_publishes_per_connection=4)
    await broker.segment()
    client = await broker.client()
    try:
        # Refusals are in flight until they are written: an unknown producer's too.
        refused = [client.send_batch(9, sequence, batch(sequence)) for sequence in range(12)]
        answers = [await receipt for receipt in refused]
        assert {a.code for a in answers if isinstance(a, SendError)} == {ErrorCode.UNKNOWN_PRODUCER}
        assert len(answers) == 12
        assert broker.counters.most_in_flight <= 4
        await eventually(lambda: broker.counters.in_flight == 0, "every refusal answered")
    finally:
        await client.close()


async def test_sends_in_flight_when_the_connection_drops_stop_counting(
    start_broker: StartBroker, disk: Disk
) -> None:
    broker = await start_broker(max_pending_publishes_per_connection=8)
    await broker.segment()
    client = await broker.client()
    await client.open_producer(1, TOPIC, 0)
    disk.hold()
    for sequence in range(20):
        client.send_batch(1, sequence, batch(sequence))
    await eventually(lambda: broker.counters.in_flight == 8, "eight sends in flight")
    await client.drop()  # the broker abandons what it was answering
    disk.release()
    await eventually(lambda: broker.counters.in_flight == 0, "nothing counted in flight")
    assert broker.counters.in_flight_bytes == 0


async def test_the_broker_remembers_a_bounded_number_of_closed_producers(
    start_broker: StartBroker, disk: Disk
) -> None:
    """A client can have producers closed at will: the record of why, for their late sends,
    keeps the last 1,024 closures of the connection."""
    broker = await start_broker(
        max_pending_publishes_per_connection=10_000, max_pending_publishes_per_producer=1
    )
    await broker.segment()
    client = await broker.client()
    try:
        producers = range(1, 1026)
        for producer_id in producers:
            await client.open_producer(producer_id, TOPIC, 0, name=f"p{producer_id}")
        disk.hold()  # the first send of each stays in flight: the second is past the limit
        answers = [client.send_batch(p, s, batch(s)) for p in producers for s in (0, 1)]
        await eventually(
            lambda: broker.counters.producers_over_limit_total == len(producers),
            "every producer past its limit",
        )
        disk.release()
        for answer in answers:
            await answer
        await eventually(
            lambda: sum(isinstance(a, ProducerClosed) for a in client.producer_answers) == 1025,
            "every producer closed",
        )
        oldest = await client.send_batch(1, 2, batch(2))
        newest = await client.send_batch(1025, 2, batch(2))
        assert isinstance(oldest, SendError) and oldest.code is ErrorCode.UNKNOWN_PRODUCER
        assert isinstance(newest, SendError) and newest.code is ErrorCode.SERVICE_NOT_READY
    finally:
        await client.close()


async def test_acknowledgements_waiting_for_the_disk_stop_the_reading_at_their_limit(
    start_broker: StartBroker, disk: Disk
) -> None:
    """Each acknowledgement waits for its cursor's fsync; a client acknowledging in a loop
    while the disk is slow makes the broker hold at most the pending-request limit."""
    broker = await start_broker(max_pending_requests_per_connection=4)
    await broker.segment()
    client = await broker.client()
    try:
        await client.open_producer(1, TOPIC, 0)
        for sequence in range(20):
            await client.send(1, sequence, *batch(sequence))
        await client.subscribe(2, TOPIC, 0, "sub", SegmentSubscriptionType.SHARED)
        messages = await client.receive_n(2, 20)
        disk.hold()
        acks = [asyncio.ensure_future(client.ack(2, message.message_id)) for message in messages]
        await eventually(lambda: broker.counters.requests_pending == 4, "four acks pending")
        await eventually(
            lambda: broker.counters.request_read_pauses_total >= 1, "the connection unread"
        )
        assert not any(ack.done() for ack in acks)
        disk.release()
        await asyncio.gather(*acks)  # every one answered once the disk moves again
        await eventually(lambda: broker.counters.requests_pending == 0, "nothing pending")
    finally:
        disk.release()
        await client.close()
