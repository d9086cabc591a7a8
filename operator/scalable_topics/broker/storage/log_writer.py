"""The writer of a segment log's active file, run on one worker thread at a time.

It frames a batch of records, writes it with one write(), syncs according to the policy, and
rolls to a new file when asked (once the active one has reached its size). It never touches the event loop's
view of the files: it reports what changed (``WriteOutcome``) and the loop applies it, so the
loop only ever shows durable records.

Ordering that recovery relies on: index points are appended to the index file only after the
data they name is synced (or right after the write under SyncMode.NONE, which promises nothing
on power loss), and a file is synced in full, with its index, before the next file exists.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from . import durable_fs
from .log_file import LogFile, encode_record
from .log_index import IndexPoint, encode_points, needs_point
from .record_file import AppendFile
from .sync_policy import SyncMode, SyncPolicy


@dataclass(frozen=True, slots=True)
class PendingRecord:
    entry_id: int
    timestamp_ms: int
    payload: bytes


@dataclass(frozen=True, slots=True)
class WriteOutcome:
    """What a batch changed in the active file."""

    size: int
    points: list[IndexPoint]
    last_entry_id: int
    last_timestamp_ms: int


class LogWriter:
    def __init__(
        self, file: LogFile, *, policy: SyncPolicy, index_interval: int, file_bytes: int
    ) -> None:
        self._policy = policy
        self._index_interval = index_interval
        self._file_bytes = file_bytes
        self._open(file, exclusive=False)

    def _open(self, file: LogFile, *, exclusive: bool) -> None:
        self._directory = file.directory
        self._data = AppendFile(file.path, exclusive=exclusive)
        try:
            self._index = AppendFile(file.index_path, exclusive=exclusive)
        except BaseException:
            self._data.close()
            raise
        self._last_point = file.points[-1] if file.points else None
        self._unpersisted_points: list[IndexPoint] = []
        self._last_sync = time.monotonic()

    @property
    def dirty(self) -> bool:
        return self._data.dirty

    @property
    def seconds_since_sync(self) -> float:
        return time.monotonic() - self._last_sync

    def write(self, records: list[PendingRecord]) -> WriteOutcome:
        frames: list[bytes] = []
        points: list[IndexPoint] = []
        offset = self._data.size
        for record in records:
            if needs_point(offset, self._last_point, self._index_interval):
                self._last_point = IndexPoint(record.entry_id, offset, record.timestamp_ms)
                points.append(self._last_point)
            frame = encode_record(record.entry_id, record.timestamp_ms, record.payload)
            frames.append(frame)
            offset += len(frame)
        self._data.append(b"".join(frames))
        self._unpersisted_points += points
        mode = self._policy.mode
        if mode is SyncMode.BATCH or (
            mode is SyncMode.INTERVAL and self.seconds_since_sync >= self._policy.interval_seconds
        ):
            self.sync()
        elif mode is SyncMode.NONE:
            self._persist_points()
        last = records[-1]
        return WriteOutcome(self._data.size, points, last.entry_id, last.timestamp_ms)

    @property
    def full(self) -> bool:
        return self._data.size >= self._file_bytes

    def sync(self) -> None:
        """Make everything written durable, then record its index points."""
        self._data.sync()
        self._persist_points()
        self._last_sync = time.monotonic()

    def _persist_points(self) -> None:
        if self._unpersisted_points:
            self._index.append(encode_points(self._unpersisted_points))
            self._unpersisted_points = []

    def roll(self, next_entry_id: int) -> LogFile:
        """Finish the active file (synced in full, with its index) and start the next one."""
        self.sync()
        self._index.sync()
        self.close()
        new_file = LogFile(self._directory, next_entry_id)
        self._open(new_file, exclusive=True)
        durable_fs.sync_directory(self._directory)
        return new_file

    def close(self) -> None:
        self._data.close()
        self._index.close()
