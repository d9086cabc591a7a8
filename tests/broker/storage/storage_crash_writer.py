"""A process that writes to a segment log and a cursor store until it is killed (SIGKILL test).

storage_crash_writer.py LOG_DIR CURSOR_DIR ROUND
    Appends records from several tasks and saves the cursor states of several subscriptions
    from others, as fast as possible. After each append returns it prints
    ``A <entry id> <sha256 of the payload>``; after each save returns, ``C <subscription> <n>``
    where the saved state is ``state_for(n)``. Files are small so that the log rolls and the
    journal compacts while it runs.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import sys
from typing import Any

from scalable_topics.broker.storage import CursorState, CursorStore, SegmentLog
from scalable_topics.model.position import Position

APPENDERS = 6
SUBSCRIPTIONS = 4
LOG_OPTIONS: dict[str, Any] = {"file_bytes": 64 * 1024, "index_interval_bytes": 1024}
CURSOR_OPTIONS: dict[str, Any] = {"compact_bytes": 2048}


def state_for(n: int) -> CursorState:
    """The n-th state of a subscription; n can be read back as ``mark_delete + 1``."""
    state = CursorState.starting_at(n)
    for entry in range(n + 2, n + 2 + n % 7):
        state.ack(Position(entry * 2), 1)
    state.ack(Position(n + 1, n % 5), 5)
    return state


def emit(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


async def append_forever(log: SegmentLog, tag: str) -> None:
    n = 0
    while True:
        payload = f"{tag}:{n}:".encode() + os.urandom(1 + (n * 37) % 1500)
        entry_id = await log.append(payload, n)
        emit(f"A {entry_id} {hashlib.sha256(payload).hexdigest()}")
        n += 1


async def save_forever(store: CursorStore, subscription: str) -> None:
    current = store.load(subscription)
    n = 0 if current is None else current.mark_delete + 1
    while True:
        n += 1
        await store.save(subscription, state_for(n))
        emit(f"C {subscription} {n}")


async def main(log_dir: str, cursor_dir: str, round_: str) -> None:
    log = await SegmentLog.open(log_dir, **LOG_OPTIONS)
    store = await CursorStore.open(cursor_dir, **CURSOR_OPTIONS)
    await asyncio.gather(
        *(append_forever(log, f"{round_}-{i}") for i in range(APPENDERS)),
        *(save_forever(store, f"sub-{i}") for i in range(SUBSCRIPTIONS)),
    )


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:]))
