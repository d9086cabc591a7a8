"""What a delivered, unacknowledged message costs the broker in memory (tracemalloc): a small
record, never its payload. With 1 KiB payloads a kept payload alone would be 1,000 bytes per
message; the record is about 85 (two ints and a dict entry), 120 with a key hash."""

from __future__ import annotations

import asyncio
import gc
import tracemalloc
from collections.abc import Callable
from pathlib import Path

import pytest

from scalable_topics.broker.config import BrokerConfig
from scalable_topics.broker.dispatch import Consumer
from scalable_topics.broker.segment import HostedSegment
from scalable_topics.broker.segment_meta import SegmentMeta
from scalable_topics.model.resources import ProducerAccessMode
from scalable_topics.protocol import (
    BatchMessage,
    DeliveredMessage,
    ErrorCode,
    SegmentSubscriptionType,
    Send,
)

MESSAGES = 20_000
PAYLOAD = b"x" * 1024
BUDGET_BYTES = 160  # per message held


class OpenGate:
    def parents_drained(self, *_: object) -> bool:
        return True

    def mark_drained(self, *_: object) -> None:
        pass

    def listen(self, *_: object) -> Callable[[], None]:
        return lambda: None


class Counting:
    """A consumer's session that takes every message and acknowledges none."""

    def __init__(self, expected: int) -> None:
        self.received = 0
        self.expected = expected
        self.all_in = asyncio.Event()

    async def deliver(self, messages: list[DeliveredMessage]) -> None:
        self.received += len(messages)
        if self.received >= self.expected:
            self.all_in.set()

    async def end_of_segment(self) -> None:
        pass

    async def closed_by_broker(self, code: ErrorCode, message: str) -> None:
        pass


@pytest.mark.parametrize(
    "kind", [SegmentSubscriptionType.EXCLUSIVE, SegmentSubscriptionType.KEY_SHARED]
)
async def test_an_unacknowledged_message_costs_a_small_record_not_its_payload(
    tmp_path: Path, kind: SegmentSubscriptionType
) -> None:
    config = BrokerConfig(
        data_dir=tmp_path,
        store_url="embedded:unused.db",
        sync="none",
        max_unacked_messages_per_consumer=0,
        max_unacked_messages_per_subscription=0,
    )
    meta = SegmentMeta("default", "orders", 0, 0, 0xFFFF)
    segment = await HostedSegment.create(tmp_path / "seg", meta, ["sub"], config, OpenGate())
    try:
        await segment.open_producer("p", "p", ProducerAccessMode.SHARED, None, None)  # type: ignore[arg-type]
        for first in range(0, MESSAGES, 100):
            batch = tuple(
                BatchMessage(PAYLOAD, f"key-{n % 500}") for n in range(first, first + 100)
            )
            await segment.publish("p", Send(1, first, batch))
        subscription = segment.subscription("sub")
        link = Counting(MESSAGES)
        gc.collect()
        tracemalloc.start()
        try:
            before = tracemalloc.get_traced_memory()[0]
            subscription.add_consumer(Consumer(1, "one"), kind, link, MESSAGES)
            async with asyncio.timeout(60):
                await link.all_in.wait()
            gc.collect()
            held = tracemalloc.get_traced_memory()[0] - before
        finally:
            tracemalloc.stop()
        assert link.received == MESSAGES
        print(f"{kind.value}: {held / MESSAGES:.0f} bytes per unacknowledged message")
        assert held / MESSAGES < BUDGET_BYTES, f"{held / MESSAGES:.0f} bytes per message held"
    finally:
        await segment.close()
