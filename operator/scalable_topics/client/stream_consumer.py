"""A stream consumer: the segments the topic's controller assigns to it, each read in order,
acknowledged cumulatively.

Consumers of a Stream subscription share the topic's segments, dealt out by the controller;
each key's messages arrive in order, across splits and merges, because a child segment is
dispatched only once its parents are drained. A message acknowledged (cumulatively) is never
delivered again; one delivered and not acknowledged is delivered again after a reconnect or
when its segment moves to another consumer.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping

from ..protocol import MessageId
from .consumer_message import ReceivedMessage, message_id_of
from .ordered_consumer import OrderedTopicConsumer


class StreamConsumer(OrderedTopicConsumer):
    """Create with ``await client.subscribe_stream(topic, subscription, consumer_name)``."""

    async def acknowledge_cumulative(
        self, message: ReceivedMessage | MessageId, *, durable: bool = False
    ) -> bool:
        """Acknowledge ``message`` and everything before it in its segment. With ``durable``,
        return once the broker has it on disk; otherwise the acknowledgement is sent and made
        durable at the latest when the consumer closes. False when the segment was moved to
        another consumer meanwhile (a rebalance): nothing was acknowledged, and the segment's
        new owner receives the message again."""
        message_id = message_id_of(message)
        segment = self._segments.get(message_id.segment_id)
        if segment is None:
            return False
        await segment.acknowledge_cumulative(message_id, durable=durable)
        return True

    async def flush_acknowledgements(self) -> dict[int, MessageId]:
        """Make the cumulative acknowledgements so far durable; returns the position vector
        now durable (a segment moved to another consumer meanwhile is left out: what its
        new owner receives again was not acknowledged)."""
        vector = self.positions()
        outcomes = await asyncio.gather(
            *(
                self._segments[segment_id].acknowledge_cumulative(floor, durable=True)
                for segment_id, floor in vector.items()
            ),
            return_exceptions=True,
        )
        return {
            segment_id: floor
            for (segment_id, floor), outcome in zip(vector.items(), outcomes, strict=True)
            if not isinstance(outcome, BaseException)
        }

    def positions(self) -> dict[int, MessageId]:
        """The position vector: per segment read now, the last message acknowledged."""
        return {
            segment_id: segment.floor
            for segment_id, segment in self._segments.items()
            if segment.floor is not None
        }

    async def acknowledge_cumulative_vector(
        self, vector: Mapping[int, MessageId], *, durable: bool = False
    ) -> None:
        """Acknowledge each segment of ``vector`` up to its message."""
        for message_id in vector.values():
            await self.acknowledge_cumulative(message_id, durable=durable)
