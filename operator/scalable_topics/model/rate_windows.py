"""The rate windows the load job (and a broker's ``topics load`` report) averages over, how
they are written on the command line, and the load history's date partitions they touch.

Pravega's auto-scaler reads 2, 5, 10 and 20 minute rates: a burst over a split threshold
shows in the short window at once, and a merge needs every window cold, i.e. a cold period as
long as the longest window.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Final

_UNITS: Final = {"s": 1, "m": 60, "h": 3600}
_PART: Final = re.compile(r"^(\d+)([smh])$")


@dataclass(frozen=True, slots=True, order=True)
class Window:
    """The last ``seconds`` before a run's time; ``label`` as it was written (e.g. "2m")."""

    seconds: int
    label: str


def parse_windows(text: str) -> tuple[Window, ...]:
    """``"2m,5m,10m,20m"`` as windows, shortest first; a ValueError names what is wrong."""
    windows: dict[int, Window] = {}
    for part in (p.strip() for p in text.split(",")):
        match = _PART.match(part)
        if match is None:
            raise ValueError(
                f"window {part!r} is not a whole number of seconds, minutes or hours "
                f"(e.g. 20s, 2m, 1h)"
            )
        seconds = int(match.group(1)) * _UNITS[match.group(2)]
        if seconds <= 0:
            raise ValueError(f"window {part!r} must be longer than 0")
        if seconds in windows:
            raise ValueError(f"window {part!r} is the same length as {windows[seconds].label!r}")
        windows[seconds] = Window(seconds, part)
    return tuple(sorted(windows.values()))


DEFAULT_WINDOWS: Final = parse_windows("2m,5m,10m,20m")


def longest(windows: tuple[Window, ...]) -> Window:
    if not windows:
        raise ValueError("at least one window is needed")
    return max(windows)


def partition_dates(now: datetime, longest: Window) -> list[str]:
    """The ``date=`` partitions holding rows that end in [now - longest, now]."""
    day = (now - timedelta(seconds=longest.seconds)).astimezone(UTC).date()
    last = now.astimezone(UTC).date()
    dates = []
    while day <= last:
        dates.append(day.isoformat())
        day += timedelta(days=1)
    return dates
