"""Topic stats gathered from real broker applications on loopback, and ``stctl topics stats``."""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest
from aiohttp.test_utils import TestServer
from segment_traffic import produce
from topic_cluster import (
    NAMESPACE,
    TOPIC,
    Cluster,
    running_cluster,
    segments_by_id,
    split_by_hand,
    topic_manifest,
)

from scalable_topics.admin.broker_admin import admin_base
from scalable_topics.admin.stats_gather import gather_topic_stats
from scalable_topics.model.clock import SystemClock
from scalable_topics.protocol import SegmentSubscriptionType
from scalable_topics.store import NotFound
from support.wire_client import WireClient


@pytest.fixture
async def cluster(tmp_path: Path, make_broker: Callable[..., TestServer]) -> AsyncIterator[Cluster]:
    async with running_cluster(tmp_path, make_broker) as running:
        yield running


async def busy_topic(cluster: Cluster) -> dict[int, str]:
    """Segments 0 (sealed, 2 messages), 1 (4 messages), 2 and 3; returns their brokers."""
    await cluster.store.create(topic_manifest(initial=2))
    assert await cluster.lifecycle().reconcile(NAMESPACE, TOPIC)
    brokers = {sid: s.status.broker for sid, s in (await segments_by_id(cluster.store)).items()}
    await produce(str(brokers[0]), NAMESPACE, TOPIC, 0, [b"a", b"b"])
    await produce(str(brokers[1]), NAMESPACE, TOPIC, 1, [b"c", b"d", b"e", b"f"])
    await split_by_hand(cluster, 0, SystemClock())
    assert await cluster.lifecycle().reconcile(NAMESPACE, TOPIC)
    return {sid: str(s.status.broker) for sid, s in (await segments_by_id(cluster.store)).items()}


async def test_stats_add_up_segments_subscriptions_and_consumers(cluster: Cluster) -> None:
    brokers = await busy_topic(cluster)
    consumer = await WireClient.connect(admin_base(brokers[1]))
    try:
        await consumer.subscribe(
            1, f"{NAMESPACE}/{TOPIC}", 1, "billing", SegmentSubscriptionType.SHARED, permits=0
        )
        stats = await gather_topic_stats(cluster.store, cluster.admin, NAMESPACE, TOPIC)
    finally:
        await consumer.close()
    assert (stats.active_segments, stats.sealed_segments, stats.unavailable_segments) == (3, 1, 0)
    assert (stats.epoch, stats.phase) == (1, "Ready")
    assert {s.segment_id: s.report.backlog for s in stats.segments if s.report} == {
        0: 2,
        1: 4,
        2: 0,
        3: 0,
    }
    assert {s.segment_id: s.state for s in stats.segments} == {
        0: "Sealed",
        1: "Active",
        2: "Active",
        3: "Active",
    }
    [billing] = stats.subscriptions
    assert (billing.name, billing.type, billing.state) == ("billing", "Stream", "Ready")
    assert (billing.backlog, billing.consumers, billing.segments) == (6, 1, 4)
    assert stats.backlog == 6
    assert stats.rates.msg_rate_in > 0  # six messages went in within the rate window


async def test_an_unreachable_broker_is_reported_not_fatal(cluster: Cluster) -> None:
    brokers = await busy_topic(cluster)
    down = {sid for sid, url in brokers.items() if url == cluster.broker_urls[0]}
    await cluster.servers[0].close()
    stats = await gather_topic_stats(cluster.store, cluster.admin, NAMESPACE, TOPIC)
    assert down and stats.unavailable_segments == len(down)
    for segment in stats.segments:
        if segment.segment_id in down:
            assert segment.report is None
            assert segment.unavailable is not None
            assert segment.unavailable.startswith("broker unreachable")
        else:
            assert segment.report is not None


async def test_a_missing_topic_raises_not_found(cluster: Cluster) -> None:
    with pytest.raises(NotFound):
        await gather_topic_stats(cluster.store, cluster.admin, NAMESPACE, "nothing")


async def stctl(*args: str) -> tuple[int, str, str]:
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "scalable_topics.cli",
        *args,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    async with asyncio.timeout(60):
        out, err = await process.communicate()
    assert process.returncode is not None
    return process.returncode, out.decode(), err.decode()


async def test_stctl_topics_stats(cluster: Cluster) -> None:
    await busy_topic(cluster)
    url = cluster.broker_urls[1]

    code, out, err = await stctl("topics", "stats", TOPIC, "--url", url, "--output", "json")
    assert (code, err) == (0, "")
    data = json.loads(out)
    assert data["segmentCounts"] == {"active": 3, "sealed": 1, "unavailable": 0}
    assert [s["backlog"] for s in data["segments"]] == [2, 4, 0, 0]
    assert [(s["name"], s["backlog"]) for s in data["subscriptions"]] == [("billing", 6)]

    code, out, _ = await stctl("topics", "stats", TOPIC, "-n", NAMESPACE, "--url", url)
    assert code == 0
    assert out.splitlines()[0].startswith(f"TOPIC {NAMESPACE}/{TOPIC}  EPOCH 1")
    assert "SEGMENTS 3 active, 1 sealed, 0 unavailable" in out

    code, _, err = await stctl("topics", "stats", "nothing", "--url", url)
    assert code == 1
    assert err == f"stctl topics stats: topic {NAMESPACE}/nothing not found\n"

    code, _, err = await stctl("topics", "stats", TOPIC, "--url", "etcd://somewhere")
    assert code == 2
    assert "ws://HOST:PORT" in err

    code, _, err = await stctl("topics", "stats")
    assert code == 2
    assert "NAME" in err

    code, _, err = await stctl("topics")
    assert code == 2
    assert "stats" in err
