"""The broker's side of the load history: every sample buffered, written as Parquet files.

Sampling never waits for a file: rows go into a bounded buffer, and one background task
writes it out every flush interval (and once more at shutdown), from a worker thread. A
failed write is logged and its rows go back into the buffer for the next flush; past
``MAX_BUFFERED_ROWS`` the oldest rows are dropped (and counted), so a history location that
is down for long costs bounded memory, never the broker.

The same task removes what must not outlive its segment: the rows of a segment whose Segment
object was deleted (drained and pruned, or its topic deleted) are removed from this broker's
files, and files of dates older than the retention are deleted. Deletions are remembered in
memory only: one seen just before a restart leaves its rows until the retention removes them.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import deque
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Final, TypeVar

from ..store.informer import Change, Unsubscribe
from ..store.informers import Informers
from ..tasks import TaskOwner
from .load_history_files import HistoryFiles, open_location
from .load_row import LoadRow, RowKey

log = logging.getLogger(__name__)
_T = TypeVar("_T")

# About 16 minutes of samples of 1,000 segments at a 10 s interval, some 20 MB.
MAX_BUFFERED_ROWS: Final = 100_000
# How often files of expired dates are looked for (also once at start).
RETENTION_CHECK_SECONDS: Final = 3600.0


class LoadHistory:
    def __init__(
        self,
        location: str,
        broker: str,
        informers: Informers,
        flush_seconds: float,
        retention_seconds: float,
        now: Callable[[], datetime] = lambda: datetime.now(UTC),
        max_rows: int = MAX_BUFFERED_ROWS,
    ) -> None:
        """A ValueError names what is wrong with ``location`` or ``broker``."""
        if not flush_seconds > 0:
            raise ValueError(f"the load history flush interval must be > 0, not {flush_seconds}")
        if not retention_seconds > 0:
            raise ValueError(f"the load history retention must be > 0, not {retention_seconds}")
        filesystem, base = open_location(location)
        self.location = location
        self._files = HistoryFiles(filesystem, base, broker)
        self._segments = informers.segments
        self._flush_seconds = flush_seconds
        self._retention = timedelta(seconds=retention_seconds)
        self._now = now
        self.max_rows = max_rows
        self._buffer: deque[LoadRow] = deque()
        self._deleted: dict[RowKey, datetime] = {}
        self._unsubscribe: Unsubscribe | None = None
        self._tasks = TaskOwner("load history", log)
        self._wake = asyncio.Event()
        self._last_expiry: datetime | None = None
        self.rows_written = 0
        self.rows_dropped = 0
        self.rows_removed = 0
        self.write_failures = 0
        self.files_written = 0

    @property
    def buffered(self) -> int:
        return len(self._buffer)

    @property
    def deletions_pending(self) -> int:
        return len(self._deleted)

    async def start(self) -> None:
        await asyncio.to_thread(self._files.prepare)
        self._unsubscribe = self._segments.subscribe(self._segment_changed)
        self._tasks.spawn(self._run(), "load history writer")

    async def stop(self) -> None:
        """Stop the writer, then write what is buffered (once: a failure is logged)."""
        if self._unsubscribe is not None:
            self._unsubscribe()
            self._unsubscribe = None
        await self._tasks.close()
        await self._flush()

    def append(self, row: LoadRow) -> None:
        if len(self._buffer) >= self.max_rows:
            self._buffer.popleft()
            self.rows_dropped += 1
        self._buffer.append(row)

    def flush_soon(self) -> None:
        """Write the buffer now rather than at the next interval (tests, benchmarks)."""
        self._wake.set()

    async def _run(self) -> None:
        while True:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), self._flush_seconds)
            self._wake.clear()
            await self._flush()
            await self._sweep()

    async def _flush(self) -> None:
        if not self._buffer:
            return
        rows, self._buffer = list(self._buffer), deque()
        work = asyncio.ensure_future(asyncio.to_thread(self._files.write, rows))
        try:
            await asyncio.wait({work})
        except asyncio.CancelledError:
            # A thread cannot be stopped: let it end, so that the last flush at stop neither
            # races it nor loses its rows, then stop.
            await asyncio.wait({work})
            self._settle(rows, work)
            raise
        self._settle(rows, work)

    def _settle(self, rows: list[LoadRow], work: asyncio.Future[list[str]]) -> None:
        error = work.exception()
        if error is None:
            self.rows_written += len(rows)
            self.files_written += len(work.result())
            return
        # The location is down or refuses: keep the rows for the next flush.
        self.write_failures += 1
        log.warning(
            "writing %d load history rows to %s failed (%s); retrying at the next flush",
            len(rows),
            self.location,
            error,
        )
        kept = rows + list(self._buffer)
        dropped = max(0, len(kept) - self.max_rows)
        self.rows_dropped += dropped
        self._buffer = deque(kept[dropped:])

    async def _sweep(self) -> None:
        if self._deleted:
            deleted = dict(self._deleted)
            try:
                removed = await _in_thread(self._files.remove_segments, deleted)
            except Exception as error:
                log.warning("removing deleted segments' load history failed (%s); retrying", error)
            else:
                self.rows_removed += removed
                for key, at in deleted.items():
                    if self._deleted.get(key) == at:
                        del self._deleted[key]
        now = self._now()
        if self._last_expiry is None or now - self._last_expiry >= timedelta(
            seconds=RETENTION_CHECK_SECONDS
        ):
            try:
                expired = await _in_thread(self._files.expire, now, self._retention)
            except Exception as error:
                log.warning("deleting expired load history failed (%s); retrying", error)
            else:
                self._last_expiry = now
                if expired:
                    log.info("deleted %d load history files past the retention", expired)

    def _segment_changed(self, change: Change) -> None:
        if change.new is not None:
            return
        spec = change.object.get("spec") or {}
        topic, segment_id = spec.get("topic"), spec.get("segmentId")
        if not isinstance(topic, str) or not isinstance(segment_id, int):
            return
        key = (change.key[0], topic, segment_id)
        at = self._now()
        self._deleted[key] = at
        # Rows not written yet need no rewrite.
        self._buffer = deque(
            row
            for row in self._buffer
            if (row.namespace, row.topic, row.segment_id) != key or row.end > at
        )
        self._wake.set()


async def _in_thread(function: Callable[..., _T], *args: object) -> _T:
    """``function(*args)`` in a worker thread; a cancellation waits for it to end first (a
    thread cannot be stopped), so that nothing it does races what the canceller does next."""
    work = asyncio.ensure_future(asyncio.to_thread(function, *args))
    try:
        return await asyncio.shield(work)
    except asyncio.CancelledError:
        await asyncio.wait({work})
        if not work.cancelled():
            work.exception()  # retrieved: the canceller does not want it
        raise
