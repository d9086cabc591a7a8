"""``stctl consume --follow``: prints each message as it arrives until SIGINT or SIGTERM, then
closes cleanly and exits 0; what it printed is acknowledged, so nobody gets it again."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from scalable_topics.client import Client
from support.inprocess_service import Service, running_service

WAIT_SECONDS = 60.0  # bounds a failing test only


@pytest.fixture
async def service(tmp_path: Path) -> AsyncIterator[Service]:
    async with running_service(tmp_path, brokers=2) as running:
        yield running


async def follow(service: Service, *args: str) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        *(sys.executable, "-m", "scalable_topics.cli", "consume", "orders", "-s", "tail"),
        *("--follow", "--url", service.url, *args),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )


async def printed_lines(process: asyncio.subprocess.Process, count: int) -> list[str]:
    assert process.stdout is not None
    lines = []
    async with asyncio.timeout(WAIT_SECONDS):
        while len(lines) < count:
            line = await process.stdout.readline()
            assert line, "stctl consume exited"
            lines.append(line.decode().rstrip("\n"))
    return lines


@pytest.mark.parametrize("stop", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
async def test_follow_prints_as_messages_come_and_stops_cleanly_on_a_signal(
    service: Service, stop: signal.Signals
) -> None:
    await service.create_topic("orders", initial=1)
    process = await follow(service)
    try:
        async with Client(service.url) as client:
            producer = await client.create_producer("orders")
            for index in range(3):
                await producer.send(f"first-{index}".encode())
            first = await printed_lines(process, 3)
            # Still following: what comes later is printed too, with no --timeout to end it.
            for index in range(2):
                await producer.send(f"later-{index}".encode())
            later = await printed_lines(process, 2)
            assert [line.split(" ", 2)[2] for line in first + later] == [
                "first-0",
                "first-1",
                "first-2",
                "later-0",
                "later-1",
            ]
            process.send_signal(stop)
            async with asyncio.timeout(WAIT_SECONDS):
                _, stderr = await process.communicate()
            assert process.returncode == 0, stderr.decode()
            assert stderr == b""

            # Every printed message was acknowledged before the exit: a new consumer of the
            # subscription starts after them, at the next message.
            await producer.send(b"after")
            again = await client.subscribe_queue("orders", "tail")
            assert (await again.receive(wait_seconds=WAIT_SECONDS)).payload == b"after"
            await again.close()
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()


async def test_follow_refuses_a_count_or_a_timeout(service: Service) -> None:
    for extra in (("-c", "3"), ("--timeout", "5")):
        process = await follow(service, *extra)
        async with asyncio.timeout(WAIT_SECONDS):
            _, err = await process.communicate()
        assert process.returncode == 2
        assert err.decode().startswith("stctl consume: --follow reads until interrupted")
