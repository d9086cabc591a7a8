"""``stctl produce`` against brokers that die mid-stream: it stops within its send timeout, exits
1, and says how many messages were acknowledged and how many failed; what it calls
acknowledged is what a consumer reads back."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from typing import Any

import pytest
from client_cluster import ClientCluster

from scalable_topics.client import Client

pytestmark = pytest.mark.slow

# Bounds a failing test only: before stctl produce stopped at its first failure, the runs below
# went on for minutes.
EXIT_TIMEOUT = 30.0
# Long enough for a loaded machine to acknowledge a message, short enough to wait out.
SEND_TIMEOUT = 3


async def stctl_produce(cluster: ClientCluster, *args: str) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "scalable_topics.cli",
        "produce",
        "orders",
        "--send-timeout",
        str(SEND_TIMEOUT),
        "--url",
        cluster.service_url,
        "-o",
        "json",
        *args,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )


async def ended(process: asyncio.subprocess.Process) -> tuple[int, dict[str, Any], str]:
    """Exit code, the JSON summary and stderr, once the process exits by itself (its stdin may
    still be open: it must not wait for more input)."""
    assert process.stdout is not None and process.stderr is not None
    try:
        async with asyncio.timeout(EXIT_TIMEOUT):
            stdout, stderr = await asyncio.gather(process.stdout.read(), process.stderr.read())
            code = await process.wait()
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
    return code, json.loads(stdout), stderr.decode()


async def read_stored(client: Client, subscription: str, count: int) -> list[bytes]:
    """``count`` messages from the start of the topic, through a new queue subscription."""
    consumer = await client.subscribe_queue("orders", subscription, initial_position="Earliest")
    try:
        return [(await consumer.receive(wait_seconds=30)).payload for _ in range(count)]
    finally:
        await consumer.close()


def kill_brokers(cluster: ClientCluster) -> None:
    for broker in cluster.brokers:
        broker.kill()


async def test_produce_reports_acknowledged_and_failed_when_the_service_dies(
    cluster: ClientCluster,
) -> None:
    await cluster.create_topic("orders", initial=1, subscriptions=[("audit", "Stream")])
    process = await stctl_produce(cluster, "--key-separator=:")
    assert process.stdin is not None
    before = [f"k{n % 5}:before-{n}" for n in range(50)]
    process.stdin.write("".join(line + "\n" for line in before).encode())
    await process.stdin.drain()
    # Read back, so stored; stctl has their receipts too, as a broker answers a batch before
    # it hands it to subscriptions.
    async with cluster.client() as client:
        await read_stored(client, "probe", len(before))
    kill_brokers(cluster)
    after = [f"k{n % 5}:after-{n}" for n in range(30)]
    process.stdin.write("".join(line + "\n" for line in after).encode())
    await process.stdin.drain()

    code, summary, stderr = await ended(process)  # stdin stays open: it stops on its own

    assert code == 1, stderr
    assert (summary["acknowledged"], summary["failed"]) == (50, 30), stderr
    assert summary["notSent"] is None  # the length of stdin is unknown
    [line] = stderr.splitlines()
    assert line.startswith("stctl produce: 30 of 80 messages failed"), line
    assert f"send timeout of {SEND_TIMEOUT} s" in line

    process.stdin.close()
    await asyncio.gather(*(broker.start() for broker in cluster.brokers))
    async with cluster.client() as client:
        producer = await client.create_producer("orders")
        await producer.send(b"end")
        await producer.close()
        consumer = await client.subscribe_stream("orders", "audit", "reader")
        stored = []
        while (message := await consumer.receive(wait_seconds=30)).payload != b"end":
            stored.append(message.payload.decode())
    assert stored == [line.split(":", 1)[1] for line in before]


async def test_produce_ends_within_its_send_timeout_when_the_service_dies_for_good(
    cluster: ClientCluster,
) -> None:
    await cluster.create_topic("orders", initial=2)
    total = 1_000_000
    process = await stctl_produce(cluster, "-m", "hello", "--count", str(total))
    async with cluster.client() as client:
        await read_stored(client, "probe", 1000)  # mid-stream
    kill_brokers(cluster)

    code, summary, stderr = await ended(process)

    assert code == 1, stderr
    acknowledged, failed, not_sent = summary["acknowledged"], summary["failed"], summary["notSent"]
    assert acknowledged >= 1000 and failed > 0 and not_sent > 0, summary
    assert acknowledged + failed + not_sent == total
    [line] = stderr.splitlines()
    assert line.startswith(f"stctl produce: {failed} of {acknowledged + failed} messages failed")
    assert f"{not_sent} not sent" in line
