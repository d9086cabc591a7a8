"""A segment log's directory as a whole: recovery on open, the seal, trimming, deletion.

The seal is the file ``sealed``: one frame (record_file) whose payload is the msgpack map
``{"lastEntryId": n}``, replaced atomically (temporary file, fsync, rename, fsync of the
directory) after the data it covers is synced. Opening checks it against the files.

Everything here blocks; the segment log calls it on worker threads.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path

import msgpack

from . import durable_fs
from .errors import StorageCorrupted
from .log_file import DATA_SUFFIX, INDEX_SUFFIX, LogFile, parse_file_name, recover_file
from .log_writer import LogWriter
from .record_file import FrameScan, ScanStop, encode_frame
from .sync_policy import SyncPolicy

SEAL_FILE = "sealed"
LOCK_FILE = "log.lock"


@dataclass(frozen=True, slots=True)
class Opened:
    """A recovered log directory, locked, with the writer of its last file."""

    lock: durable_fs.DirectoryLock | durable_fs.LockedByOwner
    files: list[LogFile]
    writer: LogWriter
    sealed_at: int | None
    dropped_bytes: int


def release(opened: Opened) -> None:
    opened.writer.close()
    opened.lock.release()


def recover(
    directory: Path,
    policy: SyncPolicy,
    index_interval: int,
    file_bytes: int,
    locked_by_owner: bool = False,
) -> Opened:
    """Create or lock the directory (unless its owner holds a lock over it), recover its files
    (log_file.recover_file), check that they continue one another and match the seal, and open
    the writer of the last one."""
    durable_fs.make_directory(directory)
    lock = durable_fs.lock_directory(directory, LOCK_FILE, locked_by_owner)
    try:
        files, dropped = _recover_files(directory, index_interval)
        sealed_at = _read_seal(directory)
        last_entry_id = files[-1].last_entry_id
        if sealed_at is not None and sealed_at != last_entry_id:
            raise StorageCorrupted(
                f"segment log {directory} was sealed at entry {sealed_at} "
                f"but its files end at entry {last_entry_id}"
            )
        writer = LogWriter(
            files[-1], policy=policy, index_interval=index_interval, file_bytes=file_bytes
        )
        try:
            writer.sync()  # what the last process wrote is durable before anyone reads it
        except BaseException:
            writer.close()
            raise
    except BaseException:
        lock.release()
        raise
    return Opened(lock, files, writer, sealed_at, dropped)


def _recover_files(directory: Path, index_interval: int) -> tuple[list[LogFile], int]:
    names = os.listdir(directory)
    first_ids = sorted(i for n in names if (i := parse_file_name(n, DATA_SUFFIX)) is not None)
    for name in names:
        index_of = parse_file_name(name, INDEX_SUFFIX)
        if (index_of is not None and index_of not in first_ids) or name.endswith(".tmp"):
            os.unlink(directory / name)  # left by a crash in trim or in an atomic write
    if not first_ids:
        first = LogFile(directory, 0)
        for path in (first.path, first.index_path):
            os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644))
        durable_fs.sync_directory(directory)
        return [first], 0
    files: list[LogFile] = []
    dropped = 0
    for number, first_id in enumerate(first_ids):
        is_last = number == len(first_ids) - 1
        recovered = recover_file(
            directory, first_id, is_last=is_last, index_interval=index_interval
        )
        file = recovered.file
        dropped += recovered.dropped_bytes
        if files and file.first_entry_id != files[-1].last_entry_id + 1:
            raise StorageCorrupted(
                f"segment log {directory} is missing entries {files[-1].last_entry_id + 1} to "
                f"{file.first_entry_id - 1}, between {files[-1].path.name} and {file.path.name}"
            )
        if not is_last and file.entry_count == 0:
            raise StorageCorrupted(f"{file.path} is empty but is not the last file of the log")
        files.append(file)
    return files, dropped


def write_seal(directory: Path, writer: LogWriter, last_entry_id: int) -> None:
    writer.sync()  # the sealed data is durable before the seal says it is complete
    body = msgpack.packb({"lastEntryId": last_entry_id})
    durable_fs.write_file_atomically(directory / SEAL_FILE, encode_frame(body))


def _read_seal(directory: Path) -> int | None:
    try:
        data = (directory / SEAL_FILE).read_bytes()
    except FileNotFoundError:
        return None
    scan = FrameScan.of_bytes(data)
    frames = list(scan)
    try:
        (frame,) = frames
        last_entry_id = msgpack.unpackb(frame.payload)["lastEntryId"]
    except (ValueError, TypeError, KeyError, msgpack.UnpackException):
        last_entry_id = None
    if scan.stop is not ScanStop.END or not isinstance(last_entry_id, int):
        raise StorageCorrupted(f"the seal of segment log {directory} is damaged")
    return last_entry_id


def remove_files(directory: Path, files: list[LogFile]) -> None:
    """Oldest first, each one durably, so a crash leaves a log that starts later, never a gap."""
    for file in files:
        file.path.unlink()
        file.index_path.unlink(missing_ok=True)
        durable_fs.sync_directory(directory)


def remove_directory(directory: Path) -> None:
    """Rename first, so that a crash leaves no half-deleted log where the log was."""
    doomed = directory.with_name(f".{directory.name}.deleting")
    if doomed.exists():
        shutil.rmtree(doomed)
    os.replace(directory, doomed)
    durable_fs.sync_directory(directory.parent)
    shutil.rmtree(doomed)
