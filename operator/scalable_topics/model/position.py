"""Where a message sits in a segment: its log entry and its index within the producer batch."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, order=True, slots=True)
class Position:
    """``entry_id`` numbers the segment log's records from 0; a producer batch is one record
    and ``batch_index`` picks one message out of it (0 for a message sent alone)."""

    entry_id: int
    batch_index: int = 0

    def __post_init__(self) -> None:
        if self.entry_id < 0 or self.batch_index < 0:
            raise ValueError(
                f"a position has non-negative parts, not {self.entry_id}:{self.batch_index}"
            )

    def __str__(self) -> str:
        return f"{self.entry_id}:{self.batch_index}"
