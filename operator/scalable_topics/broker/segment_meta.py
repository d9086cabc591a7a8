"""What a broker keeps about one hosted segment besides its log and cursors.

A small JSON file, replaced atomically (write, fsync, rename, fsync the directory) so that a
crash leaves either the old or the new version: the segment's identity, its parents, the
producer epoch (which must survive restarts so that a fenced producer stays fenced), the
topic-wide exclusive holder the segment is reserved for (likewise) and a
snapshot of the deduplication marks with the entry it is valid up to.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, Self

from ..model.hash_range import HashRange
from ..model.segment import descriptor
from .storage.durable_fs import write_file_atomically

META_FILE = "segment.json"


class CorruptSegmentMeta(ValueError):
    pass


@dataclass(frozen=True, slots=True)
class SegmentMeta:
    namespace: str
    topic: str
    segment_id: int
    start: int
    end: int
    parents: tuple[int, ...] = ()
    producer_epoch: int = 0
    reserved_for: str | None = None  # the topic-wide exclusive holder, at producer_epoch
    dedup: dict[str, int] = field(default_factory=dict)  # producer name -> highest sequence id
    dedup_through_entry: int = -1
    retention_max_size_bytes: int | None = None
    retention_max_age_seconds: int | None = None

    @property
    def hash_range(self) -> HashRange:
        return HashRange(self.start, self.end)

    @property
    def descriptor(self) -> str:
        return descriptor(self.segment_id, self.hash_range)

    def with_changes(self, **changes: Any) -> Self:
        return replace(self, **changes)

    def to_json(self) -> str:
        data = asdict(self)
        data["parents"] = list(self.parents)
        return json.dumps(data, sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> SegmentMeta:
        try:
            data = json.loads(text)
            data["parents"] = tuple(data.get("parents", ()))
            meta = cls(**data)
            HashRange(meta.start, meta.end)
        except (ValueError, TypeError, KeyError) as error:
            raise CorruptSegmentMeta(f"segment metadata is unreadable: {error}") from error
        return meta


async def save_meta(directory: Path, meta: SegmentMeta) -> None:
    await asyncio.to_thread(write_file_atomically, directory / META_FILE, meta.to_json().encode())


def load_meta(directory: Path) -> SegmentMeta:
    path = directory / META_FILE
    try:
        return SegmentMeta.from_json(path.read_text(encoding="utf-8"))
    except FileNotFoundError as error:
        raise CorruptSegmentMeta(f"{path.name} is missing in a segment directory") from error
