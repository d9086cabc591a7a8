"""SegmentLog: appends and reads, files and index, time lookup, retention, seal, recovery."""

from __future__ import annotations

import asyncio
import errno
import itertools
import os
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from scalable_topics.broker.storage import (
    EntryTrimmed,
    RecordTooLarge,
    SegmentLog,
    SegmentTerminated,
    StorageClosed,
    StorageCorrupted,
    StorageFailed,
    StorageLocked,
    SyncMode,
    SyncPolicy,
    durable_fs,
)
from scalable_topics.broker.storage.log_file import record_size
from scalable_topics.broker.storage.log_index import decode_points
from scalable_topics.broker.storage.record_file import encode_frame

TIMEOUT = 10.0


def payload(entry_id: int, size: int = 40) -> bytes:
    return (f"record-{entry_id}-".encode() * size)[:size]


class FsyncCounter:
    """Wraps the fsync of every storage file; can make it slow or fail."""

    def __init__(self) -> None:
        self.calls = 0
        self.delay = 0.0
        self.error: OSError | None = None
        self.sizes: list[int] = []
        self.on_sync: Callable[[], object] | None = None
        self._lock = threading.Lock()
        self._real = durable_fs.flush_to_disk

    def __call__(self, fd: int) -> None:
        if self.error is not None:
            raise self.error
        if self.delay:
            threading.Event().wait(self.delay)  # a slow disk, on the worker thread
        self._real(fd)
        with self._lock:
            self.calls += 1
            self.sizes.append(os.fstat(fd).st_size)
        if self.on_sync is not None:
            self.on_sync()


@pytest.fixture
def fsyncs(monkeypatch: pytest.MonkeyPatch) -> FsyncCounter:
    counter = FsyncCounter()
    monkeypatch.setattr(durable_fs, "flush_to_disk", counter)
    return counter


async def fill(log: SegmentLog, count: int, start_ts: int = 1000, size: int = 40) -> list[int]:
    ids = []
    for n in range(count):
        ids.append(await log.append(payload(log.last_entry_id + 1, size), start_ts + n))
    return ids


# -- appends and reads ---------------------------------------------------------------------------


async def test_appends_get_consecutive_ids_and_read_back(tmp_path: Path) -> None:
    async with await SegmentLog.open(tmp_path / "seg") as log:
        assert (log.first_entry_id, log.last_entry_id) == (0, -1)
        assert await fill(log, 5) == [0, 1, 2, 3, 4]
        entries = await log.read(0)
        assert [(e.entry_id, e.timestamp_ms, e.payload) for e in entries] == [
            (i, 1000 + i, payload(i)) for i in range(5)
        ]
        assert [e.entry_id for e in await log.read(2, max_entries=2)] == [2, 3]
        assert await log.read(5) == []
        assert await log.read(500) == []


async def test_max_bytes_limits_a_read_but_never_below_one_entry(tmp_path: Path) -> None:
    async with await SegmentLog.open(tmp_path / "seg", cache_bytes=0) as log:
        await fill(log, 6, size=100)
        assert [e.entry_id for e in await log.read(0, max_bytes=250)] == [0, 1]
        assert [e.entry_id for e in await log.read(3, max_bytes=1)] == [3]


async def test_reads_from_cache_and_from_files_agree(tmp_path: Path) -> None:
    async with await SegmentLog.open(tmp_path / "a", cache_bytes=500, file_bytes=2000) as cached:
        await fill(cached, 60)
        uncached = await SegmentLog.open(tmp_path / "b", cache_bytes=0, file_bytes=2000)
        await fill(uncached, 60)
        for start in (0, 17, 49, 55, 59):
            for limit in (1, 3, 100):
                got = await cached.read(start, max_entries=limit, max_bytes=150)
                assert got == await uncached.read(start, max_entries=limit, max_bytes=150)
                assert got[0].entry_id == start
        await uncached.close()


async def test_timestamps_never_decrease(tmp_path: Path) -> None:
    async with await SegmentLog.open(tmp_path / "seg") as log:
        await log.append(b"a", 500)
        await log.append(b"b", 400)  # the clock stepped back
        await log.append(b"c", 600)
        assert [e.timestamp_ms for e in await log.read(0)] == [500, 500, 600]


async def test_bad_requests_are_refused_by_name(tmp_path: Path) -> None:
    async with await SegmentLog.open(tmp_path / "seg", max_record_bytes=100) as log:
        with pytest.raises(RecordTooLarge, match="101 bytes exceeds the limit of 100 bytes"):
            await log.append(bytes(101), 1)
        with pytest.raises(ValueError, match="milliseconds since the epoch"):
            await log.append(b"x", -1)
        with pytest.raises(ValueError, match="cannot read 0 entries"):
            await log.read(0, max_entries=0)
        assert await log.append(bytes(100), 1) == 0  # nothing refused took an entry id
    with pytest.raises(ValueError, match="file_bytes must be positive"):
        await SegmentLog.open(tmp_path / "other", file_bytes=0)


async def test_a_second_instance_cannot_open_the_directory(tmp_path: Path) -> None:
    async with await SegmentLog.open(tmp_path / "seg"):
        with pytest.raises(StorageLocked, match="in use"):
            await SegmentLog.open(tmp_path / "seg")
    async with await SegmentLog.open(tmp_path / "seg"):
        pass


async def test_wait_for_entry_wakes_on_append_and_on_seal(tmp_path: Path) -> None:
    async with await SegmentLog.open(tmp_path / "seg") as log:
        waiter = asyncio.create_task(log.wait_for_entry(1))
        await log.append(b"0", 1)
        assert not waiter.done()
        await log.append(b"1", 2)
        async with asyncio.timeout(TIMEOUT):
            assert await waiter
        sealed_waiter = asyncio.create_task(log.wait_for_entry(2))
        await log.terminate()
        async with asyncio.timeout(TIMEOUT):
            assert not await sealed_waiter
        assert log.is_end_of_segment(2)
        assert not log.is_end_of_segment(1)


# -- group commit and durability -----------------------------------------------------------------


async def test_group_commit_shares_fsyncs_among_concurrent_appends(
    tmp_path: Path, fsyncs: FsyncCounter
) -> None:
    async with await SegmentLog.open(tmp_path / "seg") as log:
        before = fsyncs.calls
        fsyncs.delay = 0.005
        size = record_size(len(payload(0)))

        async def appender(number: int) -> None:
            for round_ in range(4):
                entry_id = await log.append(payload(number * 10 + round_), 1)
                # Acknowledged only once an fsync covered the record.
                assert max(fsyncs.sizes) >= (entry_id + 1) * size

        async with asyncio.timeout(TIMEOUT):
            await asyncio.gather(*(appender(n) for n in range(50)))
        assert log.last_entry_id == 199
        assert fsyncs.calls - before <= 20  # one per append would be 200


async def test_a_failed_fsync_fails_the_batch_and_every_later_append(
    tmp_path: Path, fsyncs: FsyncCounter
) -> None:
    directory = tmp_path / "seg"
    log = await SegmentLog.open(directory)
    await fill(log, 3)
    fsyncs.error = OSError(errno.EIO, "disk on fire")
    results = await asyncio.gather(
        *(log.append(b"lost?", 1) for _ in range(5)), return_exceptions=True
    )
    assert all(isinstance(r, StorageFailed) for r in results)
    assert "disk on fire" in str(results[0])
    fsyncs.error = None  # even if the disk recovers, the log does not pretend
    with pytest.raises(StorageFailed, match="reopen it"):
        await log.append(b"later", 1)
    with pytest.raises(StorageFailed):
        await log.terminate()
    assert log.last_entry_id == 2
    await log.close()
    async with await SegmentLog.open(directory) as reopened:
        entries = await reopened.read(0)
        assert [e.payload for e in entries[:3]] == [payload(i) for i in range(3)]


async def test_interval_policy_acknowledges_before_fsync_and_syncs_soon(
    tmp_path: Path, fsyncs: FsyncCounter
) -> None:
    policy = SyncPolicy(SyncMode.INTERVAL, interval_seconds=0.5)
    loop = asyncio.get_running_loop()
    synced = asyncio.Event()
    fsyncs.on_sync = lambda: loop.call_soon_threadsafe(synced.set)
    async with await SegmentLog.open(tmp_path / "seg", sync=policy) as log:
        before = fsyncs.calls
        await log.append(b"a", 1)
        await log.append(b"b", 2)
        assert fsyncs.calls == before  # acknowledged after write(), before any fsync
        synced.clear()
        async with asyncio.timeout(TIMEOUT):
            await synced.wait()  # the timer's fsync
        assert fsyncs.sizes[-1] == 2 * record_size(1)


async def test_no_sync_policy_never_fsyncs_appends_but_close_does(
    tmp_path: Path, fsyncs: FsyncCounter
) -> None:
    log = await SegmentLog.open(tmp_path / "seg", sync=SyncPolicy.named("none"))
    before = fsyncs.calls
    await asyncio.gather(*(log.append(b"x", 1) for _ in range(20)))
    await fill(log, 5)
    assert fsyncs.calls == before
    await log.close()
    assert fsyncs.calls == before + 1


def test_sync_policy_names() -> None:
    assert SyncPolicy.named("batch") == SyncPolicy()
    assert SyncPolicy.named("interval", 0.5).interval_seconds == 0.5
    with pytest.raises(ValueError, match="unknown sync policy 'fast'"):
        SyncPolicy.named("fast")
    with pytest.raises(ValueError, match="must be positive"):
        SyncPolicy(SyncMode.INTERVAL, 0)


# -- files, index, time lookup, retention --------------------------------------------------------


async def test_files_roll_and_reopen_with_the_same_entries(tmp_path: Path) -> None:
    directory = tmp_path / "seg"
    async with await SegmentLog.open(directory, file_bytes=1000, index_interval_bytes=200) as log:
        await fill(log, 60)
        files = log.files
        written = await log.read(0, max_entries=1000)
    assert len(files) > 3
    for before, after in itertools.pairwise(files):
        assert after.first_entry_id == before.last_entry_id + 1
        assert before.size_bytes >= 1000
    assert sorted(p.name for p in directory.glob("*.log"))[:2] == [
        "00000000000000000000.log",
        f"{files[1].first_entry_id:020d}.log",
    ]
    async with await SegmentLog.open(directory, file_bytes=1000, index_interval_bytes=200) as log:
        assert log.files == files
        assert await log.read(0, max_entries=1000) == written
        assert log.dropped_bytes == 0
        assert await log.append(b"more", 5000) == 60


async def test_index_has_a_point_per_interval_and_is_rebuilt_when_lost(tmp_path: Path) -> None:
    directory = tmp_path / "seg"
    options: dict[str, Any] = {"file_bytes": 3000, "index_interval_bytes": 300}
    async with await SegmentLog.open(directory, **options) as log:
        await fill(log, 100)
    size = record_size(len(payload(0)))
    records_per_file, records_per_point = -(-3000 // size), -(-300 // size)
    indexes = sorted(directory.glob("*.index"))
    points = decode_points(indexes[0].read_bytes(), 0, 10**9)
    assert [p.offset for p in points] == [
        n * size for n in range(0, records_per_file, records_per_point)
    ]
    assert [p.entry_id for p in points] == list(range(0, records_per_file, records_per_point))
    originals = {p.name: p.read_bytes() for p in indexes}
    indexes[0].unlink()  # lost
    for path in indexes[1:]:
        path.write_bytes(path.read_bytes()[:30])  # short, ending in half a point
    async with await SegmentLog.open(directory, **options) as log:
        assert [e.entry_id for e in await log.read(37, max_entries=5)] == [37, 38, 39, 40, 41]
    assert {p.name: p.read_bytes() for p in directory.glob("*.index")} == originals


async def test_find_entry_by_timestamp(tmp_path: Path) -> None:
    async with await SegmentLog.open(
        tmp_path / "seg", file_bytes=800, index_interval_bytes=100
    ) as log:
        for n in range(40):
            await log.append(payload(n), 1000 + 10 * (n // 2))  # two entries per timestamp
        assert await log.find_entry_by_timestamp(0) == 0
        assert await log.find_entry_by_timestamp(1000) == 0
        assert await log.find_entry_by_timestamp(1001) == 2
        assert await log.find_entry_by_timestamp(1100) == 20
        assert await log.find_entry_by_timestamp(1190) == 38
        assert await log.find_entry_by_timestamp(1191) == 40  # after everything: the next entry


async def test_trim_removes_whole_old_files_only(tmp_path: Path) -> None:
    directory = tmp_path / "seg"
    async with await SegmentLog.open(directory, file_bytes=1000) as log:
        await fill(log, 50)
        files = log.files
        assert await log.trim(files[1].first_entry_id) == files[0].last_entry_id + 1
        assert log.first_entry_id == files[1].first_entry_id
        assert log.files == files[1:]
        with pytest.raises(EntryTrimmed, match="the log starts at entry"):
            await log.read(0)
        assert await log.trim(files[1].first_entry_id) == 0
        dropped = await log.trim(10**9)  # everything but the active file
        assert dropped == sum(f.last_entry_id - f.first_entry_id + 1 for f in files[1:-1])
        assert log.files == files[-1:]
        assert await log.read(log.first_entry_id) != []
        size = log.size_bytes
    async with await SegmentLog.open(directory, file_bytes=1000) as log:
        assert (log.first_entry_id, log.last_entry_id, log.size_bytes) == (
            files[-1].first_entry_id,
            49,
            size,
        )
    assert len(list(directory.glob("*.index"))) == 1


# -- terminate and delete ------------------------------------------------------------------------


async def test_terminate_writes_accepted_appends_refuses_later_ones_and_survives_reopen(
    tmp_path: Path,
) -> None:
    directory = tmp_path / "seg"
    async with await SegmentLog.open(directory) as log:
        await fill(log, 3)
        accepted = [asyncio.create_task(log.append(b"accepted", 1)) for _ in range(4)]
        await asyncio.sleep(0)  # the appends are queued
        assert await log.terminate() == 6
        assert [await task for task in accepted] == [3, 4, 5, 6]
        with pytest.raises(SegmentTerminated, match=r"terminated at entry 6") as refused:
            await log.append(b"refused", 1)
        assert refused.value.last_entry_id == 6
        assert await log.terminate() == 6
        assert log.sealed
    async with await SegmentLog.open(directory) as log:
        assert (log.sealed, log.last_entry_id) == (True, 6)
        with pytest.raises(SegmentTerminated):
            await log.append(b"refused", 1)
        entries = await log.read(0)
        assert b"refused" not in [e.payload for e in entries]
        assert len(entries) == 7


async def test_appends_racing_terminate_are_written_or_refused_never_lost(tmp_path: Path) -> None:
    async with await SegmentLog.open(tmp_path / "seg") as log:

        async def keep_appending() -> list[int]:
            ids = []
            while True:
                try:
                    ids.append(await log.append(b"x", 1))
                except SegmentTerminated:
                    return ids

        appenders = [asyncio.create_task(keep_appending()) for _ in range(8)]
        while log.last_entry_id < 50:
            await log.wait_for_entry(log.last_entry_id + 1)
        last = await log.terminate()
        async with asyncio.timeout(TIMEOUT):
            acknowledged = sorted(i for ids in await asyncio.gather(*appenders) for i in ids)
        assert acknowledged == list(range(last + 1))
        assert len(await log.read(0, max_entries=10**6, max_bytes=10**9)) == last + 1


async def test_delete_removes_the_directory_and_the_instance(tmp_path: Path) -> None:
    directory = tmp_path / "seg"
    log = await SegmentLog.open(directory, file_bytes=500)
    await fill(log, 20)
    await log.delete()
    assert not directory.exists()
    for call in (log.append(b"x", 1), log.read(0), log.terminate(), log.delete()):
        with pytest.raises(StorageClosed, match="deleted"):
            await call


async def test_calls_after_close_raise_closed(tmp_path: Path) -> None:
    log = await SegmentLog.open(tmp_path / "seg")
    await log.close()
    await log.close()
    with pytest.raises(StorageClosed, match="is closed"):
        await log.append(b"x", 1)
    with pytest.raises(StorageClosed):
        await log.wait_for_entry(0)


# -- recovery ------------------------------------------------------------------------------------


async def closed_log(directory: Path, count: int, **options: Any) -> list[bytes]:
    async with await SegmentLog.open(directory, **options) as log:
        await fill(log, count)
        return [e.payload for e in await log.read(0, max_entries=10**6, max_bytes=10**9)]


def last_file(directory: Path) -> Path:
    return sorted(directory.glob("*.log"))[-1]


@pytest.mark.parametrize(
    "damage",
    [
        lambda data: data + bytes(100),  # zeros of a half-written block
        lambda data: data + encode_frame(b"unfinished record")[:-3],  # a torn write
        lambda data: data[:-5],  # the last record cut short
        lambda data: data[:-1] + bytes([data[-1] ^ 1]),  # its last byte damaged
    ],
)
async def test_a_torn_tail_is_cut_off_and_everything_before_it_kept(
    tmp_path: Path, damage: Callable[[bytes], bytes]
) -> None:
    directory = tmp_path / "seg"
    written = await closed_log(directory, 30, file_bytes=1000)
    path = last_file(directory)
    intact = path.read_bytes()
    path.write_bytes(damage(intact))
    async with await SegmentLog.open(directory, file_bytes=1000) as log:
        entries = await log.read(0, max_entries=100)
        kept = [e.payload for e in entries]
        assert kept == written[: len(kept)]
        assert len(kept) >= len(written) - 1
        assert log.dropped_bytes == len(damage(intact)) - path.stat().st_size > 0
        assert await log.append(b"next", 1) == len(kept)
    async with await SegmentLog.open(directory, file_bytes=1000) as log:
        assert (await log.read(len(kept)))[0].payload == b"next"


@pytest.mark.parametrize("zeroed", [False, True], ids=["truncated", "zeroed"])
async def test_index_points_naming_lost_data_are_dropped(tmp_path: Path, zeroed: bool) -> None:
    directory = tmp_path / "seg"
    written = await closed_log(directory, 40, index_interval_bytes=100)
    path = last_file(directory)
    data = path.read_bytes()
    half = len(data) // 2
    # Data pages lost while the index pages naming them survived (a power loss without fsync):
    # the file either ends early or keeps its size with zeros where the data was.
    path.write_bytes(data[:half] + (bytes(len(data) - half) if zeroed else b""))
    async with await SegmentLog.open(directory, index_interval_bytes=100) as log:
        kept = [e.payload for e in await log.read(0, max_entries=100)]
        assert kept == written[: len(kept)]
        assert len(kept) >= 40 // 2 - 1
        assert log.last_entry_id == len(kept) - 1
        assert await log.append(b"next", 1) == len(kept)
        assert [e.payload for e in await log.read(len(kept) - 1)] == [kept[-1], b"next"]


async def test_damage_before_the_last_file_is_reported_not_cut(tmp_path: Path) -> None:
    directory = tmp_path / "seg"
    await closed_log(directory, 40, file_bytes=1000)
    first = sorted(directory.glob("*.log"))[0]
    data = bytearray(first.read_bytes())
    data[len(data) - 20] ^= 0xFF
    first.write_bytes(bytes(data))
    with pytest.raises(StorageCorrupted, match=f"{first.name} is damaged"):
        await SegmentLog.open(directory, file_bytes=1000)
    assert first.read_bytes() == bytes(data)  # nothing cut


async def test_a_missing_file_in_the_middle_is_reported(tmp_path: Path) -> None:
    directory = tmp_path / "seg"
    await closed_log(directory, 40, file_bytes=1000)
    files = sorted(directory.glob("*.log"))
    files[1].unlink()
    with pytest.raises(StorageCorrupted, match="is missing entries"):
        await SegmentLog.open(directory, file_bytes=1000)
    # The lock was released: after a repair, the directory opens.
    for path in files[2:]:
        path.unlink()
    async with await SegmentLog.open(directory, file_bytes=1000) as log:
        assert log.last_entry_id == int(files[1].stem) - 1


async def test_a_seal_that_does_not_match_the_data_is_reported(tmp_path: Path) -> None:
    directory = tmp_path / "seg"
    async with await SegmentLog.open(directory) as log:
        await fill(log, 5)
        await log.terminate()
    path = last_file(directory)
    path.write_bytes(path.read_bytes()[:-3])
    with pytest.raises(StorageCorrupted, match="sealed at entry 4 but its files end at entry 3"):
        await SegmentLog.open(directory)
    (directory / "sealed").write_bytes(b"garbage")
    with pytest.raises(StorageCorrupted, match=r"seal .* is damaged"):
        await SegmentLog.open(directory)


async def test_an_open_cancelled_midway_leaves_the_directory_unlocked(tmp_path: Path) -> None:
    directory = tmp_path / "seg"
    await closed_log(directory, 200, file_bytes=2000)
    executor = ThreadPoolExecutor(max_workers=1)
    opening = asyncio.create_task(SegmentLog.open(directory, file_bytes=2000, executor=executor))
    await asyncio.sleep(0)  # recovery has started on the worker thread
    opening.cancel()
    with pytest.raises(asyncio.CancelledError):
        await opening
    await asyncio.to_thread(executor.shutdown, wait=True)  # recovery finished
    async with asyncio.timeout(TIMEOUT):
        while True:  # the release runs on the loop once the thread's result arrives
            try:
                log = await SegmentLog.open(directory, file_bytes=2000)
                break
            except StorageLocked:
                await asyncio.sleep(0)
    assert log.last_entry_id == 199
    await asyncio.gather(log.close(), log.close())  # concurrent closes are one close
