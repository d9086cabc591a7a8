"""Client-side acknowledgement timeouts: messages handed to the application and neither
acknowledged nor negatively acknowledged within ``timeout`` seconds are reported as expired,
so that the consumer asks the broker to deliver them again.

One timer for all messages: with a single timeout, deadlines expire in delivery order, so the
next one to fire is always the oldest.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from collections.abc import Callable

from ..protocol import MessageId


class AckTimeouts:
    def __init__(self, timeout: float, expired: Callable[[list[MessageId]], None]) -> None:
        if timeout <= 0:
            raise ValueError(f"an ack timeout is a positive number of seconds, not {timeout}")
        self._timeout = timeout
        self._expired = expired
        self._deadlines: OrderedDict[MessageId, float] = OrderedDict()
        self._timer: asyncio.TimerHandle | None = None
        self._loop = asyncio.get_running_loop()

    def delivered(self, message_id: MessageId) -> None:
        self._deadlines.pop(message_id, None)
        self._deadlines[message_id] = self._loop.time() + self._timeout
        if self._timer is None:
            self._timer = self._loop.call_at(self._deadlines[message_id], self._fire)

    def settled(self, message_id: MessageId) -> None:
        """Acknowledged or negatively acknowledged: no longer timed."""
        self._deadlines.pop(message_id, None)

    def close(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._deadlines.clear()

    def _fire(self) -> None:
        self._timer = None
        now = self._loop.time()
        expired: list[MessageId] = []
        while self._deadlines:
            message_id, deadline = next(iter(self._deadlines.items()))
            if deadline > now:
                self._timer = self._loop.call_at(deadline, self._fire)
                break
            del self._deadlines[message_id]
            expired.append(message_id)
        if expired:
            self._expired(expired)
