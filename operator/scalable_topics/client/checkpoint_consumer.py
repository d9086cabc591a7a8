"""A checkpoint consumer: segments assigned like a stream consumer's, but the application
owns the position.

``checkpoint()`` returns a :class:`Checkpoint` of what the application has received, and
acknowledges all of it on the brokers (so sealed parents drain and their children open).
``seek(checkpoint)`` moves every assigned segment back (or forward) to it: a segment the
checkpoint names to its recorded position, a segment made after it (id at or above its
watermark) to its beginning; a segment below the watermark that it does not name was fully
consumed and stays as it is.

The brokers record a sealed parent as drained once and never take it back, so after a seek
over a split they no longer hold the children back. Within this consumer, a child whose
parents were moved back by the seek is held until each of those parents has sent its
EndOfSegment again. Limitation: a parent assigned to another consumer cannot be waited for;
per-key order after a seek then holds only within each consumer's own segments.

A segment from which this consumer has received nothing since it subscribed is recorded at its
beginning (the wire protocol cannot ask for a cursor), so a seek may deliver such a segment's
older messages again: never fewer than were there.

A checkpoint consumer reads one topic: a checkpoint and a seek name that topic's segments, so
there is no namespace form (``subscribe_queue`` and ``subscribe_stream`` have one).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..protocol import MessageId
from .checkpoint import Checkpoint
from .errors import ClientError
from .ordered_consumer import OrderedTopicConsumer
from .receive_queue import QueuedMessage
from .segment_consumer import SegmentConsumer
from .topic_watcher import TopicWatcher

if TYPE_CHECKING:
    from .client import Client


class CheckpointConsumer(OrderedTopicConsumer):
    """Create with ``await client.subscribe_checkpoint(topic, subscription, consumer_name)``."""

    def __init__(
        self,
        client: Client,
        watcher: TopicWatcher,
        subscription: str,
        consumer_name: str,
        *,
        receive_queue_size: int,
    ) -> None:
        super().__init__(
            client, watcher, subscription, consumer_name, receive_queue_size=receive_queue_size
        )
        # Per segment read now: the next message to read, once known.
        self._next: dict[int, MessageId] = {}
        # Held child -> the parents moved back by the last seek that it waits for, each with
        # the parent's first generation after that seek (an EndOfSegment from an earlier
        # generation predates the seek).
        self._waiting_for: dict[int, dict[int, int]] = {}

    def _delivered(self, item: QueuedMessage) -> None:
        message_id = item.message.message_id
        self._next[message_id.segment_id] = message_id._replace(
            batch_index=message_id.batch_index + 1
        )

    def _released(self, segment_id: int) -> None:
        self._next.pop(segment_id, None)
        self._waiting_for.pop(segment_id, None)
        self._release_ready()

    async def checkpoint(self) -> Checkpoint:
        """Where this consumer stands; acknowledges on the brokers everything received."""
        layout = self._watcher.layout
        watermark = max([*layout.segments, *self._segments], default=-1) + 1
        positions: dict[int, MessageId] = {}
        for segment_id, segment in self._segments.items():
            position = self._next.get(segment_id)
            if position is None:
                if segment.ended:
                    continue  # fully consumed
                position = MessageId(segment_id, 0, 0)
            positions[segment_id] = position
        for segment_id, segment in list(self._segments.items()):
            position = self._next.get(segment_id)
            if position is not None and position.batch_index > 0:
                last = position._replace(batch_index=position.batch_index - 1)
                await segment.acknowledge_cumulative(last, durable=False)
        return Checkpoint(layout.epoch, watermark, positions)

    async def seek(self, checkpoint: Checkpoint) -> None:
        """Move every assigned segment to ``checkpoint``; queued messages are dropped."""
        targets: dict[int, MessageId] = {}
        for segment_id in self._segments:
            if segment_id in checkpoint.positions:
                targets[segment_id] = checkpoint.positions[segment_id]
            elif segment_id >= checkpoint.watermark:
                targets[segment_id] = MessageId(segment_id, 0, 0)
        layout = self._watcher.layout
        self._waiting_for = {}
        for segment_id in targets:
            node = layout.segments.get(segment_id)
            parents = [p for p in (node.parent_ids if node else ()) if p in targets]
            if parents:
                self._waiting_for[segment_id] = {
                    p: self._segments[p].generation + 1 for p in parents
                }
                self._segments[segment_id].hold()
        for segment_id, position in targets.items():
            segment = self._segments.get(segment_id)
            if segment is None:
                continue
            floor = (
                position._replace(batch_index=position.batch_index - 1)
                if position.batch_index > 0
                else None
            )
            await segment.seek(position._replace(batch_index=0), floor)
            self._next[segment_id] = position
        self._release_ready()

    def on_end_of_segment(self, consumer: SegmentConsumer) -> None:
        for waiting in self._waiting_for.values():
            since = waiting.get(consumer.segment_id)
            if since is not None and consumer.generation >= since:
                del waiting[consumer.segment_id]
        self._release_ready()

    def on_segment_gone(self, consumer: SegmentConsumer, error: ClientError | None) -> None:
        super().on_segment_gone(consumer, error)
        for waiting in self._waiting_for.values():
            waiting.pop(consumer.segment_id, None)
        self._release_ready()

    def _release_ready(self) -> None:
        for segment_id, waiting in list(self._waiting_for.items()):
            if not waiting:
                del self._waiting_for[segment_id]
                segment = self._segments.get(segment_id)
                if segment is not None:
                    segment.release()
