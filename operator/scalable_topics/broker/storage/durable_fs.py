"""File-system steps that make data durable, and the lock that gives a directory one owner.

``flush_to_disk`` is looked up on this module at each call, so a test can count or fail fsyncs
by replacing it.
"""

from __future__ import annotations

import asyncio
import fcntl
import os
import tempfile
from collections.abc import Callable
from concurrent.futures import Executor
from pathlib import Path
from typing import TypeVar

from .errors import StorageLocked

T = TypeVar("T")

_fdatasync = getattr(os, "fdatasync", os.fsync)  # fdatasync also persists a grown file size


def flush_to_disk(fd: int) -> None:
    """Make the data written to ``fd`` durable."""
    _fdatasync(fd)


def sync_directory(directory: Path) -> None:
    """Make creations, renames and removals of entries in ``directory`` durable."""
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def make_directory(directory: Path) -> None:
    """Create ``directory`` (and missing parents) durably; a no-op when it exists."""
    missing: list[Path] = []
    current = directory
    while not current.exists():
        missing.append(current)
        current = current.parent
    for path in reversed(missing):
        path.mkdir(exist_ok=True)
        sync_directory(path.parent)


def write_file_atomically(path: Path, data: bytes) -> None:
    """Replace ``path`` with ``data``: readers, and a crash at any point, see the old content or
    the new one, never a mix."""
    # A temporary name of its own, so that writers of one file never write into each other's
    # temporary file (the last rename wins whole); ".tmp" marks leftovers of a crash.
    fd, name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    temporary = Path(name)
    try:
        try:
            os.fchmod(fd, 0o644)
            write_all(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(temporary, path)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise
    sync_directory(path.parent)


def write_all(fd: int, data: bytes | memoryview) -> None:
    """os.write may write less than asked; loop until everything is written."""
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


class DirectoryLock:
    """An exclusive ``flock`` on a file in the directory, released on close or process death."""

    def __init__(self, directory: Path, name: str) -> None:
        self._fd = os.open(directory / name, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(self._fd)
            raise StorageLocked(directory) from None

    def release(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)  # closing the descriptor drops the flock
            self._fd = -1


class LockedByOwner:
    """In place of a DirectoryLock when the owner of a whole tree (a broker, over its data
    directory) holds one lock for all of it: a flock costs an open file for as long as it is
    held, and a broker hosts thousands of directories."""

    def release(self) -> None:
        pass


def lock_directory(
    directory: Path, name: str, locked_by_owner: bool
) -> DirectoryLock | LockedByOwner:
    return LockedByOwner() if locked_by_owner else DirectoryLock(directory, name)


async def run_opening(
    executor: Executor | None, opening: Callable[[], T], release: Callable[[T], None]
) -> T:
    """Run ``opening`` (which takes a directory lock) on a worker thread. If the caller is
    cancelled meanwhile, the thread still finishes: release what it opened then, so that the
    directory does not stay locked by an instance nobody holds."""
    future = asyncio.get_running_loop().run_in_executor(executor, opening)
    try:
        return await asyncio.shield(future)
    except asyncio.CancelledError:

        def release_when_done(done: asyncio.Future[T]) -> None:
            if not done.cancelled() and done.exception() is None:
                release(done.result())

        future.add_done_callback(release_when_done)
        raise
