"""The sparse index of one log file: every few KiB, where an entry starts and its timestamp.

An index file holds 28-byte points, little-endian: u64 entry id, u64 byte offset of the entry's
frame in the data file, i64 timestamp in ms, u32 CRC32C of the first 24 bytes. The first record
of a data file always has a point, and a record gets one when it starts ``interval`` bytes or more
after the previous point. Points are written only once the data they point at is synced (see
log_writer), so a point read back names durable data; the index is derived data, and recovery
rebuilds what is missing by scanning.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from crc32c import crc32c

POINT = struct.Struct("<QQqI")
_CHECKED = 24


@dataclass(frozen=True, slots=True)
class IndexPoint:
    entry_id: int
    offset: int
    timestamp_ms: int


def needs_point(offset: int, last: IndexPoint | None, interval: int) -> bool:
    return last is None or offset - last.offset >= interval


def encode_points(points: list[IndexPoint]) -> bytes:
    out = bytearray()
    for point in points:
        body = POINT.pack(point.entry_id, point.offset, point.timestamp_ms, 0)[:_CHECKED]
        out += body + crc32c(body).to_bytes(4, "little")
    return bytes(out)


def decode_points(data: bytes, first_entry_id: int, data_size: int) -> list[IndexPoint]:
    """The valid prefix of an index file: points stop at the first damaged one, one that does
    not move forward, or one beyond the data (index pages can reach the disk before data pages
    when the data was never synced)."""
    points: list[IndexPoint] = []
    view = memoryview(data)
    for at in range(0, len(data) - POINT.size + 1, POINT.size):
        entry_id, offset, timestamp_ms, checksum = POINT.unpack_from(data, at)
        if crc32c(view[at : at + _CHECKED]) != checksum or offset >= data_size:
            break
        if points:
            last = points[-1]
            if (
                entry_id <= last.entry_id
                or offset <= last.offset
                or timestamp_ms < last.timestamp_ms
            ):
                break
        elif (entry_id, offset) != (first_entry_id, 0):
            break
        points.append(IndexPoint(entry_id, offset, timestamp_ms))
    return points
