"""The load history's writer: a failed write keeps its rows for the next flush (counted, never
raised), the buffer is bounded (oldest dropped), and what is buffered is written at stop."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pyarrow.dataset as ds
import pytest

from scalable_topics.broker.load_history import LoadHistory
from scalable_topics.broker.load_row import LoadRow
from scalable_topics.store.informers import Informers
from support.eventually import eventually
from support.memory_store import MemoryStore

END = datetime(2026, 11, 26, 12, 0, tzinfo=UTC)


def row(index: int) -> LoadRow:
    end = END + timedelta(seconds=index)
    return LoadRow("ns", "t", 0, "b-1", end - timedelta(seconds=1), end, float(index), 0, 0, 0)


def written(root: Path) -> list[float]:
    if not any(root.rglob("*.parquet")):
        return []
    table = ds.dataset(str(root), format="parquet", partitioning="hive").to_table()
    return sorted(table.column("msg_rate_in").to_pylist())


@pytest.fixture
async def informers() -> AsyncIterator[Informers]:
    running = Informers(MemoryStore(), "scalable-topics")
    running.start()
    await running.wait_synced()
    yield running
    await running.stop()


async def test_a_failed_write_keeps_its_rows_and_the_buffer_is_bounded(
    tmp_path: Path, informers: Informers
) -> None:
    history = LoadHistory(str(tmp_path), "b-1", informers, 3600.0, 86400.0, max_rows=5)
    await history.start()
    try:
        # A file where the date's directory goes: every write of that date fails.
        blocker = tmp_path / "date=2026-11-26"
        blocker.write_bytes(b"")
        for index in range(3):
            history.append(row(index))
        history.flush_soon()
        await eventually(lambda: history.write_failures == 1, "a failed write")
        assert history.buffered == 3 and history.rows_written == 0
        for index in range(3, 8):
            history.append(row(index))
        assert history.buffered == 5 and history.rows_dropped == 3  # rows 0, 1, 2

        blocker.unlink()
        history.flush_soon()
        await eventually(lambda: history.rows_written == 5, "the kept rows written")
        assert written(tmp_path) == [3.0, 4.0, 5.0, 6.0, 7.0]
        history.append(row(8))
    finally:
        await history.stop()
    assert written(tmp_path) == [3.0, 4.0, 5.0, 6.0, 7.0, 8.0]  # the last flush, at stop


async def test_bad_settings_are_refused_by_name(tmp_path: Path, informers: Informers) -> None:
    with pytest.raises(ValueError, match="flush interval must be > 0"):
        LoadHistory(str(tmp_path), "b-1", informers, 0.0, 86400.0)
    with pytest.raises(ValueError, match="retention must be > 0"):
        LoadHistory(str(tmp_path), "b-1", informers, 60.0, -1.0)
    with pytest.raises(ValueError, match="broker id"):
        LoadHistory(str(tmp_path), "a/b", informers, 60.0, 86400.0)


async def test_stop_during_a_write_lets_it_end_and_loses_no_row(
    tmp_path: Path, informers: Informers
) -> None:
    history = LoadHistory(str(tmp_path), "b-1", informers, 3600.0, 86400.0)
    await history.start()
    real_write = history._files.write
    entered, release = threading.Event(), threading.Event()

    def slow_write(rows: list[LoadRow]) -> list[str]:
        entered.set()
        release.wait(30)
        return real_write(rows)

    history._files.write = slow_write  # type: ignore[method-assign]
    history.append(row(0))
    history.flush_soon()
    await asyncio.to_thread(entered.wait, 30)
    history.append(row(1))
    stopping = asyncio.ensure_future(history.stop())
    await asyncio.sleep(0)  # the writer is cancelled while its thread still writes
    assert not stopping.done()
    release.set()
    await stopping
    assert written(tmp_path) == [0.0, 1.0] and history.rows_written == 2
