"""A load sample as the load history stores it, and what the reporter and the metrics see of
the history. Free of pyarrow, which only a broker that keeps a history imports (it costs some
75 MiB of memory)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

RowKey = tuple[str, str, int]  # namespace, topic, segment id


@dataclass(frozen=True, slots=True)
class LoadRow:
    """One sample of one segment: the exact average rates over [start, end]."""

    namespace: str
    topic: str
    segment_id: int
    broker: str
    start: datetime
    end: datetime
    msg_rate_in: float
    msg_rate_out: float
    byte_rate_in: float
    byte_rate_out: float


class HistorySink(Protocol):
    """Where the reporter puts every sample."""

    def append(self, row: LoadRow) -> None: ...


class HistoryCounters(Protocol):
    """What the metrics read of the history."""

    rows_written: int
    rows_dropped: int
    rows_removed: int
    write_failures: int
    max_rows: int

    @property
    def buffered(self) -> int: ...
