"""Bookkeeping every dispatcher shares: consumers, permits, pending messages, redelivery counts.

Subclasses decide who receives what (``_deliver``) and where returned messages wait
(``_requeue``); :class:`LogOrderCore` is the base of the modes that replay in log order.

The unacknowledged-message limits (unacked.py) apply to every mode the same way: for the span
of one decision (``take_deliveries``, ``read_budget``) each consumer's permits are lowered to
what its limit leaves it room for, and the subclass gets the subscription's room as a cap on
the total. The subclass decides exactly as with fewer permits, so every mode's own rules
(log order, Key_Shared's per-key order and draining hashes) hold under the limits unchanged.
"""

from __future__ import annotations

import sys
from abc import ABC, abstractmethod
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from scalable_topics.model.position import Position

from .base import (
    Consumer,
    ConsumerId,
    ConsumerStats,
    Delivery,
    DispatcherStats,
    DispatchMode,
    DuplicateConsumer,
    Message,
    UnknownConsumer,
)
from .pending import PendingMessages
from .replay import ReplayQueue
from .unacked import Gauge, UnackedLimits

DEFAULT_MAX_BUFFERED = 5_000
UNCAPPED = sys.maxsize


@dataclass(slots=True, eq=False)
class ConsumerState:
    """One attached consumer; compared and hashed by identity."""

    consumer: Consumer
    permits: int = 0
    pending: PendingMessages = field(default_factory=PendingMessages)
    """Delivered and not acknowledged, in delivery order."""
    gauge: Gauge | None = None
    """The per-consumer unacked limit, if there is one."""
    withheld: int = 0
    """Permits set aside during one decision because the unacked limit leaves no room."""


class DispatcherCore(ABC):
    mode: DispatchMode

    def __init__(
        self, *, max_buffered: int = DEFAULT_MAX_BUFFERED, unacked: UnackedLimits | None = None
    ) -> None:
        if max_buffered < 1:
            raise ValueError(f"max_buffered must be at least 1, not {max_buffered}")
        self._max_buffered = max_buffered
        self._unacked = unacked or UnackedLimits()
        self._subscription_gauge = Gauge(self._unacked.per_subscription)
        self._consumers: dict[ConsumerId, ConsumerState] = {}
        self._incoming: list[Message] = []
        self._last_accepted: Position | None = None
        # Only messages that came back have an entry: first deliveries cost no lookup.
        self._redelivery_counts: dict[Position, int] = {}
        self._delivered_total = 0
        self._acked_total = 0
        self._redelivered_total = 0

    # -- what subclasses provide ---------------------------------------------------------------

    @abstractmethod
    def add_consumer(self, consumer: Consumer) -> None: ...

    @abstractmethod
    def _deliver(self, cap: int) -> list[Delivery]:
        """What to send now (take_deliveries), within permits and at most ``cap`` messages
        in all."""

    @abstractmethod
    def _read_budget(self, cap: int) -> int:
        """read_budget, reading for at most ``cap`` more deliveries."""

    @property
    @abstractmethod
    def _replay_size(self) -> int: ...

    @abstractmethod
    def _requeue(self, messages: list[Message]) -> None:
        """Hold messages that came back until they can be dispatched again."""

    @abstractmethod
    def _discard_replayed(self, positions: set[Position]) -> list[Message]:
        """Drop waiting redeliveries at ``positions``; return the messages dropped."""

    @abstractmethod
    def _on_removed(self, state: ConsumerState) -> None:
        """The consumer left; its pending messages are returned right after this."""

    @abstractmethod
    def _released(self, state: ConsumerState, messages: list[Message], closing: bool) -> None:
        """These messages stopped being pending at the consumer (acked, returned, or closing)."""

    def _is_active(self, state: ConsumerState) -> bool:
        return True

    # -- the Dispatcher protocol ---------------------------------------------------------------

    def take_deliveries(self) -> list[Delivery]:
        if not self._unacked.any:
            return self._deliver(UNCAPPED)
        cap = self._withhold()
        try:
            deliveries = self._deliver(cap)
        finally:
            self._give_back()
        for state in self._consumers.values():
            if state.gauge is not None:
                state.gauge.update(len(state.pending))
        self._subscription_gauge.update(self.unacked)
        return deliveries

    def read_budget(self) -> int:
        if not self._unacked.any:
            return self._read_budget(UNCAPPED)
        cap = self._withhold()
        try:
            return self._read_budget(cap)
        finally:
            self._give_back()

    @property
    def unacked(self) -> int:
        """Messages delivered and not acknowledged, at every consumer."""
        return sum(len(state.pending) for state in self._consumers.values())

    def _withhold(self) -> int:
        """Lower each consumer's permits to its room under the per-consumer limit; return the
        subscription's room (the cap on this decision's deliveries)."""
        for state in self._consumers.values():
            if state.gauge is not None and state.permits:
                room = state.gauge.room(len(state.pending))
                if state.permits > room:
                    state.withheld = state.permits - room
                    state.permits = room
        if not self._subscription_gauge.limit:
            return UNCAPPED
        return self._subscription_gauge.room(self.unacked)

    def _give_back(self) -> None:
        for state in self._consumers.values():
            if state.withheld:
                state.permits += state.withheld
                state.withheld = 0

    def remove_consumer(self, consumer_id: ConsumerId) -> None:
        state = self._consumers.pop(consumer_id, None)
        if state is None:
            raise UnknownConsumer(consumer_id)
        self._on_removed(state)
        self._return_pending(state, closing=True)

    def add_permits(self, consumer_id: ConsumerId, permits: int) -> None:
        if permits < 0:
            raise ValueError(f"permits are granted in non-negative amounts, not {permits}")
        self._state(consumer_id).permits += permits

    def accept(self, messages: Sequence[Message]) -> None:
        if not messages:
            return
        first = messages[0].position
        if self._last_accepted is not None and first <= self._last_accepted:
            raise ValueError(
                f"messages must arrive in log order: {first} after {self._last_accepted}"
            )
        self._incoming.extend(messages)
        self._last_accepted = messages[-1].position

    @property
    def buffered(self) -> int:
        return len(self._incoming) + self._replay_size

    @property
    def outstanding(self) -> int:
        return self.buffered + sum(len(state.pending) for state in self._consumers.values())

    def ack(self, consumer_id: ConsumerId, positions: Iterable[Position]) -> None:
        state = self._consumers.get(consumer_id)
        if state is None:
            return
        acked, elsewhere = state.pending.pop_many(positions)
        if acked:
            self._settled(acked)
            self._released(state, acked, False)
        if elsewhere:
            self._forget(elsewhere)

    def _forget(self, positions: list[Position]) -> None:
        """Positions acknowledged by a consumer they are not pending at: a client that
        reconnected acks what its old session received, and the broker had taken those back
        (or has read them again and not yet sent them). No consumer may receive them again,
        so they leave other consumers' pending sets, the replay set and the read buffer."""
        wanted = set(positions)
        for state in self._consumers.values():
            found = [m for p in list(wanted) if (m := state.pending.pop(p)) is not None]
            if found:
                wanted.difference_update(m.position for m in found)
                self._settled(found)
                self._released(state, found, False)
        if wanted:
            replayed = self._discard_replayed(wanted)
            self._settled(replayed)
            wanted.difference_update(m.position for m in replayed)
        if wanted and self._incoming:
            unread = [m for m in self._incoming if m.position in wanted]
            if unread:
                self._incoming[:] = [m for m in self._incoming if m.position not in wanted]
                self._settled(unread)

    def _settled(self, messages: list[Message]) -> None:
        self._acked_total += len(messages)
        counts = self._redelivery_counts
        if counts:
            for message in messages:
                counts.pop(message.position, None)

    def redeliver(
        self, consumer_id: ConsumerId, positions: Iterable[Position] | None = None
    ) -> None:
        state = self._consumers.get(consumer_id)
        if state is None:
            return
        if positions is None:
            self._return_pending(state, closing=False)
            return
        returned, _ = state.pending.pop_many(positions)
        if returned:
            self._released(state, returned, False)
            self._return(returned)

    def unblock_wakeup(self, now: float) -> float | None:
        return None

    def pending(self, consumer_id: ConsumerId) -> list[Message]:
        return sorted(self._state(consumer_id).pending)

    def pending_up_to(self, consumer_id: ConsumerId, position: Position) -> list[Position]:
        return self._state(consumer_id).pending.positions_up_to(position)

    def pending_message(self, position: Position) -> Message | None:
        for state in self._consumers.values():
            message = state.pending.get(position)
            if message is not None:
                return message
        return None

    def consumers(self) -> list[Consumer]:
        return [state.consumer for state in self._consumers.values()]

    def stats(self) -> DispatcherStats:
        return DispatcherStats(
            mode=self.mode,
            consumers=tuple(self._consumer_stats(state) for state in self._consumers.values()),
            buffered_messages=self.buffered,
            replay_messages=self._replay_size,
            unacked_messages=self.unacked,
            blocked_on_unacked=self._subscription_gauge.blocked,
            delivered_total=self._delivered_total,
            acked_total=self._acked_total,
            redelivered_total=self._redelivered_total,
        )

    # -- helpers for subclasses ----------------------------------------------------------------

    def _register(self, consumer: Consumer) -> ConsumerState:
        if consumer.consumer_id in self._consumers:
            raise DuplicateConsumer(consumer.consumer_id)
        limit = self._unacked.per_consumer
        state = ConsumerState(consumer, gauge=Gauge(limit) if limit else None)
        self._consumers[consumer.consumer_id] = state
        return state

    def _state(self, consumer_id: ConsumerId) -> ConsumerState:
        state = self._consumers.get(consumer_id)
        if state is None:
            raise UnknownConsumer(consumer_id)
        return state

    def _record_sent(self, state: ConsumerState, messages: list[Message]) -> Delivery:
        """Make the messages pending at the consumer. Permits are the caller's to charge."""
        state.pending.add(messages)
        self._delivered_total += len(messages)
        counts = self._redelivery_counts
        redeliveries = (
            [counts.get(message.position, 0) for message in messages]
            if counts
            else [0] * len(messages)
        )
        return Delivery(state.consumer.consumer_id, messages, redeliveries)

    def _return_pending(self, state: ConsumerState, *, closing: bool) -> None:
        if not state.pending:
            return
        returned = state.pending.take_all()
        self._released(state, returned, closing)
        self._return(returned)

    def _return(self, messages: list[Message]) -> None:
        counts = self._redelivery_counts
        for message in messages:
            counts[message.position] = counts.get(message.position, 0) + 1
        self._redelivered_total += len(messages)
        self._requeue(messages)

    def _consumer_stats(self, state: ConsumerState) -> ConsumerStats:
        consumer = state.consumer
        return ConsumerStats(
            consumer_id=consumer.consumer_id,
            name=consumer.name,
            priority=consumer.priority,
            permits=state.permits,
            pending_messages=len(state.pending),
            active=self._is_active(state),
            blocked_on_unacked=state.gauge is not None and state.gauge.blocked,
        )


class LogOrderCore(DispatcherCore):
    """Exclusive, Failover and Shared: returned messages wait in one position-ordered replay
    set, and every delivery takes from it before any newly read message."""

    def __init__(
        self, *, max_buffered: int = DEFAULT_MAX_BUFFERED, unacked: UnackedLimits | None = None
    ) -> None:
        super().__init__(max_buffered=max_buffered, unacked=unacked)
        self._replay = ReplayQueue()

    @property
    def _replay_size(self) -> int:
        return len(self._replay)

    def _requeue(self, messages: list[Message]) -> None:
        self._replay.add(messages)

    def _discard_replayed(self, positions: set[Position]) -> list[Message]:
        return self._replay.discard(positions)

    def _released(self, state: ConsumerState, messages: list[Message], closing: bool) -> None:
        """Nothing to track: these modes keep no per-message state beyond pending."""

    def _take_in_order(self, limit: int) -> list[Message]:
        """Up to ``limit`` messages: the replay set by position, then new reads in log order."""
        batch = self._replay.pop_first(limit) if self._replay else []
        wanted = limit - len(batch)
        incoming = self._incoming
        if wanted > 0 and incoming:
            batch.extend(incoming[:wanted])
            del incoming[:wanted]
        return batch

    def _budget_for(self, permits: int) -> int:
        """Read what the permits can take that the buffer does not already hold."""
        return max(0, min(permits, self._max_buffered) - self.buffered)
