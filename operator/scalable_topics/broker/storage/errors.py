"""Errors of the broker's storage: each names the directory or entry and the reason."""

from __future__ import annotations

from pathlib import Path


class StorageError(Exception):
    """Base of every storage error."""


class StorageClosed(StorageError):
    """The log or cursor store was closed or deleted; open it again to use it."""


class StorageFailed(StorageError):
    """An earlier write or fsync failed. The instance refuses every further write, because after
    a failed fsync the kernel may have dropped the dirty pages it could not write: retrying could
    report data durable that is not. Reopening recovers what reached the disk."""


class StorageCorrupted(StorageError):
    """The files on disk break an invariant that a crash cannot explain (a gap between log files,
    a damaged record before the tail, a seal that does not match the data)."""


class StorageLocked(StorageError):
    """Another process or instance holds the directory."""

    def __init__(self, directory: Path) -> None:
        super().__init__(f"{directory} is in use by another storage instance")
        self.directory = directory


class SegmentTerminated(StorageError):
    """The segment is sealed: it takes no more appends."""

    def __init__(self, directory: Path, last_entry_id: int) -> None:
        super().__init__(
            f"segment log {directory} is terminated at entry {last_entry_id}; "
            "it takes no more appends"
        )
        self.directory = directory
        self.last_entry_id = last_entry_id


class RecordTooLarge(StorageError, ValueError):
    def __init__(self, size: int, limit: int) -> None:
        super().__init__(f"a record of {size} bytes exceeds the limit of {limit} bytes")
        self.size = size
        self.limit = limit


class EntryTrimmed(StorageError):
    """The entry was removed by retention."""

    def __init__(self, entry_id: int, first_entry_id: int) -> None:
        super().__init__(
            f"entry {entry_id} was trimmed by retention; the log starts at entry {first_entry_id}"
        )
        self.entry_id = entry_id
        self.first_entry_id = first_entry_id
