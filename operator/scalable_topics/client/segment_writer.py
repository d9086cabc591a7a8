"""The part of a producer that writes to one segment.

One task per segment sends the segment's queue in batches, in order, and survives broker
failures: after a drop it opens the producer again under the same name and resends every
batch still unanswered with the same sequence ids, so the broker's deduplication drops what
was already stored. When the segment is sealed by a split or merge the writer stops sending,
waits until every batch it sent has its answer, and hands what was not stored back to the
producer, which routes it to the segment's successors.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import deque
from dataclasses import dataclass
from typing import Protocol

from ..model.hash_range import HashRange
from ..protocol import (
    Command,
    ErrorCode,
    ProducerClose,
    ProducerClosed,
    ProducerOpen,
    ProducerOpened,
    Send,
    SendError,
    SendReceipt,
)
from ..tasks import cancel_and_wait
from .backoff import Backoff
from .connection import BrokerConnection, Channel
from .errors import ClientError, ConnectionFailed, Timeout, error_for
from .outgoing import OutgoingMessage, SentBatch, take_batch
from .pool import ConnectionPool

log = logging.getLogger(__name__)

# Answers that mean "this segment takes no more writes": route to its successors. Not
# SegmentNotFound: a broker may not have opened a segment placed on it yet, or the segment
# moved; only the layout says a segment is gone (owner.broker_url raises SegmentGone).
_SEALED_CODES = frozenset({ErrorCode.SEGMENT_TERMINATED})
# Refusals no retry overcomes: the producer fails with them.
_FATAL_CODES = frozenset(
    {
        ErrorCode.PRODUCER_FENCED,
        ErrorCode.PRODUCER_BUSY,
        ErrorCode.TOPIC_NOT_FOUND,
        ErrorCode.NOT_AUTHORIZED,
        ErrorCode.AUTHENTICATION_FAILED,
        ErrorCode.INVALID_REQUEST,
        ErrorCode.TOO_MANY_OPEN,
    }
)


@dataclass(frozen=True)
class Batching:
    max_messages: int = 1000
    max_bytes: int = 128 * 1024
    max_delay: float = 0.001  # seconds a batch may wait for more messages


# Batches a writer keeps unanswered at most: a broker refuses a send past its
# --max-pending-publishes-per-producer (500 by default) and closes the producer, so a writer
# that stays at or under it never sees that refusal.
DEFAULT_MAX_PENDING_BATCHES = 500


class SegmentGone(Exception):
    """The layout no longer lists the segment."""


class WriterOwner(Protocol):
    """What a writer needs of its producer."""

    topic: str
    pool: ConnectionPool
    batching: Batching
    max_pending_batches: int
    """Batches sent and not answered yet, at most, per segment."""

    async def broker_url(self, segment_id: int) -> str:
        """Where the segment is served (Active or sealed), once it is placed; SegmentGone
        once the layout no longer lists it (pruned)."""

    def open_request(self, producer_id: int, segment_id: int) -> ProducerOpen: ...

    def opened(self, reply: ProducerOpened, max_message_bytes: int) -> None: ...

    def next_sequence_ids(self, count: int) -> int:
        """The first of ``count`` fresh sequence ids, above every id used so far."""

    def writer_sealed(self, writer: SegmentWriter) -> None: ...

    def writer_failed(self, writer: SegmentWriter, error: ClientError) -> None:
        """The writer cannot go on (fenced, topic deleted): the producer is done."""


class SegmentWriter:
    def __init__(
        self, owner: WriterOwner, segment_id: int, hash_range: HashRange, *, held: bool
    ) -> None:
        self.owner = owner
        self.segment_id = segment_id
        self.hash_range = hash_range
        self._held = held
        self._queue: deque[OutgoingMessage] = deque()
        self._queued_bytes = 0
        self._oldest_at = 0.0
        self._in_flight: dict[int, SentBatch] = {}  # by first sequence id, in send order
        self._not_stored: list[SentBatch] = []  # refused because the segment was sealed
        self._sealed = False
        self._flushing = False
        self._connection: BrokerConnection | None = None
        self._producer_id = 0
        self._wake = asyncio.Event()
        # Settled by the first open (or by the segment turning out sealed); fails when the
        # brokers refuse this producer for good.
        self.opened: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.opened.add_done_callback(lambda done: done.cancelled() or done.exception())
        self._task = asyncio.get_running_loop().create_task(
            self._run(), name=f"write {owner.topic} segment {segment_id}"
        )

    # -- what the producer does -----------------------------------------------------------------

    def append(self, outgoing: OutgoingMessage) -> None:
        if not self._queue:
            self._oldest_at = asyncio.get_running_loop().time()
        self._queue.append(outgoing)
        self._queued_bytes += outgoing.size
        if (
            len(self._queue) >= self.owner.batching.max_messages
            or self._queued_bytes >= self.owner.batching.max_bytes
            or len(self._queue) == 1
        ):
            self._wake.set()

    def prepend(self, messages: list[OutgoingMessage]) -> None:
        """Messages that a sealed predecessor did not store: they go before everything queued
        here, in their original order."""
        self._queue.extendleft(reversed(messages))
        self._queued_bytes += sum(outgoing.size for outgoing in messages)
        self._oldest_at = asyncio.get_running_loop().time()
        self._wake.set()

    def release(self) -> None:
        """No sealed predecessor is left unresolved: start writing."""
        self._held = False
        self._wake.set()

    def flush(self) -> None:
        """Send what is queued without waiting for fuller batches."""
        self._flushing = True
        self._wake.set()

    def seal(self) -> None:
        """The segment takes no more writes (a split or merge sealed it)."""
        self._sealed = True
        if not self.opened.done():
            self.opened.set_result(None)
        self._wake.set()

    @property
    def sealed(self) -> bool:
        return self._sealed

    def unstored(self) -> list[OutgoingMessage]:
        """After ``writer_sealed``: every message not stored here, in the order sent."""
        batches = sorted(self._not_stored, key=lambda batch: batch.sequence_id)
        messages = [outgoing for batch in batches for outgoing in batch.messages]
        messages.extend(self._queue)
        self._not_stored.clear()
        self._queue.clear()
        self._queued_bytes = 0
        return [outgoing for outgoing in messages if not outgoing.abandoned]

    async def close(self) -> None:
        await cancel_and_wait(self._task)
        connection = self._connection
        if connection is not None and connection.is_open:
            connection.detach(Channel.PRODUCER, self._producer_id)
            with contextlib.suppress(ClientError):
                await connection.request(ProducerClose(0, self._producer_id), wait_seconds=5)
        self._connection = None

    def holds(self, outgoing: OutgoingMessage) -> bool:
        """Whether ``outgoing`` waits here: queued, on its way, or refused by a sealed
        segment and not routed yet."""
        batches = [*self._in_flight.values(), *self._not_stored]
        return any(o is outgoing for batch in batches for o in batch.messages) or any(
            o is outgoing for o in self._queue
        )

    def fail_pending(self, *, sent: ClientError, queued: ClientError) -> None:
        """Fail every message not answered yet: ``sent`` for batches already written,
        ``queued`` for the rest, which are dropped unsent. Batches written stay in flight,
        to be sent again under their sequence ids after a drop, so the broker keeps one copy
        of any it stored and none is stored out of order."""
        for batch in [*self._in_flight.values(), *self._not_stored]:
            batch.fail(sent)
        for outgoing in self._queue:
            if not outgoing.future.done():
                outgoing.future.set_exception(queued)
        self._queue.clear()
        self._queued_bytes = 0
        self._flushing = False

    def fail_all(self, error: ClientError) -> None:
        for batch in [*self._in_flight.values(), *self._not_stored]:
            batch.fail(error)
        for outgoing in self._queue:
            if not outgoing.future.done():
                outgoing.future.set_exception(error)
        self._in_flight.clear()
        self._not_stored.clear()
        self._queue.clear()
        self._queued_bytes = 0

    # -- the writing task -----------------------------------------------------------------------

    async def _run(self) -> None:
        backoff = Backoff()
        while True:
            self._wake.clear()
            if self._sealed and not self._in_flight:
                self.owner.writer_sealed(self)
                return
            if self._connection is None:
                # Sealed or not, unanswered batches are resent: a sealed segment answers the
                # ones it stored with their receipts and refuses the rest, so each batch goes
                # to the successors only if it was not stored here.
                if not await self._open(backoff):
                    continue
                for batch in list(self._in_flight.values()):
                    await self._send(batch)
                continue
            if (
                not self._sealed
                and self._queue
                and not self._held
                and len(self._in_flight) < self.owner.max_pending_batches
            ):
                if await self._linger():
                    await self._send_next_batch()
                continue
            await self._wake.wait()

    async def _linger(self) -> bool:
        """Wait until the batch is full, its time is up or a flush asks for it; False when
        something else needs the task first."""
        batching = self.owner.batching
        if self._flushing or batching.max_delay <= 0:
            return True
        loop = asyncio.get_running_loop()
        while len(self._queue) < batching.max_messages and self._queued_bytes < batching.max_bytes:
            remaining = self._oldest_at + batching.max_delay - loop.time()
            if remaining <= 0 or self._flushing:
                return True
            self._wake.clear()
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(remaining):
                    await self._wake.wait()
            if self._sealed or self._connection is None:
                return False
        return True

    async def _send_next_batch(self) -> None:
        connection = self._connection
        assert connection is not None
        batching = self.owner.batching
        max_bytes = min(batching.max_bytes, connection.max_frame_bytes // 2)
        messages, taken_bytes = take_batch(self._queue, batching.max_messages, max_bytes)
        self._queued_bytes -= taken_bytes
        if not self._queue:
            self._flushing = False
        else:
            self._oldest_at = asyncio.get_running_loop().time()
        if not messages:
            return
        batch = SentBatch(self.owner.next_sequence_ids(len(messages)), messages)
        self._in_flight[batch.sequence_id] = batch
        await self._send(batch)

    async def _send(self, batch: SentBatch) -> None:
        connection = self._connection
        if connection is None:
            return  # resent after the next open
        command = Send(
            self._producer_id,
            batch.sequence_id,
            tuple(outgoing.message for outgoing in batch.messages),
        )
        with contextlib.suppress(ConnectionFailed):
            await connection.send(command)  # a drop is handled by on_connection_lost

    async def _open(self, backoff: Backoff) -> bool:
        try:
            url = await self.owner.broker_url(self.segment_id)
            connection = await self.owner.pool.get(url)
        except SegmentGone:
            self._seal_unanswered()
            return False
        except (ConnectionFailed, Timeout) as error:
            log.debug("segment %d: %s", self.segment_id, error)
            await self._pause(backoff)
            return False
        except ClientError as error:  # the watch ended: the topic was deleted
            self._failed(error)
            await self._pause(backoff)
            return False
        producer_id = connection.new_id(Channel.PRODUCER)
        connection.attach(Channel.PRODUCER, producer_id, self)
        try:
            reply = await connection.request(
                self.owner.open_request(producer_id, self.segment_id),
                undo=ProducerClose(0, producer_id),
            )
        except asyncio.CancelledError:
            connection.detach(Channel.PRODUCER, producer_id)
            raise
        except ClientError as error:
            connection.detach(Channel.PRODUCER, producer_id)
            self._refused(error)
            if not self._sealed:
                await self._pause(backoff)
            return False
        assert isinstance(reply, ProducerOpened)
        self.owner.opened(reply, connection.max_message_bytes)
        if not self.opened.done():
            self.opened.set_result(None)
        self._connection, self._producer_id = connection, producer_id
        backoff.reset()
        return True

    async def _pause(self, backoff: Backoff) -> None:
        """Wait before the next attempt; an unsealed writer stops waiting when it is sealed
        (then it only needs the answers to what it sent, if anything)."""
        delay = backoff.next_delay()
        if self._sealed:
            await asyncio.sleep(delay)
            return
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(delay):
                await self._sealed_event()

    async def _sealed_event(self) -> None:
        while not self._sealed:
            self._wake.clear()
            await self._wake.wait()

    def _refused(self, error: ClientError) -> None:
        if error.code in _SEALED_CODES:
            self._seal_unanswered()
        elif error.code in _FATAL_CODES:
            self._failed(error)
        else:  # a broker restarting or moving the segment: try again
            log.debug("segment %d refused the producer: %s", self.segment_id, error)

    def _failed(self, error: ClientError) -> None:
        if not self.opened.done():
            self.opened.set_exception(error)
        self.owner.writer_failed(self, error)

    def _seal_unanswered(self) -> None:
        """The segment is gone (pruned, or deleted) while batches were unanswered: nothing
        says any more whether they were stored, so they go to the successors; a batch stored
        both here and there is the one duplicate a producer can make. (Pruning needs every
        subscription to have drained the segment, so this takes a producer unanswered for
        that long.)"""
        if self._in_flight:
            log.info(
                "segment %d is gone with %d batches unanswered: they go to its successors, "
                "and any of them it had stored is written twice",
                self.segment_id,
                len(self._in_flight),
            )
        self._not_stored.extend(self._in_flight.values())
        self._in_flight.clear()
        self.seal()

    # -- pushes (on the connection's reader task) -----------------------------------------------

    def on_push(self, command: Command) -> None:
        match command:
            case SendReceipt():
                batch = self._in_flight.pop(command.sequence_id, None)
                if batch is not None:
                    batch.settle(command.message_id)
                    if (self._sealed and not self._in_flight) or len(
                        self._in_flight
                    ) == self.owner.max_pending_batches - 1:
                        self._wake.set()  # done, or room for the next batch
            case SendError():
                self._send_refused(command)
            case ProducerClosed():
                self._closed_by_broker(command)

    def _send_refused(self, refusal: SendError) -> None:
        batch = self._in_flight.pop(refusal.sequence_id, None)
        if batch is None:
            return
        error = error_for(refusal.code, refusal.message)
        if refusal.code in _SEALED_CODES:
            self._not_stored.append(batch)
            self.seal()
        elif refusal.code is ErrorCode.MESSAGE_TOO_LARGE:
            batch.fail(error)
        elif refusal.code is ErrorCode.PRODUCER_FENCED:
            batch.fail(error)
            self.owner.writer_failed(self, error)
        else:  # the broker failed to store it: reopen and resend, in order
            self._in_flight[batch.sequence_id] = batch
            self._in_flight = dict(sorted(self._in_flight.items()))
            self._restart()

    def _closed_by_broker(self, closed: ProducerClosed) -> None:
        error = error_for(closed.code, closed.message)
        if closed.code is ErrorCode.SEGMENT_NOT_FOUND:
            self._detach_producer()  # gone from the broker: open again, where the layout says
        elif closed.code is ErrorCode.SEGMENT_TERMINATED:
            # Every Send was answered before this; any left unanswered are asked again on a
            # new producer (the broker has forgotten this one already).
            self._detach_producer()
            self.seal()
        elif closed.code is ErrorCode.PRODUCER_FENCED:
            self.owner.writer_failed(self, error)
        else:  # moved, or the broker is stopping
            self._restart()

    def _restart(self) -> None:
        """Close this producer on the broker and open a new one."""
        connection = self._connection
        if connection is not None:
            connection.request_soon(ProducerClose(0, self._producer_id))
        self._detach_producer()

    def _detach_producer(self) -> None:
        """Stop using the producer opened on the broker; the next round opens another."""
        connection = self._connection
        if connection is not None:
            connection.detach(Channel.PRODUCER, self._producer_id)
        self._connection = None
        self._wake.set()

    def on_connection_lost(self, error: ClientError) -> None:
        self._connection = None
        self._wake.set()
