"""A one-line progress bar on stderr for long produce and consume runs, drawn only when
stderr is a terminal so that scripts and logs get no control characters."""

from __future__ import annotations

import sys
import time
from typing import TextIO

_WIDTH = 30
_REDRAW_SECONDS = 0.1


class Progress:
    def __init__(self, label: str, total: int | None, stream: TextIO | None = None) -> None:
        self.label = label
        self.total = total
        self.done = 0
        self._stream = stream or sys.stderr
        self._enabled = self._stream.isatty()
        self._started = time.monotonic()
        self._drawn_at = 0.0

    def advance(self, count: int = 1) -> None:
        self.done += count
        now = time.monotonic()
        if self._enabled and now - self._drawn_at >= _REDRAW_SECONDS:
            self._drawn_at = now
            self._draw(now)

    @property
    def rate(self) -> float:
        elapsed = time.monotonic() - self._started
        return self.done / elapsed if elapsed > 0 else 0.0

    @property
    def elapsed(self) -> float:
        return time.monotonic() - self._started

    def finish(self) -> None:
        if self._enabled:
            self._draw(time.monotonic())
            self._stream.write("\n")
            self._stream.flush()

    def _draw(self, now: float) -> None:
        if self.total:
            filled = min(_WIDTH, _WIDTH * self.done // self.total)
            bar = "#" * filled + "." * (_WIDTH - filled)
            line = f"{self.label} [{bar}] {self.done}/{self.total}"
        else:
            line = f"{self.label} {self.done}"
        self._stream.write(f"\r{line}  {self.rate:,.0f}/s ")
        self._stream.flush()
