"""Injected time: wall time for timestamps that others read, monotonic time for deadlines."""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Protocol


class Clock(Protocol):
    def now(self) -> datetime:
        """Wall-clock time, timezone-aware UTC: for timestamps written to the store."""
        ...

    def monotonic(self) -> float:
        """Seconds that never go backwards: for leases, deadlines and timers."""
        ...


class SystemClock:
    """The machine's clock. Asyncio code passes ``loop.time`` so that looptime can drive it."""

    def __init__(self, monotonic: Callable[[], float] = time.monotonic) -> None:
        self._monotonic = monotonic

    def now(self) -> datetime:
        return datetime.now(UTC)

    def monotonic(self) -> float:
        return self._monotonic()


class ManualClock:
    """A clock that moves only when told to, for tests of pure logic."""

    def __init__(self, start: datetime | None = None) -> None:
        self._now = start or datetime(2026, 1, 1, tzinfo=UTC)
        self._monotonic = 1000.0

    def now(self) -> datetime:
        return self._now

    def monotonic(self) -> float:
        return self._monotonic

    def advance(self, seconds: float) -> None:
        self._now += timedelta(seconds=seconds)
        self._monotonic += seconds
