"""Produce to segments and drain them over the wire protocol, for controller tests (with the
broker tests' wire client, which pytest's ``pythonpath`` makes importable)."""

from __future__ import annotations

from scalable_topics.admin.broker_admin import admin_base
from scalable_topics.protocol import BatchMessage, EndOfSegment, SegmentSubscriptionType
from support.wire_client import WireClient

__all__ = ["drain", "produce"]


async def produce(
    broker_url: str, namespace: str, topic: str, segment_id: int, payloads: list[bytes]
) -> None:
    """Send ``payloads`` as one batch each and wait for every receipt."""
    client = await WireClient.connect(admin_base(broker_url))
    try:
        await client.open_producer(1, f"{namespace}/{topic}", segment_id)
        for sequence, payload in enumerate(payloads):
            await client.send(1, sequence, BatchMessage(payload, "key"))
    finally:
        await client.close()


async def drain(
    broker_url: str,
    namespace: str,
    topic: str,
    segment_id: int,
    subscription: str,
    count: int,
    kind: SegmentSubscriptionType = SegmentSubscriptionType.EXCLUSIVE,
) -> list[bytes]:
    """Receive ``count`` messages of a sealed segment and acknowledge them all; returns once
    the broker said the segment ended for this subscription (everything acknowledged). An
    ordered ``kind`` receives nothing until the segment's parents are drained."""
    client = await WireClient.connect(admin_base(broker_url))
    try:
        await client.subscribe(1, f"{namespace}/{topic}", segment_id, subscription, kind)
        messages = await client.receive_n(1, count)
        if messages and kind is SegmentSubscriptionType.EXCLUSIVE:
            await client.ack(1, messages[-1].message_id, cumulative=True)
        elif messages:
            await client.ack(1, *(m.message_id for m in messages))
        await client.next_event(EndOfSegment)
        return [m.payload for m in messages]
    finally:
        await client.close()
