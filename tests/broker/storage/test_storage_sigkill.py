"""SIGKILL in the middle of appends and cursor saves loses nothing that was acknowledged."""

from __future__ import annotations

import asyncio
import hashlib
import random
import signal
import sys
from pathlib import Path

import pytest
from storage_crash_writer import CURSOR_OPTIONS, LOG_OPTIONS, SUBSCRIPTIONS, state_for

from scalable_topics.broker.storage import CursorStore, SegmentLog

WRITER = Path(__file__).with_name("storage_crash_writer.py")
PROCESS_TIMEOUT = 60.0
ROUNDS = 3


async def run_until_killed(
    log_dir: Path, cursor_dir: Path, round_: int, appends: int, saves: int
) -> list[list[str]]:
    """Start the writer, kill it once it has reported enough, return every line it printed."""
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        str(WRITER),
        str(log_dir),
        str(cursor_dir),
        str(round_),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    assert process.stdout is not None
    reported: list[list[str]] = []
    counts = {"A": 0, "C": 0}
    try:
        async with asyncio.timeout(PROCESS_TIMEOUT):
            while counts["A"] < appends or counts["C"] < saves:
                line = await process.stdout.readline()
                assert line, (await process.communicate())[1].decode()
                reported.append(line.decode().split())
                counts[reported[-1][0]] += 1
    finally:
        process.send_signal(signal.SIGKILL)
    async with asyncio.timeout(PROCESS_TIMEOUT):
        rest, _ = await process.communicate()
    assert process.returncode == -signal.SIGKILL
    # Lines already in the pipe were printed after their call returned: acknowledged too.
    text = rest.decode()
    complete = text if text.endswith("\n") else text[: text.rfind("\n") + 1]
    reported += [line.split() for line in complete.splitlines()]
    return reported


@pytest.mark.slow
async def test_acknowledged_appends_and_cursor_saves_survive_sigkill(tmp_path: Path) -> None:
    log_dir, cursor_dir = tmp_path / "log", tmp_path / "cursors"
    acknowledged: dict[int, str] = {}
    last_saved: dict[str, int] = {}
    rng = random.Random(7)
    for round_ in range(ROUNDS):
        reported = await run_until_killed(
            log_dir, cursor_dir, round_, rng.randrange(300, 600), rng.randrange(60, 150)
        )
        for kind, key, value in reported:
            if kind == "A":
                assert int(key) not in acknowledged, f"entry id {key} handed out twice"
                acknowledged[int(key)] = value
            else:
                last_saved[key] = int(value)

        async with await SegmentLog.open(log_dir, **LOG_OPTIONS) as log:
            entries = await log.read(0, max_entries=10**6, max_bytes=1 << 40)
            assert [e.entry_id for e in entries] == list(range(log.last_entry_id + 1))
            stored = {e.entry_id: hashlib.sha256(e.payload).hexdigest() for e in entries}
            missing = [i for i, digest in acknowledged.items() if stored.get(i) != digest]
            assert not missing, f"acknowledged entries lost or damaged: {missing[:10]}"
            if round_ == 0:
                assert len(log.files) > 1, "the writer never rolled a file"

        async with await CursorStore.open(cursor_dir, **CURSOR_OPTIONS) as store:
            assert store.subscriptions() == sorted(f"sub-{i}" for i in range(SUBSCRIPTIONS))
            for subscription, n in last_saved.items():
                state = store.load(subscription)
                assert state is not None
                stored_n = state.mark_delete + 1
                assert stored_n >= n, f"{subscription}: saved state {n} lost"
                assert state == state_for(stored_n), f"{subscription}: state {stored_n} damaged"
