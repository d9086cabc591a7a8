"""Framing: round trips, and damage at the tail never yields a bad record or loses a good one."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scalable_topics.broker.storage import durable_fs
from scalable_topics.broker.storage.record_file import (
    HEADER,
    AppendFile,
    FrameScan,
    ScanStop,
    encode_frame,
)

payload_lists = st.lists(st.binary(max_size=300), min_size=1, max_size=20)


def frames_of(payloads: list[bytes]) -> tuple[bytes, list[int]]:
    """The encoded frames and where each one starts."""
    data, starts = b"", []
    for payload in payloads:
        starts.append(len(data))
        data += encode_frame(payload)
    return data, starts


def scan(data: bytes) -> tuple[list[bytes], FrameScan]:
    scanner = FrameScan.of_bytes(data)
    return [frame.payload for frame in scanner], scanner


def test_header_layout_is_stable() -> None:
    frame = encode_frame(b"abc")
    assert len(frame) == HEADER.size + 3 == 13
    assert frame[0] == 0xA7
    assert frame[1] == 1
    assert int.from_bytes(frame[2:6], "little") == 3
    assert frame[10:] == b"abc"


@given(payload_lists)
def test_frames_round_trip(payloads: list[bytes]) -> None:
    data, _ = frames_of(payloads)
    read, scanner = scan(data)
    assert read == payloads
    assert (scanner.stop, scanner.end) == (ScanStop.END, len(data))


@given(payload_lists, st.data())
def test_a_truncated_tail_yields_exactly_the_complete_frames(
    payloads: list[bytes], data: st.DataObject
) -> None:
    encoded, starts = frames_of(payloads)
    cut = data.draw(st.integers(0, len(encoded)))
    read, scanner = scan(encoded[:cut])
    complete = [
        p for p, start in zip(payloads, starts, strict=True) if start + len(encode_frame(p)) <= cut
    ]
    assert read == complete
    assert scanner.end == sum(len(encode_frame(p)) for p in complete)
    assert scanner.stop is (ScanStop.END if scanner.end == cut else ScanStop.TORN)


@given(payload_lists, st.data())
def test_a_damaged_byte_stops_the_scan_at_its_frame(
    payloads: list[bytes], data: st.DataObject
) -> None:
    encoded, starts = frames_of(payloads)
    at = data.draw(st.integers(0, len(encoded) - 1))
    flip = data.draw(st.integers(1, 255))
    damaged = bytearray(encoded)
    damaged[at] ^= flip
    read, scanner = scan(bytes(damaged))
    hit = max(i for i, start in enumerate(starts) if start <= at)
    assert read == payloads[:hit]  # every frame before the damage, none from it on
    assert scanner.end == starts[hit]
    assert scanner.stop in (ScanStop.CORRUPT, ScanStop.TORN)


@given(payload_lists, st.binary(min_size=1, max_size=64))
def test_garbage_after_the_frames_is_not_read_as_a_frame(
    payloads: list[bytes], garbage: bytes
) -> None:
    encoded, _ = frames_of(payloads)
    read, scanner = scan(encoded + garbage)
    assert read == payloads
    assert scanner.end == len(encoded)
    assert scanner.stop in (ScanStop.CORRUPT, ScanStop.TORN)


def test_zeros_a_crash_leaves_in_the_last_block_stop_the_scan() -> None:
    encoded, _ = frames_of([b"one", b"two"])
    read, scanner = scan(encoded + bytes(4096))
    assert read == [b"one", b"two"]
    assert scanner.stop is ScanStop.CORRUPT
    assert "no frame header" in scanner.reason


def test_file_scan_crosses_read_chunks(tmp_path: Path) -> None:
    payloads = [os.urandom(n) for n in (10, 1_500_000, 3, 700_000, 1 << 20, 0)]
    path = tmp_path / "frames"
    path.write_bytes(b"".join(encode_frame(p) for p in payloads))
    fd = os.open(path, os.O_RDONLY)
    try:
        scanner = FrameScan.of_file(fd, 0)
        assert [f.payload for f in scanner] == payloads
        assert scanner.stop is ScanStop.END
        second = len(encode_frame(payloads[0]))
        assert [f.offset for f in FrameScan.of_file(fd, second, second + 10)] == []
    finally:
        os.close(fd)


def test_scan_bounded_by_limit_stops_cleanly(tmp_path: Path) -> None:
    encoded, starts = frames_of([b"a", b"bb", b"ccc"])
    path = tmp_path / "frames"
    path.write_bytes(encoded)
    fd = os.open(path, os.O_RDONLY)
    try:
        scanner = FrameScan.of_file(fd, starts[1], starts[2])
        assert [(f.offset, f.payload) for f in scanner] == [(starts[1], b"bb")]
        assert scanner.stop is ScanStop.END
    finally:
        os.close(fd)


def test_append_file_tracks_size_and_syncs_only_when_dirty(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    syncs: list[int] = []
    monkeypatch.setattr(durable_fs, "flush_to_disk", syncs.append)
    path = tmp_path / "file"
    appender = AppendFile(path, exclusive=True)
    appender.append(b"hello")
    assert appender.dirty
    appender.sync()
    appender.sync()
    appender.append(b" world")
    appender.sync()
    assert len(syncs) == 2
    appender.truncate(5)
    appender.close()
    assert path.read_bytes() == b"hello"
    with pytest.raises(FileExistsError):
        AppendFile(path, exclusive=True)
    reopened = AppendFile(path, exclusive=False)
    assert (reopened.size, reopened.dirty) == (5, True)  # an earlier writer's data: sync it
    reopened.close()


@settings(max_examples=25)
@given(st.binary(max_size=5000))
def test_write_all_writes_everything(data: bytes) -> None:
    read_end, write_end = os.pipe()
    try:
        durable_fs.write_all(write_end, data)
        os.close(write_end)
        write_end = -1
        received = b""
        while chunk := os.read(read_end, 65536):
            received += chunk
        assert received == data
    finally:
        os.close(read_end)
        if write_end >= 0:
            os.close(write_end)
