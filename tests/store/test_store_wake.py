"""Change feeds woken by the commits of other processes and instances (store/embedded_wake.py),
not by polling: every store here polls once an hour, so only a wakeup delivers in time."""

from __future__ import annotations

import asyncio
import os
import signal
from pathlib import Path

import pytest
from store_testkit import TOPIC, topic
from test_store_processes import PROCESS_TIMEOUT, spawn

from scalable_topics.store import EmbeddedStore, EmbeddedWatch, WatchEvent
from scalable_topics.store.embedded_wake import WAKE_SUFFIX

HOUR = 3600.0


async def open_unpolled(path: Path) -> EmbeddedStore:
    return await EmbeddedStore.open(path, poll_interval=HOUR, fallback_poll_interval=HOUR)


async def next_event(events: EmbeddedWatch) -> WatchEvent:
    async with asyncio.timeout(PROCESS_TIMEOUT):  # bounds a failing test only
        return await anext(events)


def pipes(path: Path) -> list[str]:
    return sorted(os.listdir(f"{path}{WAKE_SUFFIX}"))


async def watching(store: EmbeddedStore) -> EmbeddedWatch:
    """A watch whose feed has read the file once (so its wake pipe is in place)."""
    start = (await store.list(TOPIC)).resource_version
    events = store.watch(TOPIC, resource_version=start)
    await events.__aenter__()
    await store.create(topic("own-write"))  # wakes the feed on its own loop, no pipe needed
    assert (await next_event(events)).object["metadata"]["name"] == "own-write"
    return events


async def assert_delivered(reader: EmbeddedStore, writer: EmbeddedStore, name: str) -> None:
    """A topic ``writer`` creates reaches a watch on ``reader``."""
    events = await watching(reader)
    try:
        await writer.create(topic(name))
        event = await next_event(events)
        assert event.object["metadata"]["name"] == name
    finally:
        await events.aclose()


@pytest.mark.slow
@pytest.mark.parametrize("depth", [1, 12], ids=["short-path", "path-past-socket-limit"])
async def test_a_write_from_another_process_wakes_a_watch(tmp_path: Path, depth: int) -> None:
    # 12 levels of 12 characters put the pipes past the 104 bytes a Unix socket's path may have.
    directory = tmp_path.joinpath(*(["twelve-chars"] * depth))
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "store.db"
    async with await open_unpolled(path) as store:
        events = await watching(store)
        try:
            writer = await spawn("create", str(path), "theirs")
            async with asyncio.timeout(PROCESS_TIMEOUT):
                _, stderr = await writer.communicate()
            assert writer.returncode == 0, stderr.decode()
            event = await next_event(events)
            assert event.object["metadata"]["name"] == "theirs"
        finally:
            await events.aclose()


@pytest.mark.slow
async def test_a_write_here_wakes_a_watch_in_another_process(tmp_path: Path) -> None:
    path = tmp_path / "store.db"
    watcher = await spawn("watch", str(path), "theirs")
    assert watcher.stdout is not None
    try:
        async with asyncio.timeout(PROCESS_TIMEOUT):
            assert await watcher.stdout.readline() == b"ready\n"
        async with await open_unpolled(path) as store:
            await store.create(topic("mine"))
            async with asyncio.timeout(PROCESS_TIMEOUT):
                assert await watcher.stdout.readline() == b"mine\n"
    finally:
        watcher.kill()
        await watcher.communicate()


async def test_a_write_wakes_another_instance_in_the_same_process(tmp_path: Path) -> None:
    path = tmp_path / "store.db"
    async with await open_unpolled(path) as reader, await open_unpolled(path) as writer:
        await assert_delivered(reader, writer, "from-the-other-instance")


async def test_a_feed_removes_its_pipe_when_it_stops(tmp_path: Path) -> None:
    path = tmp_path / "store.db"
    async with await open_unpolled(path) as store:
        events = await watching(store)
        assert len(pipes(path)) == 1
        await events.aclose()
        assert not store.feed_running
        assert pipes(path) == []


@pytest.mark.slow
async def test_a_writer_removes_the_pipe_of_a_killed_process(tmp_path: Path) -> None:
    path = tmp_path / "store.db"
    watcher = await spawn("watch", str(path), "theirs")
    assert watcher.stdout is not None
    async with asyncio.timeout(PROCESS_TIMEOUT):
        assert await watcher.stdout.readline() == b"ready\n"
    (left,) = pipes(path)
    assert left.startswith(f"{watcher.pid}-")
    watcher.send_signal(signal.SIGKILL)
    await watcher.communicate()
    async with await open_unpolled(path) as store:
        assert pipes(path) == [left]  # nothing reads it, and nothing noticed yet
        await store.create(topic("after-the-kill"))
        assert pipes(path) == []


def block_the_wake_directory(path: Path) -> None:
    Path(f"{path}{WAKE_SUFFIX}").write_text("a file where the directory of pipes would be")


async def test_without_a_wake_pipe_the_feed_polls(tmp_path: Path) -> None:
    path = tmp_path / "store.db"
    block_the_wake_directory(path)
    # The fallback poll is off: only the poll a feed without a pipe keeps can deliver.
    options = {"poll_interval": 0.01, "fallback_poll_interval": HOUR}
    async with (
        await EmbeddedStore.open(path, **options) as reader,
        await EmbeddedStore.open(path, **options) as writer,
    ):
        await assert_delivered(reader, writer, "polled")
