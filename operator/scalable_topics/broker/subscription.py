"""One subscription on one hosted segment: its cursor, its consumers and the dispatch loop.

The dispatcher (``broker/dispatch``) decides who receives what; this module does the I/O
around it. A single pump task per subscription reads the segment log from the first
unacknowledged entry, hands the messages to the dispatcher, and sends what it decides to the
consumers' sessions. Acks update the dispatcher and the :class:`CursorState`, which is saved
through the cursor store before an ack receipt is answered, so an acknowledged position
survives a crash.

Ordered types (Exclusive, Failover, Key_Shared) on a segment with parents dispatch nothing
until ``gate_open`` says every parent is drained for this subscription (DESIGN guarantee 3).

Memory: a message read ahead is kept whole (payload included) until it is sent; once sent,
only the dispatcher's small record of it stays while it is unacknowledged, and a message that
comes back for redelivery is read again from the log. The dispatcher's unacked limits
(dispatch/unacked.py) bound how many such records a consumer and a subscription hold.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, Iterable
from typing import Any, Protocol

from ..model.cursor_state import CursorState
from ..model.hashing import hash_key
from ..model.position import Position
from ..protocol import (
    NO_PROPERTIES,
    DeliveredMessage,
    ErrorCode,
    MessageId,
    SegmentSubscriptionType,
)
from ..tasks import cancel_and_wait
from .batch_record import decode_batch, decode_messages
from .dispatch import (
    Consumer,
    ConsumerId,
    Dispatcher,
    DispatcherStats,
    ExclusiveDispatcher,
    FailoverDispatcher,
    KeySharedDispatcher,
    Message,
    SharedDispatcher,
    UnackedLimits,
)
from .errors import BrokerError

log = logging.getLogger(__name__)

ORDERED_TYPES = frozenset(
    {
        SegmentSubscriptionType.EXCLUSIVE,
        SegmentSubscriptionType.FAILOVER,
        SegmentSubscriptionType.KEY_SHARED,
    }
)
_READ_ENTRIES = 256
# NamedTuple construction runs a Python-level __new__; the hot loops below build positions,
# messages and deliveries several times per message, so they call tuple.__new__ (C) instead.
_make = tuple.__new__
_READ_BYTES = 4 * 1024 * 1024


class SubscriptionError(BrokerError):
    pass


class LogReader(Protocol):
    """What a subscription needs of the segment log."""

    @property
    def last_entry_id(self) -> int: ...

    @property
    def sealed(self) -> bool: ...

    async def read_entries(
        self, from_entry_id: int, max_entries: int, max_bytes: int
    ) -> list[tuple[int, int, bytes]]:
        """(entry id, publish time ms, record) from ``from_entry_id`` on; [] past the end."""
        ...

    def messages_in(self, first: int, last: int) -> int:
        """How many messages the entries ``first..last`` hold (counted from the floor on)."""
        ...

    async def count_from(self, entry_id: int) -> None:
        """Make :meth:`messages_in` count from ``entry_id`` on (a cursor moves back there)."""
        ...


class ConsumerLink(Protocol):
    """How a subscription reaches one consumer on its session."""

    async def deliver(self, messages: list[DeliveredMessage]) -> None: ...

    async def end_of_segment(self) -> None:
        """Everything of a sealed segment was delivered and acknowledged."""
        ...

    async def closed_by_broker(self, code: ErrorCode, message: str) -> None: ...


# What the read path keeps per message read ahead, until it is sent: the dispatcher's view,
# the stored form [payload, key, properties, event_time_ms], and the publish time.
_Cached = tuple[Message, list[Any], int]


def _make_dispatcher(
    kind: SegmentSubscriptionType, unblocking_interval: float, unacked: UnackedLimits
) -> Dispatcher:
    if kind is SegmentSubscriptionType.KEY_SHARED:
        return KeySharedDispatcher(unblocking_interval=unblocking_interval, unacked=unacked)
    factories: dict[SegmentSubscriptionType, Callable[..., Dispatcher]] = {
        SegmentSubscriptionType.EXCLUSIVE: ExclusiveDispatcher,
        SegmentSubscriptionType.FAILOVER: FailoverDispatcher,
        SegmentSubscriptionType.SHARED: SharedDispatcher,
    }
    return factories[kind](unacked=unacked)


class Subscription:
    def __init__(
        self,
        name: str,
        segment_id: int,
        cursor: CursorState,
        log_reader: LogReader,
        save_cursor: Callable[[str, CursorState], Awaitable[None]],
        gate_open: Callable[[SegmentSubscriptionType], bool],
        on_drained: Callable[[str], None],
        on_dispatched: Callable[[int, int], None],
        dispatch_batch: int = 512,
        unblocking_interval: float = 0.1,
        unacked: UnackedLimits | None = None,
    ) -> None:
        self.name = name
        self._segment_id = segment_id
        self._cursor = cursor
        self._log = log_reader
        self._save_cursor = save_cursor
        self._gate_open = gate_open
        self._on_drained = on_drained
        self._on_dispatched = on_dispatched
        self._dispatch_batch = dispatch_batch
        self._unblocking_interval = unblocking_interval
        self._unacked = unacked or UnackedLimits()
        self._type: SegmentSubscriptionType | None = None
        self._dispatcher: Dispatcher | None = None
        self._links: dict[ConsumerId, ConsumerLink] = {}
        self._cache: dict[Position, _Cached] = {}
        self._read_entry = cursor.first_unacked_entry
        self._wakeup = asyncio.Event()
        self._timers: set[asyncio.TimerHandle] = set()
        self._pump: asyncio.Task[None] | None = None
        self._closed = False
        self._drained_reported = False
        self._ended: set[ConsumerId] = set()
        self._dirty_cursor = False
        self.delivered_total = 0

    # -- state --------------------------------------------------------------------------------

    @property
    def cursor(self) -> CursorState:
        return self._cursor

    @property
    def type(self) -> SegmentSubscriptionType | None:
        return self._type

    @property
    def consumer_count(self) -> int:
        return len(self._links)

    def backlog(self) -> int:
        """Messages not yet acknowledged (a producer batch is one entry of several)."""
        return self._cursor.backlog_messages(self._log.last_entry_id, self._log.messages_in)

    def backlog_entries(self) -> int:
        """Entries not yet fully acknowledged."""
        return self._cursor.backlog_entries(self._log.last_entry_id)

    def is_drained(self) -> bool:
        return self._log.sealed and self._cursor.is_drained(self._log.last_entry_id)

    def stats(self) -> DispatcherStats | None:
        return None if self._dispatcher is None else self._dispatcher.stats()

    # -- consumers ----------------------------------------------------------------------------

    def add_consumer(
        self,
        consumer: Consumer,
        kind: SegmentSubscriptionType,
        link: ConsumerLink,
        permits: int = 0,
    ) -> None:
        if self._closed:
            raise SubscriptionError(
                ErrorCode.SUBSCRIPTION_NOT_FOUND, f"subscription {self.name!r} is closed"
            )
        if self._dispatcher is not None and self._type is not kind:
            raise SubscriptionError(
                ErrorCode.SUBSCRIPTION_TYPE_MISMATCH,
                f"subscription {self.name!r} is {self._type}, consumers must subscribe as {self._type} "
                f"while any is attached (asked for {kind})",
            )
        if self._dispatcher is None:
            self._type = kind
            self._dispatcher = _make_dispatcher(kind, self._unblocking_interval, self._unacked)
        self._dispatcher.add_consumer(consumer)
        self._links[consumer.consumer_id] = link
        if permits:
            self._dispatcher.add_permits(consumer.consumer_id, permits)
        self._ensure_pump()
        self._wake()

    def remove_consumer(self, consumer_id: ConsumerId) -> None:
        if self._dispatcher is None or consumer_id not in self._links:
            return
        del self._links[consumer_id]
        self._ended.discard(consumer_id)
        self._dispatcher.remove_consumer(consumer_id)
        if not self._links:
            # Nobody is left: forget what was read. The cursor says where to start again.
            self._reset_dispatch()
        self._wake()

    def add_permits(self, consumer_id: ConsumerId, permits: int) -> None:
        dispatcher = self._attached(consumer_id)
        dispatcher.add_permits(consumer_id, permits)
        self._wake()

    # -- acknowledgements -----------------------------------------------------------------------

    async def ack(
        self, consumer_id: ConsumerId, positions: list[Position], cumulative: bool
    ) -> None:
        """Apply acks and return once the cursor holding them is durable."""
        self._attached(consumer_id)
        if cumulative and self._type not in (
            SegmentSubscriptionType.EXCLUSIVE,
            SegmentSubscriptionType.FAILOVER,
        ):
            raise SubscriptionError(
                ErrorCode.INVALID_REQUEST,
                f"cumulative acks need an Exclusive or Failover subscription, {self.name!r} is {self._type}",
            )
        targets = [max(positions)] if cumulative else positions
        # Every lookup first: the pump runs while we wait, and must find the dispatcher and
        # the cursor agreeing, never an ack applied to one and not yet to the other (it would
        # read the message again and send it after the ack was answered).
        sizes = [await self._batch_size(position) for position in targets]
        dispatcher = self._attached(consumer_id)
        if cumulative:
            upto = targets[0]
            covered = dispatcher.pending_up_to(consumer_id, upto)
            dispatcher.ack(consumer_id, covered)
            self._cursor.ack_cumulative(upto, sizes[0])
            for position in covered:
                self._cache.pop(position, None)
        else:
            dispatcher.ack(consumer_id, positions)
            for position, size in zip(positions, sizes, strict=True):
                self._cursor.ack(position, size)
                self._cache.pop(position, None)
        self._dirty_cursor = True
        self._wake()
        await self._persist()

    def nack(
        self, consumer_id: ConsumerId, positions: list[Position], delay_seconds: float
    ) -> None:
        self._attached(consumer_id)
        if delay_seconds <= 0:
            self._redeliver(consumer_id, positions)
            return
        self._call_later(delay_seconds, lambda: self._redeliver(consumer_id, positions))

    def redeliver_unacknowledged(
        self, consumer_id: ConsumerId, positions: list[Position] | None
    ) -> None:
        self._attached(consumer_id)
        self._redeliver(consumer_id, positions)

    async def seek(self, entry_id: int) -> None:
        """Reset the subscription: ``entry_id`` is the next to deliver. Consumers stay attached
        without permits; they grant fresh ones once they have dropped what they had buffered."""
        await self._log.count_from(max(0, entry_id))  # the backlog counts from there on
        self._cursor.seek(max(0, entry_id))
        consumers = [] if self._dispatcher is None else self._dispatcher.consumers()
        kind = self._type
        self._reset_dispatch()
        if kind is not None and consumers:
            self._type = kind
            self._dispatcher = _make_dispatcher(kind, self._unblocking_interval, self._unacked)
            for consumer in consumers:
                self._dispatcher.add_consumer(consumer)
        self._drained_reported = False
        self._ended.clear()
        self._dirty_cursor = True
        await self._persist()
        self._wake()

    # -- lifecycle ------------------------------------------------------------------------------

    def notify_appended(self) -> None:
        self._wake()

    def notify_gate_changed(self) -> None:
        self._wake()

    async def close(self, code: ErrorCode | None = None, message: str = "") -> None:
        """Stop dispatching; with ``code``, tell every consumer it was closed by the broker."""
        self._closed = True
        for timer in self._timers:
            timer.cancel()
        self._timers.clear()
        if self._pump is not None:
            await cancel_and_wait(self._pump)
        links = list(self._links.values())
        self._links.clear()
        if code is not None:
            for link in links:
                with contextlib.suppress(Exception):
                    await link.closed_by_broker(code, message)
        if self._dirty_cursor:
            await self._persist()

    # -- the pump -------------------------------------------------------------------------------

    def _ensure_pump(self) -> None:
        if self._pump is None or self._pump.done():
            self._pump = asyncio.get_running_loop().create_task(
                self._run(), name=f"subscription {self.name}"
            )

    def _wake(self) -> None:
        self._wakeup.set()

    async def _run(self) -> None:
        while not self._closed:
            await self._wakeup.wait()
            self._wakeup.clear()
            try:
                await self._dispatch_round()
            except asyncio.CancelledError:
                raise
            except Exception:
                # A failed round must not kill the subscription: the state is intact (the
                # dispatcher records deliveries only when taken), so the next wake-up retries.
                log.exception("dispatch round failed for subscription %s", self.name)
                await asyncio.sleep(0.5)
                self._wake()

    async def _dispatch_round(self) -> None:
        dispatcher = self._dispatcher
        if dispatcher is None or self._type is None:
            return
        if self._type in ORDERED_TYPES and not self._gate_open(self._type):
            return
        while dispatcher is self._dispatcher:
            read_any = await self._read(dispatcher)
            deliveries = dispatcher.take_deliveries()
            for delivery in deliveries:
                if dispatcher is not self._dispatcher:
                    break  # reset while an earlier delivery was written (a seek): all void
                await self._send(
                    dispatcher, delivery.consumer_id, delivery.messages, delivery.redelivery_counts
                )
            if not deliveries and not read_any:
                break
        if dispatcher is self._dispatcher:
            self._schedule_unblock(dispatcher)
            await self._report_end(dispatcher)

    async def _read(self, dispatcher: Dispatcher) -> bool:
        budget = dispatcher.read_budget()
        if budget <= 0 or self._read_entry > self._log.last_entry_id:
            return False
        entries = await self._log.read_entries(
            self._read_entry, min(budget, _READ_ENTRIES), _READ_BYTES
        )
        if dispatcher is not self._dispatcher or not entries:
            return False
        # The hot path: a few operations per message. Only Key_Shared looks at key hashes,
        # and only a cursor with acks past mark-delete needs asking about each position.
        hashed = self._type is SegmentSubscriptionType.KEY_SHARED
        cursor = self._cursor
        check_acks = cursor.has_individual_acks
        cache = self._cache
        accepted: list[Message] = []
        for entry_id, publish_time_ms, record in entries:
            batch = decode_messages(record)
            size = len(batch)
            for index, stored in enumerate(batch):
                position = _make(Position, (entry_id, index))
                if check_acks and cursor.is_acked(position):
                    continue
                message = _make(
                    Message, (position, hash_key(stored[1] or "") if hashed else 0, size)
                )
                cache[position] = (message, stored, publish_time_ms)
                accepted.append(message)
            self._read_entry = entry_id + 1
        if accepted:
            dispatcher.accept(accepted)
        return True

    async def _send(
        self,
        dispatcher: Dispatcher,
        consumer_id: ConsumerId,
        messages: list[Message],
        redeliveries: list[int],
    ) -> None:
        link = self._links.get(consumer_id)
        if link is None:
            return
        segment_id = self._segment_id
        cache = self._cache
        # A message leaves the read-ahead cache as it is sent: none is kept once sent, and one
        # sent before (now redelivered) is read again from the log.
        stored = [cache.pop(message.position, None) for message in messages]
        reread: dict[Position, tuple[list[Any], int]] = {}
        acked = self._cursor.is_acked
        missing = [
            m.position
            for m, s in zip(messages, stored, strict=True)
            if s is None and not acked(m.position)
        ]
        if missing:
            try:
                reread = await self._reread(missing)
            except Exception:
                if dispatcher is self._dispatcher:  # back in line; the next round tries again
                    dispatcher.redeliver(consumer_id, [message.position for message in messages])
                raise
        out: list[DeliveredMessage] = []
        size = 0
        for message, cached, redelivery_count in zip(messages, stored, redeliveries, strict=True):
            position = message.position
            if cached is None:
                found = reread.get(position)
                if found is None:
                    continue  # acknowledged while an earlier delivery of the round was written
                (payload, key, properties, event_time_ms), publish_time_ms = found
            else:
                _, (payload, key, properties, event_time_ms), publish_time_ms = cached
            size += len(payload)
            out.append(
                _make(
                    DeliveredMessage,
                    (
                        _make(MessageId, (segment_id, position[0], position[1])),
                        payload,
                        key,
                        properties or NO_PROPERTIES,
                        event_time_ms,
                        publish_time_ms,
                        redelivery_count,
                    ),
                )
            )
        if not out:
            return
        self.delivered_total += len(out)
        self._on_dispatched(len(out), size)
        for start in range(0, len(out), self._dispatch_batch):
            try:
                await link.deliver(out[start : start + self._dispatch_batch])
            except Exception:
                # The session is going away; its close removes the consumer, which sends
                # these messages back for redelivery.
                log.debug("delivery to consumer %s failed", consumer_id, exc_info=True)
                return

    def _schedule_unblock(self, dispatcher: Dispatcher) -> None:
        now = time.monotonic()
        when = dispatcher.unblock_wakeup(now)
        if when is None:
            return
        self._call_later(max(0.0, when - now), self._wake)

    def _call_later(self, delay: float, callback: Callable[[], None]) -> None:
        """A timer that close() and resets cancel, forgotten once it has fired."""
        handles: list[asyncio.TimerHandle] = []

        def fire() -> None:
            self._timers.difference_update(handles)
            callback()

        handles.append(asyncio.get_running_loop().call_later(delay, fire))
        self._timers.update(handles)

    async def _report_end(self, dispatcher: Dispatcher) -> None:
        if not self.is_drained():
            return
        if not self._drained_reported:
            self._drained_reported = True
            self._on_drained(self.name)
        for consumer_id, link in list(self._links.items()):
            if consumer_id not in self._ended:
                self._ended.add(consumer_id)
                with contextlib.suppress(Exception):
                    await link.end_of_segment()

    # -- helpers --------------------------------------------------------------------------------

    def _attached(self, consumer_id: ConsumerId) -> Dispatcher:
        if self._dispatcher is None or consumer_id not in self._links:
            raise SubscriptionError(
                ErrorCode.UNKNOWN_CONSUMER,
                f"consumer {consumer_id} is not attached to subscription {self.name!r}",
            )
        return self._dispatcher

    def _redeliver(self, consumer_id: ConsumerId, positions: Iterable[Position] | None) -> None:
        if self._dispatcher is None or consumer_id not in self._links:
            return  # the consumer left; its pending messages were sent back already
        self._dispatcher.redeliver(consumer_id, None if positions is None else list(positions))
        self._wake()

    async def _reread(self, positions: list[Position]) -> dict[Position, tuple[list[Any], int]]:
        """Messages read again from the log, each as (stored form, publish time); a run of
        consecutive entries is one read."""
        wanted: dict[int, list[int]] = {}
        for position in positions:
            wanted.setdefault(position.entry_id, []).append(position.batch_index)
        found: dict[Position, tuple[list[Any], int]] = {}
        entries = sorted(wanted)
        last = entries[-1]
        index = 0
        while index < len(entries):
            first = entries[index]
            read = await self._log.read_entries(
                first, min(_READ_ENTRIES, last - first + 1), _READ_BYTES
            )
            for entry_id, publish_time_ms, record in read:
                indexes = wanted.get(entry_id)
                if indexes is None:
                    continue
                batch = decode_messages(record)
                for batch_index in indexes:
                    found[_make(Position, (entry_id, batch_index))] = (
                        batch[batch_index],
                        publish_time_ms,
                    )
            reached = read[-1][0] if read else first - 1
            if reached < first:
                raise SubscriptionError(
                    ErrorCode.INTERNAL_ERROR,
                    f"entry {first} of subscription {self.name!r} is not in the log any more",
                )
            while index < len(entries) and entries[index] <= reached:
                index += 1
        return found

    def _reset_dispatch(self) -> None:
        for timer in self._timers:
            timer.cancel()
        self._timers.clear()
        self._dispatcher = None
        self._type = None
        self._cache.clear()
        self._read_entry = self._cursor.first_unacked_entry

    async def _batch_size(self, position: Position) -> int:
        """The size of the batch holding ``position``; InvalidRequest when no message is there."""
        cached = self._cache.get(position)
        pending = None
        if cached is None and self._dispatcher is not None:
            pending = self._dispatcher.pending_message(position)
        if cached is not None:
            size = cached[0].batch_size
        elif pending is not None:
            size = pending.batch_size
        else:
            entries = await self._log.read_entries(position.entry_id, 1, _READ_BYTES)
            if not entries or entries[0][0] != position.entry_id:
                raise SubscriptionError(
                    ErrorCode.INVALID_REQUEST, f"message {position} does not exist in this segment"
                )
            size = len(decode_batch(entries[0][2]).messages)
        if position.batch_index >= size:
            raise SubscriptionError(
                ErrorCode.INVALID_REQUEST,
                f"message {position} does not exist: entry {position.entry_id} holds {size}",
            )
        return size

    async def _persist(self) -> None:
        self._dirty_cursor = False
        await self._save_cursor(self.name, self._cursor)
