"""Shared: consumers take turns, no ordering guarantee, messages that came back go first."""

from __future__ import annotations

from bisect import bisect_right

from .base import Consumer, Delivery, DispatchMode, Message
from .core import DEFAULT_MAX_BUFFERED, ConsumerState, LogOrderCore
from .unacked import UnackedLimits

# Pulsar's dispatcherMaxRoundRobinBatchSize: a turn hands over up to this many messages.
DEFAULT_ROUND_ROBIN_BATCH = 20


class SharedDispatcher(LogOrderCore):
    """Round-robin over the consumers with permits, in turns of up to ``round_robin_batch``
    messages. As in Pulsar, consumers with a lower priority value are served first while they
    have permits; within a priority level they take turns in the order they joined."""

    mode = DispatchMode.SHARED

    def __init__(
        self,
        *,
        max_buffered: int = DEFAULT_MAX_BUFFERED,
        round_robin_batch: int = DEFAULT_ROUND_ROBIN_BATCH,
        unacked: UnackedLimits | None = None,
    ) -> None:
        super().__init__(max_buffered=max_buffered, unacked=unacked)
        if round_robin_batch < 1:
            raise ValueError(f"round_robin_batch must be at least 1, not {round_robin_batch}")
        self._round_robin_batch = round_robin_batch
        self._turn_order: list[ConsumerState] = []  # by priority, then joining order
        self._next_turn: dict[int, int] = {}  # priority level -> index within it

    def add_consumer(self, consumer: Consumer) -> None:
        state = self._register(consumer)
        index = bisect_right(self._turn_order, consumer.priority, key=lambda s: s.consumer.priority)
        self._turn_order.insert(index, state)

    def _on_removed(self, state: ConsumerState) -> None:
        self._turn_order.remove(state)

    def _read_budget(self, cap: int) -> int:
        return self._budget_for(min(sum(state.permits for state in self._turn_order), cap))

    def _deliver(self, cap: int) -> list[Delivery]:
        permits = min(sum(state.permits for state in self._turn_order), cap)
        if not permits or not self.buffered:
            return []
        batch = self._take_in_order(permits)
        sent: dict[ConsumerState, list[Message]] = {}
        start, end = 0, len(batch)
        while start < end:
            state = self._next_consumer()
            count = min(state.permits, self._round_robin_batch, end - start)
            state.permits -= count
            sent.setdefault(state, []).extend(batch[start : start + count])
            start += count
        return [self._record_sent(state, messages) for state, messages in sent.items()]

    def _next_consumer(self) -> ConsumerState:
        """The next consumer in turn at the preferred priority level that has permits."""
        level = next(s.consumer.priority for s in self._turn_order if s.permits)
        members = [s for s in self._turn_order if s.consumer.priority == level]
        first = self._next_turn.get(level, 0)
        for step in range(len(members)):
            index = (first + step) % len(members)
            if members[index].permits:
                self._next_turn[level] = (index + 1) % len(members)
                return members[index]
        raise AssertionError("a consumer with permits exists at this level")
