"""One consumer at a time receives, in log order: the common ground of Exclusive and Failover."""

from __future__ import annotations

from .base import Consumer, Delivery
from .core import DEFAULT_MAX_BUFFERED, ConsumerState, LogOrderCore
from .unacked import UnackedLimits


class SingleActiveDispatcher(LogOrderCore):
    """Delivers only to the active consumer: messages that came back first, by position,
    then new reads in log order. Switching the active consumer returns the previous one's
    pending messages, so the next active consumer receives them before anything newer."""

    def __init__(
        self, *, max_buffered: int = DEFAULT_MAX_BUFFERED, unacked: UnackedLimits | None = None
    ) -> None:
        super().__init__(max_buffered=max_buffered, unacked=unacked)
        self._active: ConsumerState | None = None

    @property
    def active_consumer(self) -> Consumer | None:
        """The consumer that receives; the I/O layer tells consumers when this changes."""
        return None if self._active is None else self._active.consumer

    def _deliver(self, cap: int) -> list[Delivery]:
        active = self._active
        if active is None or not active.permits or not cap:
            return []
        batch = self._take_in_order(min(active.permits, cap))
        if not batch:
            return []
        active.permits -= len(batch)
        return [self._record_sent(active, batch)]

    def _read_budget(self, cap: int) -> int:
        return self._budget_for(0 if self._active is None else min(self._active.permits, cap))

    def _is_active(self, state: ConsumerState) -> bool:
        return state is self._active

    def _activate(self, state: ConsumerState | None) -> None:
        previous = self._active
        if previous is state:
            return
        self._active = state
        if previous is not None:
            self._return_pending(previous, closing=False)
