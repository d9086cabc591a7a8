"""One segment of a scalable topic's DAG."""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from datetime import datetime
from enum import StrEnum
from typing import Any

from .errors import CorruptLayout
from .hash_range import HashRange
from .timefmt import format_time, parse_time

_DESCRIPTOR = re.compile(r"^([0-9a-f]{4})-([0-9a-f]{4})-(0|[1-9][0-9]*)$")


class SegmentState(StrEnum):
    ACTIVE = "Active"
    SEALED = "Sealed"


def descriptor(segment_id: int, hash_range: HashRange) -> str:
    """The segment's name within its topic: ``{start:04x}-{end:04x}-{id}``."""
    return f"{hash_range}-{segment_id}"


def parse_descriptor(text: str) -> tuple[int, HashRange]:
    match = _DESCRIPTOR.match(text)
    if match is None:
        raise ValueError(f"{text!r} is not a segment descriptor of the form 0000-7fff-1")
    return int(match[3]), HashRange(int(match[1], 16), int(match[2], 16))


@dataclass(frozen=True, slots=True)
class SegmentInfo:
    """A segment's place in the DAG.

    ``parent_ids`` records how the segment was made (none: initial, one: split, two: merge) and
    keeps naming parents after they are pruned; ``child_ids`` always names present segments.
    ``sealed_at_epoch`` is 0 while the segment is active: sealing always bumps the epoch, so a
    segment is never sealed at epoch 0.
    """

    segment_id: int
    hash_range: HashRange
    state: SegmentState
    created_at_epoch: int
    created_at: datetime
    parent_ids: tuple[int, ...] = ()
    child_ids: tuple[int, ...] = ()
    sealed_at_epoch: int = 0
    sealed_at: datetime | None = field(default=None)

    @property
    def is_active(self) -> bool:
        return self.state is SegmentState.ACTIVE

    @property
    def made_by_merge(self) -> bool:
        return len(self.parent_ids) > 1

    @property
    def descriptor(self) -> str:
        return descriptor(self.segment_id, self.hash_range)

    def sealed(self, child_ids: tuple[int, ...], epoch: int, at: datetime) -> SegmentInfo:
        return replace(
            self,
            state=SegmentState.SEALED,
            child_ids=child_ids,
            sealed_at_epoch=epoch,
            sealed_at=at,
        )

    def to_status(self) -> dict[str, Any]:
        entry: dict[str, Any] = {
            "id": self.segment_id,
            "hashRange": {"start": self.hash_range.start, "end": self.hash_range.end},
            "state": self.state.value,
            "parentIds": list(self.parent_ids),
            "childIds": list(self.child_ids),
            "createdAtEpoch": self.created_at_epoch,
            "sealedAtEpoch": self.sealed_at_epoch,
            "createdAt": format_time(self.created_at),
        }
        if self.sealed_at is not None:
            entry["sealedAt"] = format_time(self.sealed_at)
        return entry

    @classmethod
    def from_status(cls, entry: dict[str, Any]) -> SegmentInfo:
        try:
            sealed_at = entry.get("sealedAt")
            return cls(
                segment_id=int(entry["id"]),
                hash_range=HashRange(
                    int(entry["hashRange"]["start"]), int(entry["hashRange"]["end"])
                ),
                state=SegmentState(entry["state"]),
                created_at_epoch=int(entry["createdAtEpoch"]),
                created_at=parse_time(entry["createdAt"]),
                parent_ids=tuple(int(p) for p in entry.get("parentIds", ())),
                child_ids=tuple(int(c) for c in entry.get("childIds", ())),
                sealed_at_epoch=int(entry.get("sealedAtEpoch", 0)),
                sealed_at=parse_time(sealed_at) if sealed_at is not None else None,
            )
        except (KeyError, TypeError, ValueError) as error:
            raise CorruptLayout(f"segment entry {entry!r} is malformed: {error}") from error
