"""A subscription's dispatch round while its consumers' sessions act between two deliveries of
the round: what a delivery still holds is sent, what was acknowledged or reset meanwhile is
not, and the round never fails."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import pytest
from test_broker_segment import RecordingGate, config

from scalable_topics.broker.dispatch import Consumer
from scalable_topics.broker.segment import HostedSegment
from scalable_topics.broker.segment_meta import SegmentMeta
from scalable_topics.broker.subscription import Subscription
from scalable_topics.model.position import Position
from scalable_topics.model.resources import ProducerAccessMode
from scalable_topics.protocol import (
    BatchMessage,
    DeliveredMessage,
    ErrorCode,
    MessageId,
    SegmentSubscriptionType,
    Send,
)

FIRST, SECOND = 1, 2  # consumers, in the order they take turns


class RecordingLink:
    """A consumer's session: records what it receives; ``during`` runs inside its first
    delivery, as the session's read loop serves other frames while the delivery is written."""

    def __init__(self, during: Callable[[], Awaitable[None]] | None = None) -> None:
        self.received: list[MessageId] = []
        self.arrived = asyncio.Event()
        self._during = during

    async def deliver(self, messages: list[DeliveredMessage]) -> None:
        during, self._during = self._during, None
        if during is not None:
            await during()
        self.received.extend(m.message_id for m in messages)
        self.arrived.set()

    async def end_of_segment(self) -> None:
        pass

    async def closed_by_broker(self, code: ErrorCode, message: str) -> None:
        pass


@pytest.fixture
async def segment(tmp_path: Path) -> AsyncIterator[HostedSegment]:
    meta = SegmentMeta("default", "orders", 0, 0, 0xFFFF)
    hosted = await HostedSegment.create(
        tmp_path / "seg", meta, ["s"], config(tmp_path), RecordingGate()
    )
    await hosted.open_producer("p", "p", ProducerAccessMode.SHARED, None, None)  # type: ignore[arg-type]
    try:
        yield hosted
    finally:
        await hosted.close()


async def publish(segment: HostedSegment, sequence: int) -> None:
    await segment.publish("p", Send(1, sequence, (BatchMessage(f"m{sequence}".encode()),)))


def attach(subscription: Subscription, consumer_id: int, link: RecordingLink) -> None:
    subscription.add_consumer(
        Consumer(consumer_id, f"c{consumer_id}", 0), SegmentSubscriptionType.SHARED, link, 1
    )


@pytest.mark.parametrize("meanwhile", ["ack elsewhere", "seek"])
async def test_a_round_survives_what_sessions_do_between_its_deliveries(
    segment: HostedSegment, caplog: pytest.LogCaptureFixture, meanwhile: str
) -> None:
    """Found by the wire fuzzer: the round took deliveries for two consumers, and while the
    first was being written the second consumer's message was acknowledged (by a client
    that acks what its old session received) or the subscription was reset by a seek; the
    round then failed looking up that message ("dispatch round failed", KeyError)."""
    subscription = segment.subscriptions["s"]

    async def act() -> None:
        if meanwhile == "ack elsewhere":
            await subscription.ack(FIRST, [Position(1, 0)], cumulative=False)
        else:
            await subscription.seek(0)

    await publish(segment, 0)  # entry 0, for the first consumer
    await publish(segment, 1)  # entry 1, for the second
    first, second = RecordingLink(during=act), RecordingLink()
    # Both attached before the pump runs: one round reads both entries, delivers to both.
    attach(subscription, FIRST, first)
    attach(subscription, SECOND, second)
    await first.arrived.wait()
    # Whatever the second consumer gets next comes after that round.
    subscription.add_permits(SECOND, 1)
    await publish(segment, 2)
    await second.arrived.wait()

    failures = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert failures == []
    if meanwhile == "ack elsewhere":
        # Entry 1 was acknowledged before it went out: it never does.
        assert second.received == [MessageId(0, 2, 0)]
    else:
        # The seek reset the subscription: the old round's delivery is dropped, and the
        # second consumer reads from entry 0 again.
        assert second.received == [MessageId(0, 0, 0)]
