"""Producer deduplication: a retried batch is not written twice.

Per producer name the broker remembers the highest sequence id *persisted* and the highest
*pushed* (handed to the log, maybe not yet durable). A batch whose last sequence id is at or
below the persisted mark is a duplicate and is answered with its original position when it is
still remembered; one at or below the pushed mark is a retry of a batch in flight, which the
caller answers once the original completes. Pure bookkeeping; the broker rebuilds it on start
by replaying the log's batch records.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field
from enum import StrEnum


class Verdict(StrEnum):
    NEW = "new"
    DUPLICATE = "duplicate"
    IN_FLIGHT = "in-flight"


@dataclass(slots=True)
class _Producer:
    persisted: int = -1
    pushed: int = -1
    # last sequence id of recent batches -> entry id, to answer a duplicate with its position
    recent: OrderedDict[int, int] = field(default_factory=OrderedDict)


class DedupTracker:
    def __init__(self, remembered_batches: int = 1024) -> None:
        self._producers: dict[str, _Producer] = {}
        self._remembered = remembered_batches

    def classify(self, producer_name: str, last_sequence_id: int) -> Verdict:
        state = self._producers.get(producer_name)
        if state is None or last_sequence_id > state.pushed:
            return Verdict.NEW
        return Verdict.DUPLICATE if last_sequence_id <= state.persisted else Verdict.IN_FLIGHT

    def original_entry(self, producer_name: str, last_sequence_id: int) -> int | None:
        state = self._producers.get(producer_name)
        return None if state is None else state.recent.get(last_sequence_id)

    def pushed(self, producer_name: str, last_sequence_id: int) -> None:
        state = self._producers.setdefault(producer_name, _Producer())
        state.pushed = max(state.pushed, last_sequence_id)

    def persisted(self, producer_name: str, last_sequence_id: int, entry_id: int) -> None:
        state = self._producers.setdefault(producer_name, _Producer())
        state.persisted = max(state.persisted, last_sequence_id)
        state.pushed = max(state.pushed, last_sequence_id)
        state.recent[last_sequence_id] = entry_id
        while len(state.recent) > self._remembered:
            state.recent.popitem(last=False)

    def failed(self, producer_name: str) -> None:
        """A push did not become durable: whatever was in flight may be sent again."""
        state = self._producers.get(producer_name)
        if state is not None:
            state.pushed = state.persisted

    def producers(self) -> list[str]:
        return list(self._producers)

    def highest_persisted(self, producer_name: str) -> int:
        state = self._producers.get(producer_name)
        return -1 if state is None else state.persisted
