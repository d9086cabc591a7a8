"""CursorStore: the acknowledgement state of every subscription on one segment, crash-safe.

Layout. The store owns its directory: one journal ``cursors-<generation>.journal`` (generation
zero-padded to 10 digits) and ``cursors.lock``, whose flock keeps a second instance out. The
journal is a sequence of frames (record_file) whose payloads are msgpack arrays::

    ["save", subscription, state]     state: CursorState.to_dict()
    ["delete", subscription]

Replaying the journal in order gives every subscription's latest state.

Group commit. ``save`` and ``delete`` return once their record is fsynced. One writer task takes
everything queued, writes it with one write() and one fsync on a worker thread; requests that
arrive meanwhile form the next batch. Requests for a subscription that is already queued replace
its queued record, so a burst of saves of one cursor writes only the latest state, and every
caller returns once that state is durable.

Compaction. When the journal passes ``compact_bytes`` and is more than twice the size of the
live states, the writer writes the live states to ``cursors-<generation+1>.journal.tmp``, fsyncs
it, renames it into place, fsyncs the directory and removes the old journal. Opening uses the
highest generation (a renamed journal is always complete) and removes older ones and leftover
``.tmp`` files, so a crash at any step leaves either the old journal or the new one.

A torn tail (a write that a crash interrupted, never acknowledged) is cut off on open;
``dropped_bytes`` says how much. A write or fsync failure fails the request and every later one
(StorageFailed), as in the segment log.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import os
import shutil
from collections.abc import Callable
from concurrent.futures import Executor
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any, Self, TypeVar

import msgpack

from ...model.cursor_state import CorruptCursorState, CursorState
from . import durable_fs
from .errors import StorageClosed, StorageCorrupted, StorageFailed
from .record_file import AppendFile, FrameScan, encode_frame

T = TypeVar("T")

DEFAULT_COMPACT_BYTES = 4 * 1024 * 1024
LOCK_FILE = "cursors.lock"
_PREFIX, _SUFFIX = "cursors-", ".journal"

log = logging.getLogger(__name__)


def journal_name(generation: int) -> str:
    return f"{_PREFIX}{generation:010d}{_SUFFIX}"


def _generation_of(name: str) -> int | None:
    digits = name.removeprefix(_PREFIX).removesuffix(_SUFFIX)
    if len(digits) != 10 or not digits.isdigit() or name != journal_name(int(digits)):
        return None
    return int(digits)


@dataclass(slots=True)
class _Queued:
    record: bytes  # the journal record of the subscription's latest request
    is_save: bool
    futures: list[asyncio.Future[None]] = field(default_factory=list)


class CursorStore:
    """See the module docstring. Create with ``await CursorStore.open(directory)``."""

    def __init__(
        self,
        directory: Path,
        journal: _Journal,
        records: dict[str, bytes],
        *,
        compact_bytes: int,
        executor: Executor | None,
    ) -> None:
        self._directory = directory
        self._journal = journal
        self._compact_bytes = compact_bytes
        self._executor = executor
        self._durable = records  # subscription -> its save record, as in the journal
        self._live_bytes = sum(len(record) for record in records.values())
        self._latest = dict(records)  # the same, including queued requests
        self._queue: dict[str, _Queued] = {}
        self._wakeup = asyncio.Event()
        self._closing = False
        self._close_task: asyncio.Task[None] | None = None
        self._closed = False
        self._failure: BaseException | None = None
        self._writer_task = asyncio.create_task(self._run_writer(), name=f"cursors {directory}")

    @classmethod
    async def open(
        cls,
        directory: str | os.PathLike[str],
        *,
        compact_bytes: int = DEFAULT_COMPACT_BYTES,
        executor: Executor | None = None,
        locked_by_owner: bool = False,
    ) -> CursorStore:
        """Open the store in ``directory``, creating it if needed, and recover it after a crash.
        A journal record that is intact but does not hold a valid state raises
        StorageCorrupted. ``locked_by_owner``: as for SegmentLog.open."""
        if compact_bytes < 1:
            raise ValueError(f"compact_bytes must be positive, not {compact_bytes}")
        path = Path(directory)
        recover = functools.partial(_Journal.recover, path, locked_by_owner)
        journal, records = await durable_fs.run_opening(executor, recover, _release)
        return cls(path, journal, records, compact_bytes=compact_bytes, executor=executor)

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if not self._closed:
            await self.close()

    @property
    def directory(self) -> Path:
        return self._directory

    @property
    def dropped_bytes(self) -> int:
        """Bytes of torn tail that opening the store cut off the journal."""
        return self._journal.dropped_bytes

    @property
    def journal_bytes(self) -> int:
        return self._journal.size

    def subscriptions(self) -> list[str]:
        return sorted(self._latest)

    def load(self, subscription: str) -> CursorState | None:
        """The state last given to ``save`` (a fresh copy), or None."""
        record = self._latest.get(subscription)
        return None if record is None else _state_of(record)

    async def save(self, subscription: str, state: CursorState) -> None:
        """Store the state, durably before returning. The state is copied at the call: later
        changes to ``state`` are not part of this save."""
        self._check_writable(subscription)
        record = msgpack.packb(["save", subscription, state.to_dict()])
        self._latest[subscription] = record
        await self._submit(subscription, record, is_save=True)

    async def delete(self, subscription: str) -> None:
        """Forget the subscription, durably before returning; a no-op for an unknown one."""
        self._check_writable(subscription)
        if subscription not in self._latest:
            return
        del self._latest[subscription]
        await self._submit(subscription, msgpack.packb(["delete", subscription]), is_save=False)

    async def close(self) -> None:
        """Write what is queued and release the directory. Idempotent."""
        if self._close_task is None:
            self._closing = True
            self._wakeup.set()
            self._close_task = asyncio.create_task(self._close())
        await asyncio.shield(self._close_task)

    async def _close(self) -> None:
        await asyncio.shield(self._writer_task)
        await self._in_thread(self._journal.close)
        self._closed = True

    async def remove(self) -> None:
        """Close the store and remove its directory (when its segment is deleted)."""
        await self.close()
        await self._in_thread(shutil.rmtree, self._directory)

    def _check_writable(self, subscription: str) -> None:
        if not isinstance(subscription, str) or not subscription:
            raise ValueError(f"a subscription name is a non-empty string, not {subscription!r}")
        if self._closing:
            raise StorageClosed(f"cursor store {self._directory} is closed")
        if self._failure is not None:
            raise self._failed()

    async def _submit(self, subscription: str, record: bytes, *, is_save: bool) -> None:
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        queued = self._queue.setdefault(subscription, _Queued(record, is_save))
        queued.record, queued.is_save = record, is_save
        queued.futures.append(future)
        self._wakeup.set()
        await future

    async def _run_writer(self) -> None:
        while True:
            if not self._queue:
                if self._closing:
                    return
                await self._wakeup.wait()
                self._wakeup.clear()
                continue
            batch, self._queue = self._queue, {}
            try:
                await self._in_thread(self._journal.append, [q.record for q in batch.values()])
            except Exception as error:
                self._fail(error, batch)
                return
            for subscription, queued in batch.items():
                self._live_bytes -= len(self._durable.pop(subscription, b""))
                if queued.is_save:
                    self._durable[subscription] = queued.record
                    self._live_bytes += len(queued.record)
                for future in queued.futures:
                    if not future.done():
                        future.set_result(None)
            if self._should_compact():
                try:
                    await self._in_thread(self._journal.compact, list(self._durable.values()))
                except Exception as error:
                    self._fail(error, {})
                    return

    def _should_compact(self) -> bool:
        size = self._journal.size
        return size > self._compact_bytes and size > 2 * self._live_bytes

    def _fail(self, error: BaseException, batch: dict[str, _Queued]) -> None:
        log.error(
            "cursor store %s: a write failed, refusing further writes: %s", self._directory, error
        )
        self._failure = error
        for queued in [*batch.values(), *self._queue.values()]:
            for future in queued.futures:
                if not future.done():
                    future.set_exception(self._failed())
                    future.exception()  # retrieved: its caller may have stopped waiting
        self._queue = {}

    def _failed(self) -> StorageFailed:
        failure = StorageFailed(
            f"cursor store {self._directory} lost a write ({self._failure}) and refuses further "
            "writes; reopen it to recover what reached the disk"
        )
        failure.__cause__ = self._failure
        return failure

    async def _in_thread(self, function: Callable[..., T], *args: Any) -> T:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._executor, functools.partial(function, *args))


def _release(opened: tuple[_Journal, dict[str, bytes]]) -> None:
    opened[0].close()


def _state_of(record: bytes) -> CursorState:
    return CursorState.from_dict(msgpack.unpackb(record)[2])


class _Journal:
    """The journal file, used by one worker thread at a time."""

    def __init__(
        self,
        directory: Path,
        generation: int,
        lock: durable_fs.DirectoryLock | durable_fs.LockedByOwner,
    ) -> None:
        self._directory = directory
        self._generation = generation
        self._lock = lock
        self._file = AppendFile(directory / journal_name(generation), exclusive=False)
        self.dropped_bytes = 0

    @property
    def size(self) -> int:
        return self._file.size

    @classmethod
    def recover(
        cls, directory: Path, locked_by_owner: bool = False
    ) -> tuple[_Journal, dict[str, bytes]]:
        durable_fs.make_directory(directory)
        lock = durable_fs.lock_directory(directory, LOCK_FILE, locked_by_owner)
        try:
            names = os.listdir(directory)
            generations = [g for n in names if (g := _generation_of(n)) is not None]
            newest = max(generations, default=None)
            for name in names:
                # Left by a crash during compaction: an unfinished or a superseded journal.
                if name.endswith(".tmp") or _generation_of(name) not in (None, newest):
                    os.unlink(directory / name)
            generation = 1 if newest is None else newest
            path = directory / journal_name(generation)
            records, valid_end, size = _replay(path)
            journal = cls(directory, generation, lock)
        except BaseException:
            lock.release()
            raise
        try:
            durable_fs.sync_directory(directory)  # creations and removals above
            if valid_end < size:
                journal.dropped_bytes = size - valid_end
                log.warning("%s: cut off %d bytes of torn tail", path, size - valid_end)
                journal._file.truncate(valid_end)
            journal._file.sync()  # what the last process wrote is durable before it is used
        except BaseException:
            journal.close()
            raise
        return journal, records

    def append(self, records: list[bytes]) -> None:
        self._file.append(b"".join(encode_frame(record) for record in records))
        self._file.sync()

    def compact(self, records: list[bytes]) -> None:
        generation = self._generation + 1
        final = self._directory / journal_name(generation)
        temporary = final.with_name(final.name + ".tmp")
        new_file = AppendFile(temporary, exclusive=True)
        try:
            new_file.append(b"".join(encode_frame(record) for record in records))
            new_file.sync()
        finally:
            new_file.close()
        os.replace(temporary, final)
        durable_fs.sync_directory(self._directory)
        old = self._file
        self._file = AppendFile(final, exclusive=False)
        self._file.synced_size = self._file.size
        self._generation = generation
        old.close()
        old.path.unlink()
        durable_fs.sync_directory(self._directory)

    def close(self) -> None:
        self._file.close()
        self._lock.release()


def _replay(path: Path) -> tuple[dict[str, bytes], int, int]:
    """The latest save record of each subscription, where the intact records end, file size."""
    records: dict[str, bytes] = {}
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return records, 0, 0
    try:
        scan = FrameScan.of_file(fd, 0)
        for frame in scan:
            subscription, is_save = _decode_record(frame.payload, path, frame.offset)
            if is_save:
                records[subscription] = frame.payload
            else:
                records.pop(subscription, None)
        return records, scan.end, scan.limit
    finally:
        os.close(fd)


def _decode_record(record: bytes, path: Path, offset: int) -> tuple[str, bool]:
    """Check one journal record; an intact frame with a bad record is corruption."""
    try:
        item = msgpack.unpackb(record)
        if isinstance(item, list) and item[:1] == ["save"] and len(item) == 3:
            CursorState.from_dict(item[2])
            is_save = True
        elif isinstance(item, list) and item[:1] == ["delete"] and len(item) == 2:
            is_save = False
        else:
            raise ValueError(f"not a journal record: {item!r:.100}")
        if not isinstance(item[1], str) or not item[1]:
            raise ValueError(f"bad subscription name {item[1]!r:.100}")
    except (ValueError, TypeError, CorruptCursorState, msgpack.UnpackException) as error:
        raise StorageCorrupted(f"{path} holds a bad record at offset {offset}: {error}") from error
    return item[1], is_save
