"""``stctl topics stats`` (and the admin API's stats) count a backlog in messages: batched
sends store several messages per log entry."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from scalable_topics.client import Client
from scalable_topics.client.admin import Admin
from support.inprocess_service import Service, running_service

MESSAGES = 40


@pytest.fixture
async def service(tmp_path: Path) -> AsyncIterator[Service]:
    async with running_service(tmp_path, brokers=1) as running:
        yield running


async def stctl_stats(service: Service) -> dict[str, object]:
    process = await asyncio.create_subprocess_exec(
        *(sys.executable, "-m", "scalable_topics.cli", "topics", "stats", "orders"),
        *("--url", service.url, "-o", "json"),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=dict(os.environ),
    )
    async with asyncio.timeout(60):
        out, err = await process.communicate()
    assert process.returncode == 0, err.decode()
    stats: dict[str, object] = json.loads(out)
    return stats


async def test_the_backlog_of_batched_sends_counts_messages(service: Service) -> None:
    await service.create_topic("orders", initial=1, subscriptions=[("billing", "Queue")])
    async with Client(service.url) as client, Admin(service.url) as admin:
        # Batches of 8, closed by count: 40 messages in 5 entries.
        producer = await client.create_producer(
            "orders", batching_max_messages=8, batching_max_delay=60
        )
        for index in range(MESSAGES):
            await producer.send_async(f"m{index}".encode())
        await producer.flush()

        stats = await admin.stats("orders")
        [segment] = stats["segments"]
        assert segment["entries"] < MESSAGES  # the sends were batched
        assert (stats["backlog"], segment["backlog"]) == (MESSAGES, MESSAGES)
        assert [(s["name"], s["backlog"]) for s in stats["subscriptions"]] == [
            ("billing", MESSAGES)
        ]

        consumer = await client.subscribe_queue("orders", "billing")
        for _ in range(11):  # a batch and a part of the next
            await consumer.acknowledge(await consumer.receive(wait_seconds=30), durable=True)
        await consumer.close()
        assert (await admin.stats("orders"))["backlog"] == MESSAGES - 11
        assert (await stctl_stats(service))["backlog"] == MESSAGES - 11
