"""Per-segment load: message and byte rates in and out over a rolling window, and the
cumulative counts the load reporter turns into exact averages per report interval.

Counts go into one-second buckets keyed by the injected monotonic clock; a rate is the sum of
the buckets inside the window divided by the window (or by the time since the meter started,
while that is shorter, so a fresh segment does not report a tenth of its true rate).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass


class RollingRate:
    def __init__(self, window_seconds: float, monotonic: Callable[[], float]) -> None:
        if window_seconds <= 0:
            raise ValueError(f"a rate window must be positive, not {window_seconds}")
        self._window = window_seconds
        self._monotonic = monotonic
        self._started = monotonic()
        self._buckets: deque[list[float]] = deque()  # [second, count]
        self._total = 0.0

    def add(self, amount: float = 1.0) -> None:
        second = float(int(self._monotonic()))
        if self._buckets and self._buckets[-1][0] == second:
            self._buckets[-1][1] += amount
        else:
            self._buckets.append([second, amount])
        self._total += amount
        self._expire()

    def rate(self) -> float:
        self._expire()
        elapsed = min(self._window, max(self._monotonic() - self._started, 1.0))
        return self._total / elapsed

    def _expire(self) -> None:
        horizon = self._monotonic() - self._window
        while self._buckets and self._buckets[0][0] + 1 <= horizon:
            self._total -= self._buckets.popleft()[1]


@dataclass(frozen=True, slots=True)
class LoadSample:
    msg_rate_in: float
    msg_rate_out: float
    byte_rate_in: float
    byte_rate_out: float


@dataclass(frozen=True, slots=True)
class LoadCounts:
    """Messages and bytes in and out since the segment was opened on this broker."""

    messages_in: int = 0
    messages_out: int = 0
    bytes_in: int = 0
    bytes_out: int = 0


class SegmentLoad:
    """The four rates of one segment (stats and metrics), and its cumulative counts."""

    def __init__(self, window_seconds: float, monotonic: Callable[[], float]) -> None:
        self.started = monotonic()  # when the counts started from zero
        self._msgs_in = RollingRate(window_seconds, monotonic)
        self._msgs_out = RollingRate(window_seconds, monotonic)
        self._bytes_in = RollingRate(window_seconds, monotonic)
        self._bytes_out = RollingRate(window_seconds, monotonic)
        # Plain ints: this is the publish and dispatch path.
        self._total_msgs_in = self._total_msgs_out = self._total_bytes_in = (
            self._total_bytes_out
        ) = 0

    def produced(self, messages: int, size: int) -> None:
        self._msgs_in.add(messages)
        self._bytes_in.add(size)
        self._total_msgs_in += messages
        self._total_bytes_in += size

    def dispatched(self, messages: int, size: int) -> None:
        self._msgs_out.add(messages)
        self._bytes_out.add(size)
        self._total_msgs_out += messages
        self._total_bytes_out += size

    def counts(self) -> LoadCounts:
        return LoadCounts(
            self._total_msgs_in, self._total_msgs_out, self._total_bytes_in, self._total_bytes_out
        )

    def sample(self) -> LoadSample:
        return LoadSample(
            msg_rate_in=self._msgs_in.rate(),
            msg_rate_out=self._msgs_out.rate(),
            byte_rate_in=self._bytes_in.rate(),
            byte_rate_out=self._bytes_out.rate(),
        )
