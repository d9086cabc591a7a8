"""The broker's durable storage: segment logs and subscription cursors on local disk.

``SegmentLog`` stores a segment's records, ``CursorStore`` the acknowledgement state
(``CursorState``) of its subscriptions. Both group commits behind fsync, recover from a crash at
any point, and own one directory each.
"""

from ...model.cursor_state import CorruptCursorState, CursorState
from .cursor_store import CursorStore
from .errors import (
    EntryTrimmed,
    RecordTooLarge,
    SegmentTerminated,
    StorageClosed,
    StorageCorrupted,
    StorageError,
    StorageFailed,
    StorageLocked,
)
from .log_file import LogEntry
from .segment_log import LogFileInfo, SegmentLog
from .sync_policy import SyncMode, SyncPolicy

__all__ = [
    "CorruptCursorState",
    "CursorState",
    "CursorStore",
    "EntryTrimmed",
    "LogEntry",
    "LogFileInfo",
    "RecordTooLarge",
    "SegmentLog",
    "SegmentTerminated",
    "StorageClosed",
    "StorageCorrupted",
    "StorageError",
    "StorageFailed",
    "StorageLocked",
    "SyncMode",
    "SyncPolicy",
]
