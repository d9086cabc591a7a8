"""Failover: many consumers attach, the preferred one receives, in log order.

The active consumer is the one with the lowest ``(priority, name, consumer_id)``. Pulsar
breaks priority ties with a hash ring of consumer names keyed by the topic; here segments are
spread over consumers by the controller, so within a segment the rule only needs to be
deterministic. When the active consumer leaves or a preferred one joins, the previous active
consumer's unacknowledged messages go to the new one first, in position order (as Pulsar
rewinds on an active-consumer change); acks the previous one sends afterwards are ignored.
"""

from __future__ import annotations

from .base import Consumer, DispatchMode
from .core import ConsumerState
from .single_active import SingleActiveDispatcher


def _preference(state: ConsumerState) -> tuple[int, str, int]:
    consumer = state.consumer
    return consumer.priority, consumer.name, consumer.consumer_id


class FailoverDispatcher(SingleActiveDispatcher):
    mode = DispatchMode.FAILOVER

    def add_consumer(self, consumer: Consumer) -> None:
        self._register(consumer)
        self._activate(self._preferred())

    def _on_removed(self, state: ConsumerState) -> None:
        if state is self._active:
            # The core returns the leaving consumer's pending messages itself.
            self._active = None
            self._activate(self._preferred())

    def _preferred(self) -> ConsumerState | None:
        return min(self._consumers.values(), key=_preference, default=None)
