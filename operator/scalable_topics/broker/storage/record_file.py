"""Framing shared by the segment log and the cursor journal, and the append-only file under it.

A frame is a 10-byte header and an opaque payload, all integers little-endian::

    offset 0  u8   magic 0xA7
    offset 1  u8   format version, 1
    offset 2  u32  payload length
    offset 6  u32  CRC32C (Castagnoli) of bytes 0..5 of the header followed by the payload
    offset 10      payload

A reader stops at the first frame that is incomplete (a torn write at the end of the file) or
that fails a check (magic, version, length, CRC: damage, or garbage such as the zeros a crash
can leave in a file's last block). Everything before that frame is intact; the owner decides
whether the rest is a torn tail to cut off or damage to report.

Everything here blocks; the async owners call it on worker threads.
"""

from __future__ import annotations

import enum
import os
import struct
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from crc32c import crc32c

from . import durable_fs

MAGIC = 0xA7
VERSION = 1
HEADER = struct.Struct("<BBII")
_CHECKED_PREFIX = 6  # magic, version and length are covered by the CRC
# A sanity bound for scans: a longer length field is damage, and must not make us allocate it.
MAX_SCAN_PAYLOAD = 1 << 30
_READ_CHUNK = 1 << 20


def encode_frame(payload: bytes) -> bytes:
    prefix = HEADER.pack(MAGIC, VERSION, len(payload), 0)[:_CHECKED_PREFIX]
    checksum = crc32c(payload, crc32c(prefix))
    return prefix + checksum.to_bytes(4, "little") + payload


def frame_size(payload_size: int) -> int:
    return HEADER.size + payload_size


class ScanStop(enum.Enum):
    END = "end"  # the scan reached its limit on a frame boundary
    TORN = "torn"  # the data ends inside a frame
    CORRUPT = "corrupt"  # a frame fails a check


@dataclass(frozen=True, slots=True)
class Frame:
    offset: int
    payload: bytes

    @property
    def end(self) -> int:
        return self.offset + frame_size(len(self.payload))


ReadAt = Callable[[int, int], bytes]  # (offset, size) -> at most size bytes


class FrameScan:
    """Iterates over the frames between ``start`` and ``limit``; afterwards ``end`` is the offset
    just past the last good frame and ``stop``/``reason`` say why the scan ended."""

    def __init__(self, read_at: ReadAt, start: int, limit: int) -> None:
        self._read_at = read_at
        self.start = start
        self.limit = limit
        self.end = start
        self.stop: ScanStop | None = None
        self.reason = ""

    @classmethod
    def of_file(cls, fd: int, start: int, limit: int | None = None) -> FrameScan:
        """Scan the file open at ``fd`` up to ``limit`` (its current size when None)."""
        size = os.fstat(fd).st_size if limit is None else limit
        return cls(lambda offset, count: _pread_fully(fd, count, offset), start, size)

    @classmethod
    def of_bytes(cls, data: bytes, start: int = 0) -> FrameScan:
        view = memoryview(data)
        return cls(lambda offset, count: bytes(view[offset : offset + count]), start, len(data))

    def __iter__(self) -> Iterator[Frame]:
        buffer, buffer_start = b"", self.start
        position = self.start
        while position < self.limit:
            at = position - buffer_start
            if len(buffer) - at < HEADER.size:
                buffer, buffer_start, at = self._fill(position, HEADER.size), position, 0
                if len(buffer) < HEADER.size:
                    return self._stopped(ScanStop.TORN, f"incomplete frame header at {position}")
            magic, version, length, checksum = HEADER.unpack_from(buffer, at)
            if magic != MAGIC or version != VERSION:
                return self._stopped(ScanStop.CORRUPT, f"no frame header at offset {position}")
            if length > MAX_SCAN_PAYLOAD:
                return self._stopped(ScanStop.CORRUPT, f"impossible length {length} at {position}")
            size = frame_size(length)
            if len(buffer) - at < size:
                buffer, buffer_start, at = self._fill(position, size), position, 0
                if len(buffer) < size:
                    return self._stopped(ScanStop.TORN, f"incomplete frame at offset {position}")
            view = memoryview(buffer)
            payload = view[at + HEADER.size : at + size]
            if crc32c(payload, crc32c(view[at : at + _CHECKED_PREFIX])) != checksum:
                return self._stopped(ScanStop.CORRUPT, f"checksum mismatch at offset {position}")
            yield Frame(position, bytes(payload))
            position += size
            self.end = position
        self.stop = ScanStop.END

    def _fill(self, position: int, needed: int) -> bytes:
        return self._read_at(position, min(max(needed, _READ_CHUNK), self.limit - position))

    def _stopped(self, stop: ScanStop, reason: str) -> None:
        self.stop, self.reason = stop, reason


def _pread_fully(fd: int, count: int, offset: int) -> bytes:
    chunks: list[bytes] = []
    while count > 0:
        chunk = os.pread(fd, count, offset)
        if not chunk:
            break
        chunks.append(chunk)
        count -= len(chunk)
        offset += len(chunk)
    return b"".join(chunks)


class AppendFile:
    """A file written only at its end. Not thread-safe: one worker thread at a time owns it."""

    def __init__(self, path: Path, *, exclusive: bool) -> None:
        """Open ``path`` for appending, creating it if missing; ``exclusive``: it must not exist."""
        flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | (os.O_EXCL if exclusive else 0)
        self.path = path
        self._fd = os.open(path, flags, 0o644)
        self.size = os.fstat(self._fd).st_size
        # What an earlier process wrote may not be on disk yet: the first sync covers it.
        self.synced_size = 0
        self.sync_count = 0

    @property
    def dirty(self) -> bool:
        return self.synced_size < self.size

    def append(self, data: bytes) -> None:
        durable_fs.write_all(self._fd, data)
        self.size += len(data)

    def sync(self) -> None:
        if self.dirty:
            durable_fs.flush_to_disk(self._fd)
            self.synced_size = self.size
            self.sync_count += 1

    def truncate(self, size: int) -> None:
        """Cut the file to ``size`` bytes, durably."""
        os.ftruncate(self._fd, size)
        durable_fs.flush_to_disk(self._fd)
        self.size = self.synced_size = size

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
