"""Autoscale end to end in ``stctl standalone``, with short windows and cooldowns: a keyed
producer above the split threshold splits the topic up to its cap, and when it stops the
segments merge back once cold for the merge window; the scaling checker's ordered consumers
run all along, and nothing is lost or reordered. Once with the Spark load job off (the
controller's own evaluation of the load records alone), once with it on."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from scaling_checker import (
    CUMULATIVE,
    KEYED,
    STREAM,
    TOPIC,
    Ledger,
    _caught_up,
    consume_keyed,
    consume_stream,
    produce,
)

from scalable_topics.client import Client
from scalable_topics.client.admin import Admin
from scalable_topics.model.autoscale_config import CLUSTER_CONFIGMAP, CLUSTER_CONFIGMAP_KEY
from scalable_topics.model.resources import ScalableTopic
from scalable_topics.store import EmbeddedStore
from support.eventually import eventually
from support.standalone_process import standalone

pytestmark = pytest.mark.slow

SYSTEM_NAMESPACE = "scalable-topics"  # standalone's
NAMESPACE, NAME = TOPIC.split("/")
REPORT_INTERVAL = 0.5
SPLIT_COOLDOWN = 2
MAX_SEGMENTS = 4
# The producer sends 12 keys about every 20 ms (some 25 to 50 messages per key and second,
# with the machine busy or not). Their hashes fall 6 and 6 in the halves of the hash space, so
# one segment, then each of two, is over the split threshold; the cap stops it at four. Only
# msgRateIn decides: the other thresholds are out of reach.
KEYS = 12
SPLIT_MSG_RATE = 80.0
MERGE_MSG_RATE = 10.0
OUT_OF_REACH = {"msgRateOut": 1e9, "byteRateIn": 1e12, "byteRateOut": 1e12}
AUTO_SCALE = {
    "minSegments": 1,
    "maxSegments": MAX_SEGMENTS,
    "splitCooldownSeconds": SPLIT_COOLDOWN,
    "mergeCooldownSeconds": 2,
    "mergeWindowSeconds": 4,
    "splitThresholds": {"msgRateIn": SPLIT_MSG_RATE, **OUT_OF_REACH},
    "mergeThresholds": {
        "msgRateIn": MERGE_MSG_RATE,
        **{rate: value / 10 for rate, value in OUT_OF_REACH.items()},
    },
}
SCALE_SECONDS = 120.0  # bounds a run that does not scale only
# The load job runs every 2 s, over windows short enough to see this test's load, on a history
# the brokers write every second.
LOAD_JOB_FLAGS = (
    *("--load-job-interval", "2", "--load-job-windows", "2s,4s,8s,16s"),
    *("--load-history-flush", "1"),
)


@asynccontextmanager
async def system(root: Path, *flags: str) -> AsyncIterator[tuple[str, str, EmbeddedStore]]:
    """Standalone with the cluster's report interval cut to REPORT_INTERVAL (the ConfigMap is
    written before it starts, so every report uses it)."""
    async with await EmbeddedStore.open(root / "store.db") as store:
        await store.create(
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": CLUSTER_CONFIGMAP, "namespace": SYSTEM_NAMESPACE},
                "data": {CLUSTER_CONFIGMAP_KEY: f"loadReportIntervalSeconds: {REPORT_INTERVAL}\n"},
            }
        )
        async with standalone(root, *flags) as running:
            yield running.url, running.token, store


async def read_topic(store: EmbeddedStore) -> ScalableTopic:
    return ScalableTopic.model_validate(await store.get(ScalableTopic.KIND, NAMESPACE, NAME))


async def active_segments(store: EmbeddedStore) -> int:
    topic = await read_topic(store)
    return topic.status.active_segments or 0 if topic.status.pending_operation is None else -1


async def auto_events(store: EmbeddedStore) -> list[dict[str, Any]]:
    listing = await store.list("Event", namespace=NAMESPACE)
    return [e for e in listing.items if e.get("reason") in ("AutoSplit", "AutoMerge")]


@pytest.mark.parametrize("load_job", ["off", "on"])
async def test_load_splits_a_topic_and_its_end_merges_it_with_nothing_lost_or_reordered(
    tmp_path: Path, load_job: str
) -> None:
    flags = ("--load-job-interval", "0") if load_job == "off" else LOAD_JOB_FLAGS
    async with system(tmp_path, *flags) as (url, token, store):
        async with Admin(url, token) as admin:
            await admin.create_topic(
                TOPIC,
                subscriptions=[(STREAM, "Stream"), (KEYED, "Queue")],
                auto_scale=AUTO_SCALE,
            )
        await eventually(lambda: _ready(store), "the topic Ready", timeout=30)
        if load_job == "on":  # its Spark session is up and it reads the topic
            await eventually(
                lambda: _recommended_since(store, None), "a first recommendation", timeout=120
            )
        ledger = Ledger()
        clients = [Client(url, auth_token=token, client_name=f"auto-{n}") for n in range(3)]
        producing, consuming = asyncio.Event(), asyncio.Event()
        consumers = [
            asyncio.create_task(consume_stream(clients[1], "stream-0", ledger, consuming)),
            asyncio.create_task(consume_keyed(clients[2], "keyed-0", ledger, consuming)),
        ]
        started = time.monotonic()
        producer = asyncio.create_task(
            produce(clients[0], "producer", [f"key{k}" for k in range(KEYS)], ledger, producing)
        )
        try:
            await eventually(lambda: _at_least(store, 2), "the first split", timeout=SCALE_SECONDS)
            first_split = time.monotonic() - started
            await eventually(
                lambda: _exactly(store, MAX_SEGMENTS), "split to the cap", timeout=SCALE_SECONDS
            )
            producing.set()
            await producer
            stopped = time.monotonic()
            await eventually(lambda: _exactly(store, 1), "merged back", timeout=SCALE_SECONDS)
            merged = time.monotonic() - stopped
            if load_job == "on":  # it ran all along, and after the merges too
                at = datetime.now(UTC)
                await eventually(
                    lambda: _recommended_since(store, at), "a later recommendation", timeout=60
                )
            await _caught_up(ledger, consumers)
        finally:
            producing.set()
            consuming.set()
            await asyncio.gather(producer, *consumers, return_exceptions=True)
            for client in clients:
                await client.close()
        topic = await read_topic(store)
        events = await auto_events(store)
    print(
        f"load job {load_job}: first split {first_split:.1f} s after the producer started "
        f"(split cooldown {SPLIT_COOLDOWN} s, report interval {REPORT_INTERVAL} s); merged back "
        f"to one segment {merged:.1f} s after it stopped; {len(ledger.acked)} messages"
    )
    for subscription in (STREAM, KEYED):
        assert ledger.lost(subscription) == 0, subscription
        assert ledger.reordered(subscription) == 0, subscription
        if subscription in CUMULATIVE:
            assert ledger.duplicates[subscription] == 0
    assert len(ledger.acked) > 1000
    # 1 -> 2 -> 4 takes three splits, 4 -> 2 -> 1 three merges, each announced with its rule.
    reasons = [e["reason"] for e in events]
    assert reasons.count("AutoSplit") == 3 and reasons.count("AutoMerge") == 3, reasons
    assert all("msgRateIn" in e["message"] for e in events if e["reason"] == "AutoSplit")
    auto_scale = topic.status.auto_scale
    assert auto_scale is not None and auto_scale.last_split_time is not None
    assert auto_scale.last_merge_time is not None


async def _recommended_since(store: EmbeddedStore, since: datetime | None) -> bool:
    """The load job wrote a recommendation for the topic (after ``since``)."""
    auto_scale = (await read_topic(store)).status.auto_scale
    recommendation = None if auto_scale is None else auto_scale.recommendation
    return (
        recommendation is not None
        and recommendation.source == "spark"
        and (since is None or recommendation.computed_at > since)
    )


async def _ready(store: EmbeddedStore) -> bool:
    return (await read_topic(store)).status.phase == "Ready"


async def _at_least(store: EmbeddedStore, count: int) -> bool:
    return await active_segments(store) >= count


async def _exactly(store: EmbeddedStore, count: int) -> bool:
    return await active_segments(store) == count
