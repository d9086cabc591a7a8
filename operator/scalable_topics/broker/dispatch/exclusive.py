"""Exclusive: a single consumer receives every message, in log order."""

from __future__ import annotations

from .base import Consumer, ConsumerBusy, DispatchMode
from .core import ConsumerState
from .single_active import SingleActiveDispatcher


class ExclusiveDispatcher(SingleActiveDispatcher):
    mode = DispatchMode.EXCLUSIVE

    def add_consumer(self, consumer: Consumer) -> None:
        if self._active is not None and consumer.consumer_id != self._active.consumer.consumer_id:
            raise ConsumerBusy(self._active.consumer)
        self._active = self._register(consumer)

    def _on_removed(self, state: ConsumerState) -> None:
        self._active = None
