"""SegmentLog: the append-only, crash-safe log of one segment.

Layout. The log owns its directory: data files named by their first entry id with a sparse
index each (see log_file and log_index), ``sealed`` once the segment is terminated, and
``log.lock``, whose flock keeps a second instance out. Deleting the log deletes the directory.

Writes. ``append`` queues the record and waits. One writer task takes everything queued (up to
``MAX_BATCH_BYTES``), writes it with one write() on a worker thread and syncs by the policy
(sync_policy): under the default, the records are fsynced before any of their appends returns,
and appends that arrive while an fsync runs form the next batch, sharing its fsync. Entry ids
follow the order of the ``append`` calls. Terminating and closing queue behind the appends
already accepted, so those are written first.

Reads see durable records only (``last_entry_id``), so a consumer never sees a record that a
crash could take back. Recent records are served from memory; older ones from the files on
worker threads.

Failures. If a write, fsync, roll or seal fails, the batch's appends and every queued one fail
with StorageFailed, and so do all later appends: after a failed fsync the kernel may have
dropped the pages it could not write, so the log cannot tell what is on disk. Reopen it to
recover. An append that failed this way, or whose caller was cancelled, may still be found
after a reopen, like an append whose acknowledgement was lost.
"""

from __future__ import annotations

import asyncio
import bisect
import collections
import contextlib
import functools
import logging
import os
from collections.abc import Callable
from concurrent.futures import Executor
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any, Self, TypeVar

from . import durable_fs, log_directory
from .errors import EntryTrimmed, RecordTooLarge, SegmentTerminated, StorageClosed, StorageFailed
from .log_file import LogEntry, LogFile, find_time_in_file, read_entries
from .log_writer import PendingRecord, WriteOutcome
from .sync_policy import SyncMode, SyncPolicy
from .tail_cache import TailCache

T = TypeVar("T")

DEFAULT_MAX_RECORD_BYTES = 8 * 1024 * 1024
DEFAULT_FILE_BYTES = 64 * 1024 * 1024
DEFAULT_INDEX_INTERVAL_BYTES = 4096
DEFAULT_CACHE_BYTES = 4 * 1024 * 1024
MAX_BATCH_BYTES = 4 * 1024 * 1024  # one write() per batch: bounds its memory and latency

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class LogFileInfo:
    """One data file, for retention decisions. ``last_entry_id`` is ``first_entry_id - 1`` and
    ``last_timestamp_ms`` None while the file is empty."""

    first_entry_id: int
    last_entry_id: int
    last_timestamp_ms: int | None
    size_bytes: int


@dataclass(slots=True)
class _Append:
    record: PendingRecord
    future: asyncio.Future[int]


@dataclass(slots=True)
class _Seal:
    future: asyncio.Future[None]


@dataclass(slots=True)
class _Close:
    future: asyncio.Future[None]


_Request = _Append | _Seal | _Close


class SegmentLog:
    """See the module docstring. Create with ``await SegmentLog.open(directory)``."""

    def __init__(
        self,
        directory: Path,
        opened: log_directory.Opened,
        *,
        sync: SyncPolicy,
        max_record_bytes: int,
        cache_bytes: int,
        executor: Executor | None,
    ) -> None:
        self._directory = directory
        self._lock = opened.lock
        self._files = opened.files
        self._writer = opened.writer
        self._policy = sync
        self._max_record_bytes = max_record_bytes
        self._executor = executor
        self._dropped_bytes = opened.dropped_bytes
        self._sealed = opened.sealed_at is not None
        self._last_entry_id = self._files[-1].last_entry_id
        self._next_entry_id = self._last_entry_id + 1
        last_timestamps = [
            f.last_timestamp_ms for f in self._files if f.last_timestamp_ms is not None
        ]
        self._last_timestamp_ms = max(last_timestamps, default=0)
        # Appends, seal and close, in order; the writer task serves them.
        self._queue: collections.deque[_Request] = collections.deque()
        self._wakeup = asyncio.Event()
        self._changed = asyncio.Event()
        self._seal_future: asyncio.Future[None] | None = None
        self._terminating = self._sealed
        self._closing = False
        self._close_task: asyncio.Task[None] | None = None
        self._closed = False
        self._deleted = False
        self._failure: BaseException | None = None
        self._cache = TailCache(cache_bytes)
        self._writer_task = asyncio.create_task(self._run_writer(), name=f"log-writer {directory}")

    @classmethod
    async def open(
        cls,
        directory: str | os.PathLike[str],
        *,
        sync: SyncPolicy | None = None,
        max_record_bytes: int = DEFAULT_MAX_RECORD_BYTES,
        file_bytes: int = DEFAULT_FILE_BYTES,
        index_interval_bytes: int = DEFAULT_INDEX_INTERVAL_BYTES,
        cache_bytes: int = DEFAULT_CACHE_BYTES,
        executor: Executor | None = None,
        locked_by_owner: bool = False,
    ) -> SegmentLog:
        """Open the log in ``directory``, creating it if needed, and recover it after a crash:
        a torn tail of the last file is cut off (``dropped_bytes`` says how much), missing index
        points are rebuilt, and a directory that lost data in the middle raises
        StorageCorrupted. Blocking work runs on ``executor`` (the loop's default when None).
        ``locked_by_owner``: the caller holds a lock over a whole tree of logs, so this one
        takes no ``log.lock`` of its own (nor the open file it costs)."""
        for name, value in (
            ("max_record_bytes", max_record_bytes),
            ("file_bytes", file_bytes),
            ("index_interval_bytes", index_interval_bytes),
        ):
            if value < 1:
                raise ValueError(f"{name} must be positive, not {value}")
        if cache_bytes < 0:
            raise ValueError(f"cache_bytes must not be negative, not {cache_bytes}")
        policy = sync or SyncPolicy()
        path = Path(directory)
        recover = functools.partial(
            log_directory.recover, path, policy, index_interval_bytes, file_bytes, locked_by_owner
        )
        opened = await durable_fs.run_opening(executor, recover, log_directory.release)
        return cls(
            path,
            opened,
            sync=policy,
            max_record_bytes=max_record_bytes,
            cache_bytes=cache_bytes,
            executor=executor,
        )

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

    # -- state -----------------------------------------------------------------------------------

    @property
    def directory(self) -> Path:
        return self._directory

    @property
    def first_entry_id(self) -> int:
        """The oldest entry still stored (the next entry id when the log is empty)."""
        return self._files[0].first_entry_id

    @property
    def last_entry_id(self) -> int:
        """The newest durable entry; -1 when the log never had one."""
        return self._last_entry_id

    @property
    def next_entry_id(self) -> int:
        """The id the next append takes: ids are given when ``append`` is called, in call
        order, whether or not its caller waits for the record to be durable."""
        return self._next_entry_id

    @property
    def sealed(self) -> bool:
        return self._sealed

    @property
    def dropped_bytes(self) -> int:
        """Bytes of torn or damaged tail that opening the log cut off."""
        return self._dropped_bytes

    @property
    def size_bytes(self) -> int:
        return sum(file.size for file in self._files)

    @property
    def files(self) -> list[LogFileInfo]:
        return [
            LogFileInfo(f.first_entry_id, f.last_entry_id, f.last_timestamp_ms, f.size)
            for f in self._files
        ]

    def is_end_of_segment(self, entry_id: int) -> bool:
        """Whether a reader that wants ``entry_id`` next has read the whole sealed segment."""
        return self._sealed and entry_id > self._last_entry_id

    # -- writing ---------------------------------------------------------------------------------

    async def append(self, payload: bytes, timestamp_ms: int) -> int:
        """Append one record and return its entry id once it is durable under the sync policy.

        ``timestamp_ms`` is the broker's append time; one earlier than the previous record's
        is stored as that one, keeping timestamps non-decreasing for lookups by time."""
        self._check_open()
        if self._failure is not None:
            raise self._failed()
        if self._terminating:
            raise SegmentTerminated(self._directory, self._next_entry_id - 1)
        if len(payload) > self._max_record_bytes:
            raise RecordTooLarge(len(payload), self._max_record_bytes)
        if timestamp_ms < 0:
            raise ValueError(
                f"a record timestamp is milliseconds since the epoch, not {timestamp_ms}"
            )
        self._last_timestamp_ms = max(self._last_timestamp_ms, timestamp_ms)
        record = PendingRecord(self._next_entry_id, self._last_timestamp_ms, bytes(payload))
        self._next_entry_id += 1
        future: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        self._queue.append(_Append(record, future))
        self._wakeup.set()
        return await future

    async def terminate(self) -> int:
        """Seal the segment: appends already accepted are written, later ones raise
        SegmentTerminated, and the seal is durable before this returns. Returns the last entry
        id. Calling it again returns the same id."""
        self._check_open()
        if self._seal_future is None and not self._sealed:
            if self._failure is not None:
                raise self._failed()
            self._terminating = True
            self._seal_future = asyncio.get_running_loop().create_future()
            self._queue.append(_Seal(self._seal_future))
            self._wakeup.set()
        if self._seal_future is not None:
            await asyncio.shield(self._seal_future)
        return self._last_entry_id

    async def trim(self, before_entry_id: int) -> int:
        """Delete the files whose entries all precede ``before_entry_id``, never the active
        one; return how many entries went. Retention decides what may go."""
        self._check_open()
        victims: list[LogFile] = []
        while len(self._files) > 1 and self._files[0].last_entry_id < before_entry_id:
            victims.append(self._files.pop(0))
        if victims:
            await self._in_thread(log_directory.remove_files, self._directory, victims)
        return sum(file.entry_count for file in victims)

    async def close(self) -> None:
        """Write what is queued, sync, and release the directory. Idempotent."""
        if self._close_task is None:
            self._closing = True
            self._close_task = asyncio.create_task(self._close())
        await asyncio.shield(self._close_task)

    async def _close(self) -> None:
        failure: BaseException | None = None
        if not self._writer_task.done():
            future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._queue.append(_Close(future))
            self._wakeup.set()
            await asyncio.shield(self._writer_task)
            failure = future.exception() if future.done() and not future.cancelled() else None
        await self._in_thread(self._writer.close)
        self._lock.release()
        self._closed = True
        self._notify()
        if failure is not None:
            raise failure

    async def delete(self) -> None:
        """Remove the log and its directory; the instance is unusable afterwards. A crash
        during deletion leaves a hidden ``.<name>.deleting`` directory beside it."""
        self._check_open()
        queued = [r for r in self._queue if isinstance(r, _Append)]
        for request in queued:
            self._queue.remove(request)
            _settle_error(request.future, StorageClosed(f"segment log {self._directory} deleted"))
        with contextlib.suppress(StorageFailed):  # the data is going anyway
            await self.close()
        self._deleted = True
        await self._in_thread(log_directory.remove_directory, self._directory)

    # -- reading ---------------------------------------------------------------------------------

    async def read(
        self, from_entry_id: int, max_entries: int = 100, max_bytes: int = 1024 * 1024
    ) -> list[LogEntry]:
        """Durable entries from ``from_entry_id`` on: at most ``max_entries``, with payloads of
        at most ``max_bytes`` together, but always at least one when one exists. An empty list
        means nothing is there yet (or, when ``is_end_of_segment``, ever)."""
        self._check_open()
        if from_entry_id < 0 or max_entries < 1 or max_bytes < 1:
            raise ValueError(
                f"cannot read {max_entries} entries / {max_bytes} bytes from entry {from_entry_id}"
            )
        if from_entry_id < self.first_entry_id:
            raise EntryTrimmed(from_entry_id, self.first_entry_id)
        cached = self._cache.read(from_entry_id, max_entries, max_bytes)
        if cached is not None:
            return cached
        entries: list[LogEntry] = []
        budget = max_bytes
        next_id, last_id = from_entry_id, self._last_entry_id
        while next_id <= last_id and len(entries) < max_entries and budget > 0:
            file = self._file_of(next_id)
            start = file.point_at_or_before(next_id)
            reader = functools.partial(
                read_entries,
                file,
                start,
                file.size,
                next_id,
                max_entries - len(entries),
                budget,
                at_least_one=not entries,
            )
            try:
                chunk = await self._in_thread(reader)
            except FileNotFoundError:
                raise EntryTrimmed(next_id, self.first_entry_id) from None
            if not chunk:
                break  # the byte budget is spent
            entries += chunk
            budget -= sum(len(e.payload) for e in chunk)
            next_id = chunk[-1].entry_id + 1
        return entries

    async def wait_for_entry(self, entry_id: int) -> bool:
        """Wait until ``entry_id`` is durable (True) or the segment is sealed before it
        (False). Raises StorageClosed or StorageFailed when the log stops."""
        while True:
            if entry_id <= self._last_entry_id:
                return True
            if self._sealed:
                return False
            self._check_open()
            if self._failure is not None:
                raise self._failed()
            await self._changed.wait()

    async def find_entry_by_timestamp(self, timestamp_ms: int) -> int:
        """The first stored entry whose timestamp is at least ``timestamp_ms``; the next entry
        id to be written when none is."""
        self._check_open()
        for file in list(self._files):
            if file.last_timestamp_ms is None or file.last_timestamp_ms < timestamp_ms:
                continue
            start = file.point_before_time(timestamp_ms)
            finder = functools.partial(find_time_in_file, file, start, file.size, timestamp_ms)
            try:
                found = await self._in_thread(finder)
            except FileNotFoundError:
                continue  # trimmed meanwhile; the answer is in a later file
            if found is not None:
                return found
        return self._last_entry_id + 1

    def _file_of(self, entry_id: int) -> LogFile:
        at = bisect.bisect_right(self._files, entry_id, key=lambda f: f.first_entry_id)
        return self._files[at - 1]

    # -- the writer task -------------------------------------------------------------------------

    async def _run_writer(self) -> None:
        batch: list[_Append] = []  # taken off the queue, not settled yet
        try:
            while True:
                if not self._queue:
                    await self._wait_for_work()
                    continue
                request = self._queue[0]
                if isinstance(request, _Append):
                    batch = self._take_batch()
                    records = [item.record for item in batch]
                    self._publish(batch, await self._in_thread(self._writer.write, records))
                    batch = []
                    if self._writer.full:
                        rolled = await self._in_thread(self._writer.roll, self._last_entry_id + 1)
                        self._files.append(rolled)
                elif isinstance(request, _Seal):
                    last = self._last_entry_id
                    await self._in_thread(
                        log_directory.write_seal, self._directory, self._writer, last
                    )
                    self._queue.popleft()
                    self._sealed = True
                    _settle(request.future, None)
                    self._notify()
                else:
                    await self._in_thread(self._writer.sync)
                    self._queue.popleft()
                    _settle(request.future, None)
                    return
        except Exception as error:
            self._fail(error, batch)

    async def _wait_for_work(self) -> None:
        if self._policy.mode is SyncMode.INTERVAL and self._writer.dirty:
            remaining = self._policy.interval_seconds - self._writer.seconds_since_sync
            try:
                async with asyncio.timeout(max(remaining, 0)):
                    await self._wakeup.wait()
            except TimeoutError:
                await self._in_thread(self._writer.sync)
        else:
            await self._wakeup.wait()
        self._wakeup.clear()

    def _take_batch(self) -> list[_Append]:
        batch: list[_Append] = []
        size = 0
        while self._queue and isinstance(self._queue[0], _Append):
            size += len(self._queue[0].record.payload)
            if batch and size > MAX_BATCH_BYTES:
                break
            request = self._queue.popleft()
            assert isinstance(request, _Append)
            batch.append(request)
        return batch

    def _publish(self, batch: list[_Append], outcome: WriteOutcome) -> None:
        active = self._files[-1]
        active.points += outcome.points
        active.size = outcome.size
        active.last_entry_id = outcome.last_entry_id
        active.last_timestamp_ms = outcome.last_timestamp_ms
        self._last_entry_id = outcome.last_entry_id
        for item in batch:
            self._cache.add(
                LogEntry(item.record.entry_id, item.record.timestamp_ms, item.record.payload)
            )
            _settle(item.future, item.record.entry_id)
        self._notify()

    def _fail(self, error: BaseException, batch: list[_Append]) -> None:
        log.error(
            "segment log %s: a write failed, refusing further writes: %s", self._directory, error
        )
        self._failure = error
        for request in [*batch, *self._queue]:
            _settle_error(request.future, self._failed())
        self._queue.clear()
        self._notify()

    def _failed(self) -> StorageFailed:
        failure = StorageFailed(
            f"segment log {self._directory} lost a write ({self._failure}) and refuses further "
            "writes; reopen it to recover what reached the disk"
        )
        failure.__cause__ = self._failure
        return failure

    def _notify(self) -> None:
        self._changed.set()
        self._changed = asyncio.Event()

    def _check_open(self) -> None:
        if self._deleted:
            raise StorageClosed(f"segment log {self._directory} was deleted")
        if self._closing:
            raise StorageClosed(f"segment log {self._directory} is closed")

    async def _in_thread(self, function: Callable[..., T], *args: Any) -> T:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._executor, functools.partial(function, *args))


def _settle(future: asyncio.Future[T], value: T) -> None:
    if not future.done():  # the caller may have given up waiting
        future.set_result(value)


def _settle_error(future: asyncio.Future[Any], error: BaseException) -> None:
    if not future.done():
        future.set_exception(error)
        future.exception()  # retrieved: nobody may be waiting any more
