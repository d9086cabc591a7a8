"""Several OS processes on one embedded store file: no lost update, and no loss on SIGKILL."""

from __future__ import annotations

import asyncio
import hashlib
import signal
import sqlite3
import sys
from pathlib import Path

import pytest
from store_testkit import TOPIC, events_through, topic

from scalable_topics.store import EmbeddedStore, WatchEvent

WRITER = Path(__file__).with_name("writer_process.py")
PROCESS_TIMEOUT = 60.0


async def spawn(*args: str) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        sys.executable,
        str(WRITER),
        *args,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )


@pytest.mark.slow
async def test_processes_incrementing_one_counter_lose_no_update(tmp_path: Path) -> None:
    path = tmp_path / "store.db"
    async with await EmbeddedStore.open(path) as store:
        await store.create(topic("counter", spec={"count": 0}))
        writers, increments = 4, 40
        processes = [
            await spawn("cas", str(path), "counter", str(increments)) for _ in range(writers)
        ]
        async with asyncio.timeout(PROCESS_TIMEOUT):
            outputs = await asyncio.gather(*(p.communicate() for p in processes))
        for process, (_, stderr) in zip(processes, outputs, strict=True):
            assert process.returncode == 0, stderr.decode()

        reports = [line.split() for out, _ in outputs for line in out.decode().splitlines()]
        assert all(report[0] == "ok" for report in reports)
        versions = [int(report[1]) for report in reports]
        counts = [int(report[2]) for report in reports]
        final = await store.get(TOPIC, "default", "counter")
        assert final["spec"]["count"] == len(reports) == writers * increments
        assert sorted(counts) == list(range(1, writers * increments + 1))  # each value once
        assert len(set(versions)) == len(versions)
        assert int(final["metadata"]["resourceVersion"]) == max(versions)


async def collect(store: EmbeddedStore, start: str, seen: list[WatchEvent]) -> None:
    async with store.watch(TOPIC, resource_version=start) as events:
        async for event in events:
            seen.append(event)


def check_integrity(path: Path) -> None:
    connection = sqlite3.connect(path)
    try:
        assert connection.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
    finally:
        connection.close()


@pytest.mark.slow
async def test_writes_reported_committed_survive_sigkill(tmp_path: Path) -> None:
    path = tmp_path / "store.db"
    for round_ in range(3):
        async with await EmbeddedStore.open(path, poll_interval=0.01) as observer:
            start = (await observer.list(TOPIC)).resource_version
            before_kill: list[WatchEvent] = []
            watcher = asyncio.create_task(collect(observer, start, before_kill))

            writer = await spawn("churn", str(path), f"round{round_}")
            assert writer.stdout is not None
            reported: list[list[str]] = []
            async with asyncio.timeout(PROCESS_TIMEOUT):
                while len(reported) < 300 + 50 * round_:
                    line = await writer.stdout.readline()
                    assert line, (await writer.communicate())[1].decode()
                    reported.append(line.decode().split())
            writer.send_signal(signal.SIGKILL)
            async with asyncio.timeout(PROCESS_TIMEOUT):
                rest, _ = await writer.communicate()
            assert writer.returncode == -signal.SIGKILL
            # Lines already in the pipe were printed after their write returned: committed too.
            reported += [
                line.split()
                for line in rest.decode().splitlines(keepends=True)
                if line.endswith("\n")
            ]

            watcher.cancel()
            await asyncio.gather(watcher, return_exceptions=True)
        assert before_kill, "the watcher saw nothing while the writer ran"

        check_integrity(path)
        async with await EmbeddedStore.open(path) as reopened:
            final = await reopened.list(TOPIC, namespace="churn")
            resumed: list[WatchEvent] = []
            if int(final.resource_version) > int(before_kill[-1].resource_version):
                async with reopened.watch(
                    TOPIC, resource_version=before_kill[-1].resource_version
                ) as events:
                    resumed = await events_through(events, int(final.resource_version))

        # The two watches together saw every revision from the start, once and in order.
        history = before_kill + resumed
        revisions = [int(event.resource_version) for event in history]
        assert revisions == list(range(int(start) + 1, int(final.resource_version) + 1))

        # Every reported write is in the history, intact; at most the write in flight was not
        # reported.
        written = {
            (e.object["metadata"]["name"], e.resource_version, e.object["spec"]["sha"])
            for e in history
        }
        assert {tuple(report) for report in reported} <= written
        assert len(history) - len(reported) in (0, 1)

        # Every object is consistent and at least as new as its last reported version.
        objects = {o["metadata"]["name"]: o for o in final.items}
        last_reported = {name: (int(version), sha) for name, version, sha in reported}
        for name, (version, sha) in last_reported.items():
            current = objects[name]
            spec = current["spec"]
            assert hashlib.sha256(spec["payload"].encode()).hexdigest() == spec["sha"]
            assert int(current["metadata"]["resourceVersion"]) >= version
            if int(current["metadata"]["resourceVersion"]) == version:
                assert spec["sha"] == sha
