"""The producer's window of batches in flight against the broker's per-producer limit.

A broker closes a producer that sends past --max-pending-publishes-per-producer; the client's
``max_pending_batches`` keeps it at or under that. The broker's own counters (broker/inflight.py)
say whether the limit was ever hit; the disk is held still where the test needs sends to stay
in flight (see tests/broker/test_broker_inflight.py).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from scalable_topics.broker.admin import REGISTRY_KEY
from scalable_topics.broker.inflight import PublishCounters
from scalable_topics.broker.metrics import PUBLISH_COUNTERS_KEY
from scalable_topics.broker.storage import durable_fs
from scalable_topics.client import Client
from scalable_topics.protocol import SegmentSubscriptionType
from support.eventually import eventually
from support.inprocess_service import Service, running_service
from support.wire_client import WireClient

pytestmark = pytest.mark.slow

TOPIC = "default/orders"
BROKER_LIMIT = 8


@pytest.fixture
def disk(monkeypatch: pytest.MonkeyPatch) -> Iterator[threading.Event]:
    """Set while the disk may work: the log's fsync waits while it is clear."""
    free = threading.Event()
    free.set()
    real = durable_fs.flush_to_disk

    def flush(fd: int) -> None:
        free.wait()
        real(fd)

    monkeypatch.setattr(durable_fs, "flush_to_disk", flush)
    try:
        yield free
    finally:
        free.set()


def counters(service: Service) -> PublishCounters:
    return service.brokers[0].app[PUBLISH_COUNTERS_KEY]


async def stored_payloads(service: Service) -> list[bytes]:
    """The segment's messages in log order, through an Exclusive subscription of its own."""
    (segment,) = service.brokers[0].app[REGISTRY_KEY]
    stored = segment.last_entry_id + 1  # one message per batch, so per entry
    client = await WireClient.connect(service.url)
    try:
        await client.subscribe(
            1, TOPIC, 0, "check", SegmentSubscriptionType.EXCLUSIVE, permits=stored
        )
        return [message.payload for message in await client.receive_n(1, stored)]
    finally:
        await client.close()


async def test_a_producer_at_full_speed_never_passes_the_brokers_limit(
    tmp_path: Path, disk: threading.Event
) -> None:
    async with running_service(
        tmp_path, brokers=1, max_pending_publishes_per_producer=BROKER_LIMIT
    ) as service:
        await service.create_topic("orders", initial=1)
        async with Client(service.url) as client:
            # One message per batch, so the window of batches is what holds the producer back.
            producer = await client.create_producer(
                TOPIC, batching_max_messages=1, max_pending_batches=BROKER_LIMIT
            )
            disk.clear()
            try:
                sent = [await producer.send_async(f"m{n}".encode()) for n in range(2000)]
                # With nothing answered, the producer sent exactly its window and waits.
                await eventually(
                    lambda: counters(service).in_flight == BROKER_LIMIT, "a full window", timeout=10
                )
            finally:
                disk.set()  # the service cannot stop while its disk is held
            await producer.flush()
            assert all(future.result() is not None for future in sent)
            await producer.close()
        assert counters(service).producers_over_limit_total == 0
        assert counters(service).most_in_flight == BROKER_LIMIT
        assert await stored_payloads(service) == [f"m{n}".encode() for n in range(2000)]


async def test_a_window_past_the_brokers_limit_still_stores_each_message_once_in_order(
    tmp_path: Path,
) -> None:
    async with running_service(
        tmp_path, brokers=1, max_pending_publishes_per_producer=BROKER_LIMIT
    ) as service:
        await service.create_topic("orders", initial=1)
        async with Client(service.url) as client:
            producer = await client.create_producer(
                TOPIC, batching_max_messages=1, max_pending_batches=64
            )
            sent = [await producer.send_async(f"m{n}".encode()) for n in range(600)]
            await producer.flush()
            assert all(future.result() is not None for future in sent)
            await producer.close()
        # The broker closed the producer whenever it went past the limit; it reopened and
        # resent, and deduplication kept one copy of each message, in order.
        assert counters(service).producers_over_limit_total >= 1
        assert await stored_payloads(service) == [f"m{n}".encode() for n in range(600)]
