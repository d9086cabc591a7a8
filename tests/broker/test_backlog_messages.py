"""Backlogs count messages, not log entries: a producer batch is one entry of several
messages. The counts are kept from the lowest cursor on, found again from the log when a
segment reopens or a cursor goes back, and forgotten below every cursor."""

from __future__ import annotations

from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st
from test_broker_segment import RecordingGate, config

from scalable_topics.broker.batch_record import encode_batch
from scalable_topics.broker.message_counts import MessageCounts, batch_size
from scalable_topics.broker.segment import HostedSegment
from scalable_topics.broker.segment_meta import SegmentMeta
from scalable_topics.model.position import Position
from scalable_topics.model.resources import ProducerAccessMode
from scalable_topics.protocol import BatchMessage, InitialPosition, Send

BATCHES = [3, 1, 5, 2]  # messages per producer batch: 11 messages in 4 entries


async def publish_batches(
    segment: HostedSegment, sizes: list[int], first_sequence: int = 0
) -> None:
    if first_sequence == 0:  # the producer's first batch
        await segment.open_producer("p", "p", ProducerAccessMode.SHARED, None, None)  # type: ignore[arg-type]
    sequence = first_sequence
    for size in sizes:
        messages = tuple(BatchMessage(f"m{sequence + i}".encode(), "k") for i in range(size))
        await segment.publish("p", Send(1, sequence, messages))
        sequence += size


def backlogs(segment: HostedSegment) -> dict[str, tuple[int, int]]:
    """Each subscription's (backlog in messages, backlog in entries), as stats report them."""
    return {
        name: (entry["backlog"], entry["backlogEntries"])
        for name, entry in segment.stats()["subscriptions"].items()
    }


async def test_a_backlog_counts_the_messages_of_batched_entries(tmp_path: Path) -> None:
    meta = SegmentMeta("default", "orders", 0, 0, 0xFFFF)
    segment = await HostedSegment.create(
        tmp_path / "seg", meta, ["billing"], config(tmp_path), RecordingGate()
    )
    try:
        await publish_batches(segment, BATCHES)
        assert backlogs(segment) == {"billing": (11, 4)}
        cursor = segment.subscriptions["billing"].cursor
        cursor.ack(Position(2, 0), 5)  # one message of the 5-message batch
        cursor.ack(Position(1, 0), 1)  # the whole 1-message entry
        assert backlogs(segment) == {"billing": (9, 3)}
        cursor.ack_cumulative(Position(0, 2), 3)
        assert backlogs(segment) == {"billing": (6, 2)}

        # Created later at Earliest: it counts from the first entry, read again from the log.
        await segment.create_subscription("audit", InitialPosition.EARLIEST)
        await segment.create_subscription("late", InitialPosition.LATEST)
        assert backlogs(segment) == {"billing": (6, 2), "audit": (11, 4), "late": (0, 0)}
        await publish_batches(segment, [4], first_sequence=11)
        assert backlogs(segment) == {"billing": (10, 3), "audit": (15, 5), "late": (4, 1)}
    finally:
        await segment.close()


async def test_a_reopened_segment_counts_the_same_backlog(tmp_path: Path) -> None:
    meta = SegmentMeta("default", "orders", 0, 0, 0xFFFF)
    segment = await HostedSegment.create(
        tmp_path / "seg", meta, ["billing"], config(tmp_path), RecordingGate()
    )
    await publish_batches(segment, BATCHES)
    # Acknowledged and saved, as a consumer's acknowledgement is before its receipt.
    await segment.seek_by_timestamp("billing", 0)
    await segment.subscriptions["billing"].seek(1)
    await segment.close()
    reopened = await HostedSegment.open(tmp_path / "seg", config(tmp_path), RecordingGate())
    try:
        assert backlogs(reopened) == {"billing": (8, 3)}  # entries 1..3: 1 + 5 + 2 messages
    finally:
        await reopened.close()


async def test_a_seek_back_counts_from_where_it_goes(tmp_path: Path) -> None:
    meta = SegmentMeta("default", "orders", 0, 0, 0xFFFF)
    segment = await HostedSegment.create(
        tmp_path / "seg", meta, ["billing"], config(tmp_path), RecordingGate()
    )
    try:
        await publish_batches(segment, BATCHES)
        subscription = segment.subscriptions["billing"]
        await subscription.seek(4)  # everything acknowledged
        assert backlogs(segment) == {"billing": (0, 0)}
        await subscription.seek(2)
        assert backlogs(segment) == {"billing": (7, 2)}
    finally:
        await segment.close()


def test_a_batch_record_says_how_many_messages_it_holds() -> None:
    for size in (1, 2, 17, 300):
        record = encode_batch("producer", 5, [BatchMessage(b"x")] * size)
        assert batch_size(record) == size


@given(
    st.lists(st.integers(1, 50), min_size=1, max_size=200),
    st.integers(0, 199),
    st.data(),
)
def test_counts_agree_with_a_sum_whatever_was_forgotten_or_prepended(
    sizes: list[int], split: int, data: st.DataObject
) -> None:
    split = min(split, len(sizes) - 1)
    counts = MessageCounts(split)
    for entry in range(split, len(sizes)):
        counts.add(entry, sizes[entry])
    counts.prepend(sizes[:split])
    assert (counts.base, counts.end) == (0, len(sizes))
    floor = data.draw(st.integers(0, len(sizes)))
    counts.forget_before(floor)
    first = data.draw(st.integers(counts.base, len(sizes) - 1))
    last = data.draw(st.integers(first - 1, len(sizes) - 1))
    assert counts.messages(first, last) == sum(sizes[first : last + 1])
