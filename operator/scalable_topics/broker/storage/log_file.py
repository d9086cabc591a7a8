"""One data file of a segment log: its records, its metadata, its recovery and its reads.

Files are named by their first entry id, zero-padded to 20 digits: ``00000000000000000042.log``
and its index ``00000000000000000042.index``. A data file is a sequence of frames (see
record_file) whose payload is a log record, little-endian::

    u64 entry id, i64 timestamp in ms, then the producer's bytes

Storing the entry id in each record lets every read check that the record is the one it wants.
Functions here block; the segment log calls them on worker threads.
"""

from __future__ import annotations

import bisect
import logging
import os
import struct
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from .durable_fs import write_file_atomically
from .errors import StorageCorrupted
from .log_index import IndexPoint, decode_points, encode_points, needs_point
from .record_file import FrameScan, ScanStop, encode_frame

DATA_SUFFIX = ".log"
INDEX_SUFFIX = ".index"
RECORD_HEADER = struct.Struct("<Qq")

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class LogEntry:
    entry_id: int
    timestamp_ms: int
    payload: bytes


def data_file_name(first_entry_id: int) -> str:
    return f"{first_entry_id:020d}{DATA_SUFFIX}"


def index_file_name(first_entry_id: int) -> str:
    return f"{first_entry_id:020d}{INDEX_SUFFIX}"


def parse_file_name(name: str, suffix: str) -> int | None:
    """The first entry id a file name stands for, or None for a name that is not ours."""
    stem = name.removesuffix(suffix)
    if stem == name or len(stem) != 20 or not stem.isdigit():
        return None
    return int(stem)


def encode_record(entry_id: int, timestamp_ms: int, payload: bytes) -> bytes:
    return encode_frame(RECORD_HEADER.pack(entry_id, timestamp_ms) + payload)


def record_size(payload_size: int) -> int:
    return len(encode_frame(b"")) + RECORD_HEADER.size + payload_size


@dataclass(slots=True)
class LogFile:
    """What the segment log knows about one data file. Owned by the event loop; the writer
    thread reports its changes and the loop applies them (see log_writer)."""

    directory: Path
    first_entry_id: int
    points: list[IndexPoint] = field(default_factory=list)
    last_entry_id: int = -1
    last_timestamp_ms: int | None = None
    size: int = 0  # bytes of durable, readable records

    def __post_init__(self) -> None:
        if self.last_entry_id < self.first_entry_id:
            self.last_entry_id = self.first_entry_id - 1

    @property
    def path(self) -> Path:
        return self.directory / data_file_name(self.first_entry_id)

    @property
    def index_path(self) -> Path:
        return self.directory / index_file_name(self.first_entry_id)

    @property
    def entry_count(self) -> int:
        return self.last_entry_id - self.first_entry_id + 1

    def point_at_or_before(self, entry_id: int) -> IndexPoint:
        """Where a scan for ``entry_id`` (an entry of this file) starts."""
        at = bisect.bisect_right(self.points, entry_id, key=lambda p: p.entry_id)
        return self.points[at - 1]

    def point_before_time(self, timestamp_ms: int) -> IndexPoint:
        """Where a scan for the first entry at or after ``timestamp_ms`` starts: the last point
        earlier than it (or the file start), as timestamps never decrease."""
        at = bisect.bisect_left(self.points, timestamp_ms, key=lambda p: p.timestamp_ms)
        return self.points[max(at - 1, 0)]


def iter_entries(fd: int, start: IndexPoint, limit: int, where: Path) -> Iterator[LogEntry]:
    """The records from ``start`` up to byte ``limit``, which must all be intact: this reads data
    that was acknowledged, so a damaged record is corruption, not a torn tail."""
    scan = FrameScan.of_file(fd, start.offset, limit)
    expected = start.entry_id
    for frame in scan:
        entry = _decode_record(frame.payload, frame.offset, where)
        if entry.entry_id != expected:
            raise StorageCorrupted(
                f"{where} holds entry {entry.entry_id} at offset {frame.offset} "
                f"where entry {expected} belongs"
            )
        yield entry
        expected += 1
    if scan.stop is not ScanStop.END:
        raise StorageCorrupted(f"{where} is damaged: {scan.reason}")


def read_entries(
    file: LogFile,
    start: IndexPoint,
    limit: int,
    from_entry_id: int,
    max_entries: int,
    max_bytes: int,
    *,
    at_least_one: bool,
) -> list[LogEntry]:
    """Up to ``max_entries`` entries from ``from_entry_id`` whose payloads total at most
    ``max_bytes``; ``at_least_one`` takes the first entry whatever its size, so that a big
    record cannot stall its reader."""
    entries: list[LogEntry] = []
    total = 0
    fd = os.open(file.path, os.O_RDONLY)
    try:
        for entry in iter_entries(fd, start, limit, file.path):
            if entry.entry_id < from_entry_id:
                continue
            total += len(entry.payload)
            if total > max_bytes and (entries or not at_least_one):
                break
            entries.append(entry)
            if len(entries) >= max_entries:
                break
    finally:
        os.close(fd)
    return entries


def find_time_in_file(
    file: LogFile, start: IndexPoint, limit: int, timestamp_ms: int
) -> int | None:
    """The first entry of the file from ``start`` whose timestamp is at least ``timestamp_ms``."""
    fd = os.open(file.path, os.O_RDONLY)
    try:
        for entry in iter_entries(fd, start, limit, file.path):
            if entry.timestamp_ms >= timestamp_ms:
                return entry.entry_id
    finally:
        os.close(fd)
    return None


def _decode_record(payload: bytes, offset: int, where: Path) -> LogEntry:
    if len(payload) < RECORD_HEADER.size:
        raise StorageCorrupted(f"{where} has a frame too short for a log record at {offset}")
    entry_id, timestamp_ms = RECORD_HEADER.unpack_from(payload)
    return LogEntry(entry_id, timestamp_ms, payload[RECORD_HEADER.size :])


@dataclass(frozen=True, slots=True)
class Recovered:
    file: LogFile
    dropped_bytes: int  # torn or damaged tail cut off the last file


def recover_file(
    directory: Path, first_entry_id: int, *, is_last: bool, index_interval: int
) -> Recovered:
    """Load one data file and its index after a restart or crash.

    The scan starts at the last index point (points name synced data, so everything before
    them is intact) and checks every record to the end, rebuilding missing points. A damaged or
    incomplete record ends the scan. In the last file that is the tail of writes a crash
    interrupted (never acknowledged under the fsync-per-batch policy): it is cut off. In an
    earlier file, which was synced in full before the next one was created, it is corruption.
    """
    file = LogFile(directory, first_entry_id)
    fd = os.open(file.path, os.O_RDWR)
    try:
        data_size = os.fstat(fd).st_size
        try:
            index_data = file.index_path.read_bytes()
        except FileNotFoundError:
            index_data = b""
        loaded = decode_points(index_data, first_entry_id, data_size)
        while True:
            start = loaded[-1] if loaded else IndexPoint(first_entry_id, 0, 0)
            scan = _RecordScan(fd, start, data_size, file.path)
            if scan.run(loaded, index_interval) or not loaded:
                break
            if not is_last:
                raise StorageCorrupted(f"{file.path}: index point {start} names no record")
            loaded.pop()  # a point written before its data reached the disk: step back
        file.points = scan.points
        file.last_entry_id = scan.next_entry_id - 1
        file.last_timestamp_ms = scan.last_timestamp_ms
        file.size = scan.frames.end
        dropped = data_size - file.size
        if dropped:
            if not is_last:
                raise StorageCorrupted(
                    f"{file.path} is damaged at offset {file.size}: {scan.frames.reason}"
                )
            log.warning(
                "%s: cut off %d bytes of torn or damaged tail at offset %d (%s)",
                file.path,
                dropped,
                file.size,
                scan.frames.reason,
            )
            os.ftruncate(fd, file.size)
            os.fsync(fd)
    finally:
        os.close(fd)
    if index_data != encode_points(file.points):
        write_file_atomically(file.index_path, encode_points(file.points))
    return Recovered(file, dropped)


class _RecordScan:
    """Checks the records from an index point to the end, noting where points belong."""

    def __init__(self, fd: int, start: IndexPoint, limit: int, where: Path) -> None:
        self.frames = FrameScan.of_file(fd, start.offset, limit)
        self.start = start
        self.where = where
        self.next_entry_id = start.entry_id
        self.last_timestamp_ms: int | None = None
        self.points: list[IndexPoint] = []

    def run(self, loaded: list[IndexPoint], index_interval: int) -> int:
        """Scan; return how many records were found."""
        self.points = list(loaded)
        found = 0
        for frame in self.frames:
            try:
                entry = _decode_record(frame.payload, frame.offset, self.where)
            except StorageCorrupted as error:
                self.frames.end, self.frames.reason = frame.offset, str(error)
                break
            if entry.entry_id != self.next_entry_id:
                raise StorageCorrupted(
                    f"{self.where} holds entry {entry.entry_id} at offset {frame.offset} "
                    f"where entry {self.next_entry_id} belongs"
                )
            last = self.points[-1] if self.points else None
            if needs_point(frame.offset, last, index_interval):  # never the start point again
                self.points.append(IndexPoint(entry.entry_id, frame.offset, entry.timestamp_ms))
            self.next_entry_id += 1
            self.last_timestamp_ms = entry.timestamp_ms
            found += 1
        return found
