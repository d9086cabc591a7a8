"""When the segment log fsyncs, and so what an acknowledged append survives."""

from __future__ import annotations

import enum
from dataclasses import dataclass


class SyncMode(enum.StrEnum):
    # fsync before acknowledging; appends that arrive during an fsync share the next one.
    # An acknowledged append survives a process crash, an OS crash and a power failure.
    BATCH = "batch"
    # WEAKER: acknowledge after write(), fsync at most every interval. An acknowledged append
    # survives a process crash; an OS crash or power failure can lose the last interval.
    INTERVAL = "interval"
    # WEAKEST, for benchmarks: never fsync (except when a file is rolled, sealed or closed). An
    # acknowledged append survives a process crash only.
    NONE = "none"


@dataclass(frozen=True, slots=True)
class SyncPolicy:
    mode: SyncMode = SyncMode.BATCH
    interval_seconds: float = 1.0  # used by INTERVAL only

    def __post_init__(self) -> None:
        if not self.interval_seconds > 0:
            raise ValueError(f"the sync interval must be positive, not {self.interval_seconds}")

    @classmethod
    def named(cls, name: str, interval_seconds: float = 1.0) -> SyncPolicy:
        """The policy of a configuration value: ``batch``, ``interval`` or ``none``."""
        try:
            mode = SyncMode(name)
        except ValueError:
            modes = ", ".join(m.value for m in SyncMode)
            raise ValueError(f"unknown sync policy {name!r}; expected one of {modes}") from None
        return cls(mode, interval_seconds)
