"""``stctl consume -n NS`` without a TOPIC: every topic of the namespace (those matching every
``--filter``), each printed line naming its topic; usage errors exit 2."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from namespace_topics import NAMESPACE, create_topics, produce_each, qualified

from scalable_topics.client import Client
from support.inprocess_service import Service, running_service

WAIT_SECONDS = 60.0  # bounds a failing test only


@pytest.fixture
async def service(tmp_path: Path) -> AsyncIterator[Service]:
    async with running_service(tmp_path, brokers=2) as running:
        yield running


async def stctl_consume(*args: str) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        *(sys.executable, "-m", "scalable_topics.cli", "consume", *args),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )


async def finished(process: asyncio.subprocess.Process) -> tuple[int, list[str], str]:
    async with asyncio.timeout(WAIT_SECONDS):
        out, err = await process.communicate()
    assert process.returncode is not None
    return process.returncode, out.decode().splitlines(), err.decode()


async def printed_lines(process: asyncio.subprocess.Process, count: int) -> list[str]:
    assert process.stdout is not None
    lines = []
    async with asyncio.timeout(WAIT_SECONDS):
        while len(lines) < count:
            line = await process.stdout.readline()
            assert line, "stctl consume exited"
            lines.append(line.decode().rstrip("\n"))
    return lines


@pytest.mark.slow
async def test_it_reads_every_topic_of_the_namespace_and_names_each_lines_topic(
    service: Service,
) -> None:
    async with Client(service.url) as client:
        await create_topics(client, ["a", "b"])
        sent = await produce_each(client, ["a", "b"], 3)
        process = await stctl_consume(
            "-n", NAMESPACE, "-s", "billing", "-c", "6", "--url", service.url
        )
        code, lines, err = await finished(process)
        assert code == 0, err
        # TOPIC SEGMENT:ENTRY:INDEX key=KEY PAYLOAD, the payload naming the topic it was sent to
        assert sorted(line.split(" ", 3)[3] for line in lines) == sorted(sent)
        for line in lines:
            topic, _, key, payload = line.split(" ", 3)
            assert payload.startswith(f"{topic}|") and key.startswith("key=k")

        # All acknowledged: JSON lines (with their topic) for what comes next, and only that.
        later = await produce_each(client, ["b"], 2, start=3)
        process = await stctl_consume(
            "-n", NAMESPACE, "-s", "billing", "-c", "2", "-o", "json", "--url", service.url
        )
        code, lines, err = await finished(process)
        assert code == 0, err
        objects = [json.loads(line) for line in lines]
        assert [o["payload"] for o in objects] == later
        assert {o["topic"] for o in objects} == {qualified("b")}


@pytest.mark.slow
async def test_filters_select_the_topics_and_follow_takes_one_created_later(
    service: Service,
) -> None:
    async with Client(service.url) as client:
        await create_topics(client, ["red"], properties={"team": "red"})
        await create_topics(client, ["blue"], properties={"team": "blue"})
        await produce_each(client, ["blue"], 2)
        process = await stctl_consume(
            "-n", NAMESPACE, "-s", "tail", "--filter", "team=red", "-f", "--url", service.url
        )
        try:
            first = await produce_each(client, ["red"], 2)
            assert [line.split(" ", 3)[3] for line in await printed_lines(process, 2)] == first
            await create_topics(client, ["red-2"], properties={"team": "red"})
            # Sent maybe before the command attaches to red-2: its new subscription starts at
            # the earliest message.
            [late] = await produce_each(client, ["red-2"], 1)
            lines = await printed_lines(process, 1)
            assert lines[0].split(" ", 3)[3] == late
            assert lines[0].startswith(f"{qualified('red-2')} ")
            process.send_signal(signal.SIGTERM)
            code, rest, err = await finished(process)
            assert code == 0, err
            # Blue never matched: none of its messages was printed.
            assert not any(line.startswith(qualified("blue")) for line in rest)
        finally:
            if process.returncode is None:
                process.kill()
                await process.wait()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("-s", "billing"), "give the TOPIC to consume, or -n NAMESPACE"),
        (("orders", "-s", "billing", "--filter", "a=b"), "--filter selects topics of a namespace"),
        (("-n", NAMESPACE, "-s", "billing", "--filter", "a"), "expected KEY=VALUE"),
        (("-n", NAMESPACE, "-s", "billing", "--filter", "a=1", "--filter", "a=2"), "given twice"),
        (("-n", "Not_A_Namespace", "-s", "billing"), "namespace"),
    ],
)
async def test_usage_errors_exit_2(args: tuple[str, ...], message: str) -> None:
    process = await stctl_consume(*args, "--url", "ws://127.0.0.1:1")
    code, _, err = await finished(process)
    assert code == 2, err
    assert message in err
