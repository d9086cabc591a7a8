"""What became of each message ``stctl produce`` handed to its producer: acknowledged, failed,
or still unanswered; and the window that keeps at most so many unanswered.

The command checks the tally before it queues each message, so nothing is queued once a send
has failed; waiting for room here rather than in ``send_async`` is what lets that check come
after the wait (a message queued after a failure would wait out a send timeout of its own).
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable

from ..client import ClientError
from ..protocol import MessageId


class SendTally:
    def __init__(self, window: int, acknowledged: Callable[[], None] = lambda: None) -> None:
        if window < 1:
            raise ValueError("the window must hold at least one message")
        self.window = window
        self.acknowledged = 0
        self.failed = 0
        self._on_acknowledged = acknowledged
        self._tried = 0
        self._first_failure: tuple[int, BaseException] | None = None
        self._first_id: tuple[int, MessageId] | None = None
        self._last_id: tuple[int, MessageId] | None = None
        self._changed = asyncio.Event()

    @property
    def tried(self) -> int:
        """Messages handed to the producer, refused at once or not."""
        return self._tried

    @property
    def unanswered(self) -> int:
        return self._tried - self.acknowledged - self.failed

    @property
    def first_error(self) -> BaseException | None:
        """The error of the earliest message (in send order) that failed."""
        return None if self._first_failure is None else self._first_failure[1]

    @property
    def first_id(self) -> MessageId | None:
        """The id of the earliest message acknowledged, in send order."""
        return None if self._first_id is None else self._first_id[1]

    @property
    def last_id(self) -> MessageId | None:
        """The id of the latest message acknowledged, in send order."""
        return None if self._last_id is None else self._last_id[1]

    def track(self, future: asyncio.Future[MessageId | None]) -> None:
        """Count the answer to the next message sent, when it comes."""
        future.add_done_callback(functools.partial(self._answered, self._tried))
        self._tried += 1

    def refused(self, error: ClientError) -> None:
        """The producer refused the next message at once (too large, producer closed)."""
        self._tried += 1
        self._failed(self._tried - 1, error)
        self._changed.set()

    async def room(self) -> None:
        """Return once fewer than ``window`` messages are unanswered."""
        while self.unanswered >= self.window:
            self._changed.clear()
            await self._changed.wait()

    async def failure(self) -> None:
        """Return once a message has failed."""
        while not self.failed:
            self._changed.clear()
            await self._changed.wait()

    def _answered(self, index: int, future: asyncio.Future[MessageId | None]) -> None:
        if future.cancelled():
            self._failed(index, asyncio.CancelledError())
        elif (error := future.exception()) is not None:
            self._failed(index, error)
        else:
            self.acknowledged += 1
            message_id = future.result()
            if message_id is not None:
                if self._first_id is None or index < self._first_id[0]:
                    self._first_id = (index, message_id)
                if self._last_id is None or index > self._last_id[0]:
                    self._last_id = (index, message_id)
            self._on_acknowledged()
        self._changed.set()

    def _failed(self, index: int, error: BaseException) -> None:
        self.failed += 1
        if self._first_failure is None or index < self._first_failure[0]:
            self._first_failure = (index, error)
