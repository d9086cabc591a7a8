"""A hosted segment in-process: retention, reopening, and the drained report."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

import pytest

from scalable_topics.broker.config import BrokerConfig
from scalable_topics.broker.dispatch import Consumer
from scalable_topics.broker.segment import HostedSegment, SegmentError
from scalable_topics.broker.segment_meta import SegmentMeta
from scalable_topics.model.position import Position
from scalable_topics.model.resources import ProducerAccessMode
from scalable_topics.protocol import (
    BatchMessage,
    DeliveredMessage,
    ErrorCode,
    InitialPosition,
    SegmentSubscriptionType,
    Send,
)


class RecordingGate:
    def __init__(self) -> None:
        self.drained: list[tuple[str, str]] = []

    def parents_drained(
        self, namespace: str, topic: str, parents: tuple[int, ...], subscription: str
    ) -> bool:
        return True

    def mark_drained(self, namespace: str, topic: str, descriptor: str, subscription: str) -> None:
        self.drained.append((descriptor, subscription))

    def listen(
        self, namespace: str, topic: str, parents: tuple[int, ...], callback: Callable[[], None]
    ) -> Callable[[], None]:
        return lambda: None


def config(tmp_path: Path) -> BrokerConfig:
    return BrokerConfig(data_dir=tmp_path, store_url="embedded:unused.db", log_file_bytes=4096)


async def fill(segment: HostedSegment, batches: int) -> None:
    await segment.open_producer("p", "p", ProducerAccessMode.SHARED, None, None)  # type: ignore[arg-type]
    for sequence in range(batches):
        await segment.publish("p", Send(1, sequence, (BatchMessage(b"r" * 500, "k"),)))


async def test_retention_drops_only_consumed_files_past_the_limit(tmp_path: Path) -> None:
    meta = SegmentMeta("default", "orders", 0, 0, 0xFFFF, retention_max_size_bytes=8192)
    segment = await HostedSegment.create(
        tmp_path / "seg", meta, ["slow", "fast"], config(tmp_path), RecordingGate()
    )
    try:
        await fill(segment, 60)
        assert segment.stats()["sizeBytes"] > 8192
        assert await segment.apply_retention() == 0  # nothing consumed by every subscription
        fast = segment.subscriptions["fast"]
        slow = segment.subscriptions["slow"]
        fast.cursor.ack_cumulative(Position(59), 1)
        slow.cursor.ack_cumulative(Position(29), 1)
        dropped = await segment.apply_retention()
        assert 0 < dropped <= 30  # only files "slow" has consumed
        first = segment.stats()["firstEntryId"]
        assert first == dropped
        assert first <= 30  # everything "slow" has not acknowledged is still there
    finally:
        await segment.close()


async def test_reopened_segment_keeps_epoch_subscriptions_and_dedup(tmp_path: Path) -> None:
    meta = SegmentMeta("default", "orders", 3, 0, 0x7FFF)
    segment = await HostedSegment.create(
        tmp_path / "seg", meta, ["sub"], config(tmp_path), RecordingGate()
    )
    await segment.open_producer("x", "writer", ProducerAccessMode.EXCLUSIVE, None, None)  # type: ignore[arg-type]
    first, duplicate = await segment.publish("x", Send(1, 0, (BatchMessage(b"a"),)))
    assert not duplicate
    await segment.close()
    reopened = await HostedSegment.open(tmp_path / "seg", config(tmp_path), RecordingGate())
    try:
        assert reopened.producer_epoch == 1
        assert set(reopened.subscriptions) == {"sub"}
        await reopened.create_subscription("late", InitialPosition.LATEST)
        await reopened.open_producer("y", "writer", ProducerAccessMode.EXCLUSIVE, 1, None)  # type: ignore[arg-type]
        again, duplicate = await reopened.publish("y", Send(1, 0, (BatchMessage(b"a"),)))
        assert duplicate
        assert again == first
        assert reopened.highest_sequence_id("writer") == 0
    finally:
        await reopened.close()


async def test_a_reservation_survives_a_restart_until_released(tmp_path: Path) -> None:
    meta = SegmentMeta("default", "orders", 3, 0, 0x7FFF)
    segment = await HostedSegment.create(
        tmp_path / "seg", meta, [], config(tmp_path), RecordingGate()
    )
    assert await segment.fence(2, "amy") == 2
    await segment.close()
    reopened = await HostedSegment.open(tmp_path / "seg", config(tmp_path), RecordingGate())
    try:
        assert (reopened.producer_epoch, reopened.reserved_for) == (2, "amy")
        with pytest.raises(SegmentError, match="held exclusively by 'amy'") as refused:
            await reopened.open_producer("s", "bob", ProducerAccessMode.SHARED, None, None)  # type: ignore[arg-type]
        assert refused.value.code is ErrorCode.PRODUCER_BUSY
        await reopened.fence(2, None)
    finally:
        await reopened.close()
    released = await HostedSegment.open(tmp_path / "seg", config(tmp_path), RecordingGate())
    try:
        assert (released.producer_epoch, released.reserved_for) == (2, None)
        await released.open_producer("s", "bob", ProducerAccessMode.SHARED, None, None)  # type: ignore[arg-type]
    finally:
        await released.close()


class UnsubscribingLink:
    """A consumer whose session, told its consumer was closed, goes on to serve an
    Unsubscribe of another subscription of the segment (as a session's read loop does while
    the ConsumerClosed frame is being sent)."""

    def __init__(self, segment: HostedSegment, other: str) -> None:
        self.segment = segment
        self.other = other
        self.closed: list[ErrorCode] = []

    async def deliver(self, messages: list[DeliveredMessage]) -> None:
        pass

    async def end_of_segment(self) -> None:
        pass

    async def closed_by_broker(self, code: ErrorCode, message: str) -> None:
        self.closed.append(code)
        assert await self.segment.delete_subscription(self.other)


async def test_deleting_a_segment_while_a_subscription_goes_deletes_it_whole(
    tmp_path: Path,
) -> None:
    """Found by the wire fuzzer: the controller deleted a drained segment while a client
    unsubscribed from it, and the deletion failed halfway (its storage left on disk)."""
    meta = SegmentMeta("default", "orders", 0, 0, 0xFFFF)
    segment = await HostedSegment.create(
        tmp_path / "seg", meta, ["first", "second"], config(tmp_path), RecordingGate()
    )
    link = UnsubscribingLink(segment, "second")
    segment.subscriptions["first"].add_consumer(
        Consumer(1, "consumer", 0), SegmentSubscriptionType.SHARED, link
    )
    await segment.delete()
    assert link.closed == [ErrorCode.SEGMENT_NOT_FOUND]
    assert not (tmp_path / "seg").exists()


class ProducerLink:
    """A producer's session that, told its producer was closed, passes it on once
    ``passed_on`` is set (at once unless ``slow``)."""

    def __init__(self, slow: bool = False) -> None:
        self.told = asyncio.Event()
        self.passed_on = asyncio.Event()
        if not slow:
            self.passed_on.set()

    async def closed_by_broker(self, code: ErrorCode, message: str) -> None:
        self.told.set()
        await self.passed_on.wait()


async def test_a_producer_whose_open_is_cancelled_holds_nothing(tmp_path: Path) -> None:
    """Found by the wire fuzzer: a connection that closed while its ExclusiveWithFencing
    producer was being admitted (the open task cancelled while the fenced producer was told)
    left that producer holding the segment, and every later producer was refused."""
    meta = SegmentMeta("default", "orders", 0, 0, 0xFFFF)
    segment = await HostedSegment.create(
        tmp_path / "seg", meta, [], config(tmp_path), RecordingGate()
    )
    try:
        slow = ProducerLink(slow=True)
        await segment.open_producer("a", "first", ProducerAccessMode.SHARED, None, slow)
        opening = asyncio.create_task(
            segment.open_producer(
                "b", "taker", ProducerAccessMode.EXCLUSIVE_WITH_FENCING, None, ProducerLink()
            )
        )
        await slow.told.wait()  # the open is under way: "first" is being fenced
        opening.cancel()
        with pytest.raises(asyncio.CancelledError):
            await opening
        assert segment.producer_names() == []
        grant = await segment.open_producer(
            "c", "later", ProducerAccessMode.SHARED, None, ProducerLink()
        )
        assert grant.name == "later"
    finally:
        slow.passed_on.set()
        await segment.close()
