"""CursorStore: durable saves with group commit and coalescing, compaction, recovery."""

from __future__ import annotations

import asyncio
import errno
import threading
from pathlib import Path

import msgpack
import pytest

from scalable_topics.broker.storage import (
    CursorState,
    CursorStore,
    StorageClosed,
    StorageCorrupted,
    StorageFailed,
    StorageLocked,
    durable_fs,
)
from scalable_topics.broker.storage.cursor_store import journal_name
from scalable_topics.broker.storage.record_file import encode_frame
from scalable_topics.model.position import Position

TIMEOUT = 10.0


def state_for(n: int) -> CursorState:
    """A state that differs for every n: mark_delete, a range and a partial batch."""
    state = CursorState.starting_at(n)
    state.ack(Position(n + 2), 1)
    state.ack(Position(n + 4, n % 3), 3)
    return state


class FsyncCounter:
    def __init__(self) -> None:
        self.calls = 0
        self.delay = 0.0
        self.error: OSError | None = None
        self._real = durable_fs.flush_to_disk
        self._lock = threading.Lock()

    def __call__(self, fd: int) -> None:
        if self.error is not None:
            raise self.error
        if self.delay:
            threading.Event().wait(self.delay)
        self._real(fd)
        with self._lock:
            self.calls += 1


@pytest.fixture
def fsyncs(monkeypatch: pytest.MonkeyPatch) -> FsyncCounter:
    counter = FsyncCounter()
    monkeypatch.setattr(durable_fs, "flush_to_disk", counter)
    return counter


def journals(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir() if "journal" in p.name)


async def test_saved_states_load_and_survive_reopen(tmp_path: Path) -> None:
    directory = tmp_path / "cursors"
    async with await CursorStore.open(directory) as store:
        assert store.subscriptions() == []
        assert store.load("a") is None
        await store.save("a", state_for(1))
        await store.save("b", state_for(2))
        await store.save("a", state_for(3))
        assert store.load("a") == state_for(3)
        assert store.subscriptions() == ["a", "b"]
    async with await CursorStore.open(directory) as store:
        assert store.subscriptions() == ["a", "b"]
        assert store.load("a") == state_for(3)
        assert store.load("b") == state_for(2)
        assert store.dropped_bytes == 0


async def test_a_save_is_a_snapshot_and_load_a_copy(tmp_path: Path) -> None:
    async with await CursorStore.open(tmp_path / "cursors") as store:
        state = state_for(5)
        await store.save("a", state)
        state.ack(Position(6), 1)  # the caller keeps acknowledging
        loaded = store.load("a")
        assert loaded == state_for(5)
        assert loaded is not None
        loaded.seek(0)
        assert store.load("a") == state_for(5)


async def test_delete_forgets_a_subscription_durably(tmp_path: Path) -> None:
    directory = tmp_path / "cursors"
    async with await CursorStore.open(directory) as store:
        await store.save("a", state_for(1))
        await store.save("b", state_for(1))
        await store.delete("a")
        await store.delete("never-saved")
        assert store.subscriptions() == ["b"]
    async with await CursorStore.open(directory) as store:
        assert store.subscriptions() == ["b"]
        assert store.load("a") is None


async def test_concurrent_saves_share_fsyncs_and_coalesce_per_subscription(
    tmp_path: Path, fsyncs: FsyncCounter
) -> None:
    async with await CursorStore.open(tmp_path / "cursors") as store:
        before, journal_before = fsyncs.calls, store.journal_bytes
        fsyncs.delay = 0.005

        async def saver(name: str) -> None:
            for n in range(5):
                await store.save(name, state_for(n))

        async with asyncio.timeout(TIMEOUT):
            await asyncio.gather(*(saver(f"sub-{i}") for i in range(40)))
        assert fsyncs.calls - before <= 15  # one per save would be 200
        # Fifty saves of one cursor at once: every caller returns, one record is written.
        one_record = len(encode_frame(msgpack.packb(["save", "hot", state_for(49).to_dict()])))
        written = store.journal_bytes
        async with asyncio.timeout(TIMEOUT):
            await asyncio.gather(*(store.save("hot", state_for(n)) for n in range(50)))
        assert store.journal_bytes - written == one_record
        assert store.load("hot") == state_for(49)
        assert store.journal_bytes > journal_before


async def test_the_journal_is_compacted_and_keeps_the_latest_states(tmp_path: Path) -> None:
    directory = tmp_path / "cursors"
    async with await CursorStore.open(directory, compact_bytes=2000) as store:
        for n in range(200):
            await store.save(f"sub-{n % 4}", state_for(n))
        await store.save("gone", state_for(1))
        await store.delete("gone")
        assert store.journal_bytes < 2000 + 200
        assert len(journals(directory)) == 1
        assert journals(directory) != [journal_name(1)]
    async with await CursorStore.open(directory, compact_bytes=2000) as store:
        assert store.subscriptions() == ["sub-0", "sub-1", "sub-2", "sub-3"]
        assert [store.load(f"sub-{i}") for i in range(4)] == [state_for(196 + i) for i in range(4)]


async def test_leftovers_of_a_crash_during_compaction_are_cleared(tmp_path: Path) -> None:
    directory = tmp_path / "cursors"
    async with await CursorStore.open(directory) as store:
        await store.save("a", state_for(1))
    old = directory / journal_name(1)
    # Crashed after the rename, before removing the old journal: the new one is complete.
    (directory / journal_name(2)).write_bytes(
        encode_frame(msgpack.packb(["save", "a", state_for(2).to_dict()]))
    )
    # And an unfinished journal of a later attempt.
    (directory / (journal_name(3) + ".tmp")).write_bytes(b"half written")
    async with await CursorStore.open(directory) as store:
        assert store.load("a") == state_for(2)
    assert journals(directory) == [journal_name(2)]
    assert not old.exists()


async def test_a_torn_tail_is_cut_off(tmp_path: Path) -> None:
    directory = tmp_path / "cursors"
    async with await CursorStore.open(directory) as store:
        await store.save("a", state_for(1))
        await store.save("b", state_for(2))
    path = directory / journal_name(1)
    torn = encode_frame(msgpack.packb(["save", "a", state_for(3).to_dict()]))[:-4]
    with path.open("ab") as journal:
        journal.write(torn)
    async with await CursorStore.open(directory) as store:
        assert store.dropped_bytes == len(torn)
        assert (store.load("a"), store.load("b")) == (state_for(1), state_for(2))
        await store.save("a", state_for(4))
    async with await CursorStore.open(directory) as store:
        assert store.load("a") == state_for(4)


async def test_an_intact_record_with_a_bad_state_is_corruption(tmp_path: Path) -> None:
    directory = tmp_path / "cursors"
    async with await CursorStore.open(directory) as store:
        await store.save("a", state_for(1))
    bad = state_for(1).to_dict() | {"markDelete": -7}
    with (directory / journal_name(1)).open("ab") as journal:
        journal.write(encode_frame(msgpack.packb(["save", "a", bad])))
    with pytest.raises(StorageCorrupted, match=r"bad record at offset .*markDelete -7"):
        await CursorStore.open(directory)


async def test_a_failed_fsync_fails_saves_from_then_on(
    tmp_path: Path, fsyncs: FsyncCounter
) -> None:
    directory = tmp_path / "cursors"
    store = await CursorStore.open(directory)
    await store.save("a", state_for(1))
    fsyncs.error = OSError(errno.EIO, "disk on fire")
    results = await asyncio.gather(
        *(store.save(f"s{i}", state_for(2)) for i in range(3)), return_exceptions=True
    )
    assert all(isinstance(r, StorageFailed) for r in results), results
    fsyncs.error = None
    with pytest.raises(StorageFailed, match="refuses further writes"):
        await store.save("a", state_for(3))
    await store.close()
    async with await CursorStore.open(directory) as reopened:
        assert reopened.load("a") == state_for(1)


async def test_locking_closing_and_bad_names(tmp_path: Path) -> None:
    directory = tmp_path / "cursors"
    store = await CursorStore.open(directory)
    with pytest.raises(StorageLocked):
        await CursorStore.open(directory)
    with pytest.raises(ValueError, match="non-empty string"):
        await store.save("", state_for(1))
    await store.close()
    with pytest.raises(StorageClosed):
        await store.save("a", state_for(1))
    async with await CursorStore.open(directory) as again:
        await again.save("a", state_for(1))
        await again.remove()
    assert not directory.exists()
