"""Messages on their way to a segment, and the batches they travel in.

A message keeps its future from ``send()`` to its receipt, across every batch it is put in:
when a segment is sealed under it, the same message (same future) is routed again, so the
application sees one answer whatever happened on the way.
"""

from __future__ import annotations

import asyncio
from collections import deque
from dataclasses import dataclass, field

from ..protocol import BatchMessage, MessageId

# What msgpack spends around one message of a Send frame (array and field headers), counted
# with each message so a batch never outgrows its frame.
MESSAGE_FRAME_OVERHEAD = 32


@dataclass(slots=True)
class OutgoingMessage:
    message: BatchMessage
    future: asyncio.Future[MessageId | None]
    size: int = field(init=False)

    def __post_init__(self) -> None:
        self.size = self.message.size_bytes + MESSAGE_FRAME_OVERHEAD

    @property
    def abandoned(self) -> bool:
        """The application stopped waiting (send timeout, cancelled): do not send it now."""
        return self.future.done()


@dataclass(slots=True)
class SentBatch:
    """A batch written to a segment: message ``i`` has sequence id ``sequence_id + i``."""

    sequence_id: int
    messages: list[OutgoingMessage]

    @property
    def last_sequence_id(self) -> int:
        return self.sequence_id + len(self.messages) - 1

    def settle(self, first_id: MessageId | None) -> None:
        for index, outgoing in enumerate(self.messages):
            if not outgoing.future.done():
                message_id = None if first_id is None else first_id._replace(batch_index=index)
                outgoing.future.set_result(message_id)

    def fail(self, error: BaseException) -> None:
        for outgoing in self.messages:
            if not outgoing.future.done():
                outgoing.future.set_exception(error)


def take_batch(
    queue: deque[OutgoingMessage], max_messages: int, max_bytes: int
) -> tuple[list[OutgoingMessage], int]:
    """The next batch off the front of ``queue`` and the bytes that left the queue: at most
    ``max_messages`` and ``max_bytes``, but always at least one message (a message alone
    always fits in its frame). Messages the application gave up on are dropped on the way."""
    batch: list[OutgoingMessage] = []
    size = dropped = 0
    while queue and len(batch) < max_messages:
        outgoing = queue[0]
        if outgoing.abandoned:
            dropped += queue.popleft().size
            continue
        if batch and size + outgoing.size > max_bytes:
            break
        batch.append(queue.popleft())
        size += outgoing.size
    return batch, size + dropped
