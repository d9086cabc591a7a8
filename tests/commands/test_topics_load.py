"""``stctl topics load`` and the route it calls (``GET .../load``) on a real broker: a topic's
load records, recommendation, last action, next eligible times, the policy with the source of
each value, and its segments' window rates from a load history written with the brokers'
schema, compared with values computed by hand."""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import aiohttp
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml

from scalable_topics.broker.load_history_files import SCHEMA
from scalable_topics.broker.topic_admin import INFORMERS_KEY
from scalable_topics.model.autoscale_config import CLUSTER_CONFIGMAP, CLUSTER_CONFIGMAP_KEY
from scalable_topics.model.layout import SegmentLayout
from scalable_topics.model.resources import TOPIC_LABEL, ScalableTopic, Segment, segment_object_name
from scalable_topics.model.timefmt import format_time
from scalable_topics.store import EmbeddedStore
from support.eventually import eventually
from support.servers import broker_server

SYSTEM = "scalable-topics"


async def seed(store: EmbeddedStore, cluster: str | None = "splitCooldownSeconds: 120\n") -> None:
    # Times relative to now, when the test runs (not when the module was imported: the whole
    # suite imports it minutes before, and the recommendation would have expired).
    now = datetime.now(UTC)
    layout = SegmentLayout.initial(2, now - timedelta(hours=1))
    await store.create(
        {
            "apiVersion": "scalabletopics.dev/v1alpha1",
            "kind": "ScalableTopic",
            "metadata": {"name": "orders", "namespace": "default"},
            "spec": {"initialSegments": 2, "autoScale": {"mergeWindowSeconds": 600}},
        }
    )
    auto_scale = {
        "lastSplitTime": format_time(now - timedelta(seconds=20)),
        "recommendation": {
            "decision": "Split",
            "segmentIds": [1],
            "rule": "msgRateIn",
            "window": "2m",
            "reason": "msgRateIn 14,200/s over 2m",
            "layoutEpoch": 0,
            "computedAt": format_time(now - timedelta(seconds=30)),
            "expiresAt": format_time(now + timedelta(minutes=2)),
        },
        "lastAction": {
            "decision": "Merge",
            "segmentIds": [3, 4],
            "rule": "coldPair",
            "reason": "cold",
            "source": "controller",
            "at": format_time(now - timedelta(hours=2)),
        },
    }
    await store.patch_status(
        ScalableTopic.KIND,
        "default",
        "orders",
        {"status": {**layout.to_status(), "phase": "Ready", "autoScale": auto_scale}},
    )
    for info in layout.active:
        name = segment_object_name("orders", info.descriptor)
        await store.create(
            {
                "apiVersion": "scalabletopics.dev/v1alpha1",
                "kind": "Segment",
                "metadata": {
                    "name": name,
                    "namespace": "default",
                    "labels": {TOPIC_LABEL: "orders"},
                },
                "spec": {
                    "topic": "orders",
                    "segmentId": info.segment_id,
                    "hashRange": {"start": info.hash_range.start, "end": info.hash_range.end},
                },
            }
        )
    await store.patch_status(
        Segment.KIND,
        "default",
        segment_object_name("orders", layout.get(0).descriptor),
        {
            "status": {
                "load": {
                    "msgRateIn": 12.5,
                    "byteRateIn": 2048.0,
                    "sampledAt": format_time(now),
                    "coldSince": format_time(now - timedelta(seconds=90)),
                }
            }
        },
    )
    if cluster is not None:
        await store.create(
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": CLUSTER_CONFIGMAP, "namespace": "scalable-topics"},
                "data": {CLUSTER_CONFIGMAP_KEY: cluster},
            }
        )


@asynccontextmanager
async def broker(
    tmp_path: Path, history: Path | None, cluster: str | None = "splitCooldownSeconds: 120\n"
) -> AsyncIterator[str]:
    """A broker application on a seeded store (keeping a load history in ``history``), once
    its caches hold the topic, its segments and the cluster's settings; its ws:// URL."""
    async with await EmbeddedStore.open(tmp_path / "store.db") as store:
        await seed(store, cluster)
        settings = {} if history is None else {"load_history": str(history)}
        server = broker_server(store, tmp_path / "broker", **settings)
        await server.start_server()
        try:
            caches = server.app[INFORMERS_KEY]
            await eventually(
                lambda: (
                    caches.topics.get("default", "orders") is not None
                    and len(caches.segments_of("default", "orders")) == 2
                    and (cluster is None or caches.configmaps.get(SYSTEM, CLUSTER_CONFIGMAP))
                ),
                "the broker's caches hold the topic, its segments and the ConfigMap",
            )
            yield f"ws://127.0.0.1:{server.port}"
        finally:
            await server.close()


async def stctl(url: str, *words: str) -> tuple[int, str, str]:
    """``stctl topics load`` as a user runs it: a process, with the broker's URL."""
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "scalable_topics.cli",
        "topics",
        "load",
        *words,
        "--url",
        url,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await process.communicate()
    assert process.returncode is not None
    return process.returncode, out.decode(), err.decode()


async def get_load(url: str, topic: str) -> tuple[int, Any]:
    http_url = url.replace("ws://", "http://") + f"/admin/v1/topics/{topic}/load"
    async with aiohttp.ClientSession() as http, http.get(http_url) as response:
        return response.status, await response.json()


# -- the history, by hand -----------------------------------------------------------------------


def history_row(
    segment: int, start: datetime, end: datetime, msg_in: float, **key: str
) -> dict[str, Any]:
    """A row as brokers write it; the other rates derive from msgRateIn so all four show."""
    return {
        "namespace": key.get("namespace", "default"),
        "topic": key.get("topic", "orders"),
        "segment_id": segment,
        "broker": "b-1",
        "start": start,
        "end": end,
        "msg_rate_in": msg_in,
        "msg_rate_out": 2 * msg_in,
        "byte_rate_in": 100 * msg_in,
        "byte_rate_out": 0.0,
    }


def write_file(root: Path, day: str, name: str, rows: list[dict[str, Any]]) -> None:
    (root / f"date={day}").mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist(rows, schema=SCHEMA), root / f"date={day}" / name)


def write_history(root: Path) -> None:
    """Rows relative to now, each inside or outside every window by tens of seconds, so the
    moment the broker answers (a little later) changes nothing:

    segment 0: [-60 s, -30 s] at 10/s (every window), [-200 s, -150 s] at 40/s (5m and up),
    [-1000 s, -700 s] at 100/s (20m only), [-2000 s, -1300 s] at 1,000/s (no window);
    segment 1: [-1000 s, -700 s] at 5/s (20m only).
    Rows that must not count: another topic's, another namespace's, a NaN rate, a file being
    written (a name starting with "."), and a partition of a date no window touches."""
    now = datetime.now(UTC)

    def at(seconds: int) -> datetime:
        return now - timedelta(seconds=seconds)

    rows = [
        history_row(0, at(60), at(30), 10.0),
        history_row(0, at(200), at(150), 40.0),
        history_row(0, at(1000), at(700), 100.0),
        history_row(0, at(2000), at(1300), 1000.0),
        history_row(1, at(1000), at(700), 5.0),
        history_row(0, at(60), at(30), 7777.0, topic="payments"),
        history_row(0, at(60), at(30), 7777.0, namespace="other"),
        history_row(1, at(60), at(30), float("nan")),
    ]
    for index, row in enumerate(rows):  # each in the partition of its end's date
        write_file(root, row["end"].date().isoformat(), f"b-1-{index}-1.parquet", [row])
    write_file(
        root,
        now.date().isoformat(),
        ".b-2-1-1.parquet.tmp",
        [history_row(0, at(60), at(30), 9999.0)],
    )
    write_file(root, "2000-01-01", "b-3-1-1.parquet", [history_row(0, at(60), at(30), 9999.0)])


def rates(msg_in: float) -> dict[str, float]:
    return {
        "msgRateIn": msg_in,
        "msgRateOut": 2 * msg_in,
        "byteRateIn": 100 * msg_in,
        "byteRateOut": 0.0,
    }


# By hand: 5m and 10m hold 30 s at 10/s and 50 s at 40/s, (300 + 2000) / 80 = 28.75;
# 20m adds 300 s at 100/s, (300 + 2000 + 30000) / 380 = 85.
SEGMENT_0 = {"2m": 10.0, "5m": 28.75, "10m": 28.75, "20m": 85.0}


# -- the tests ----------------------------------------------------------------------------------


async def test_the_route_reports_window_rates_from_the_history(tmp_path: Path) -> None:
    history = tmp_path / "load-history"
    async with broker(tmp_path, history) as url:
        write_history(history)
        status, report = await get_load(url, "default/orders")
    assert status == 200, report
    first, second = report["segments"]
    assert first["windowRates"].keys() == SEGMENT_0.keys()
    for label, msg_in in SEGMENT_0.items():
        assert first["windowRates"][label] == pytest.approx(rates(msg_in)), label
    assert second["windowRates"] == {"20m": pytest.approx(rates(5.0))}
    assert report["history"] == {
        "kept": True,
        "windows": ["2m", "5m", "10m", "20m"],
        "rows": 5,  # 3 + 1 of this topic inside 20m, and the NaN row (read, then ignored)
        "problem": None,
    }


async def test_the_json_report_shows_loads_recommendation_cooldowns_and_policy_sources(
    tmp_path: Path,
) -> None:
    async with broker(tmp_path, None) as url:
        code, out, err = await stctl(url, "orders", "-o", "json")
    assert (code, err) == (0, "")
    report: dict[str, Any] = json.loads(out)
    assert (report["namespace"], report["name"], report["epoch"], report["enabled"]) == (
        "default",
        "orders",
        0,
        True,
    )
    first, second = report["segments"]
    assert (first["id"], first["range"]) == (0, "0000-7fff")
    assert first["load"]["msgRateIn"] == 12.5 and first["load"]["byteRateIn"] == 2048.0
    assert 90 <= first["coldForSeconds"] < 120
    assert second["load"] is None and second["coldForSeconds"] is None
    # No history kept: the report says so, and no segment has window rates.
    assert report["history"]["kept"] is False
    assert first["windowRates"] is None and second["windowRates"] is None
    recommendation = report["recommendation"]
    assert (recommendation["decision"], recommendation["window"]) == ("Split", "2m")
    assert recommendation["fresh"] and recommendation["forCurrentEpoch"]
    assert 30 <= recommendation["ageSeconds"] < 60
    assert report["lastAction"]["segmentIds"] == [3, 4]
    # The cluster's 120 s split cooldown, 20 s after the last split: 100 s to go.
    assert 70 < report["nextSplit"]["inSeconds"] <= 100
    assert report["nextMerge"] == {"at": None, "inSeconds": 0.0, "reason": "no change yet"}
    sources = {row["name"]: (row["value"], row["from"]) for row in report["policy"]}
    assert sources["splitCooldownSeconds"] == (120, "cluster")
    assert sources["mergeWindowSeconds"] == (600, "topic")
    assert sources["maxSegments"] == (64, "default")
    assert sources["splitThresholds.msgRateIn"] == (10_000.0, "default")
    assert report["policyProblem"] is None and report["clusterProblem"] is None


async def test_the_text_report_for_people_with_window_rates(tmp_path: Path) -> None:
    history = tmp_path / "load-history"
    async with broker(tmp_path, history) as url:
        write_history(history)
        code, out, err = await stctl(url, "default/orders")
    assert (code, err) == (0, "")
    assert "Topic default/orders  epoch 0  autoscale enabled" in out
    assert "Recommendation: Split 1 (rule msgRateIn, window 2m), computed" in out
    assert "fresh: msgRateIn 14,200/s over 2m" in out
    assert "Last automatic action: Merge 3,4" in out
    assert "Next split: at " in out and "Next merge: now (no change yet)" in out
    lines = [line.split() for line in out.splitlines()]
    assert ["mergeWindowSeconds", "600", "topic"] in lines
    assert "Window rates (2m, 5m, 10m, 20m; time-weighted, from 5 history rows):" in out
    assert ["0", "5m", "28.75", "57.5", "2,875", "0"] in lines
    assert ["1", "20m", "5", "10", "500", "0"] in lines
    assert not any(row[:2] == ["1", "2m"] for row in lines)  # no coverage: no value


async def test_without_a_history_the_text_says_so(tmp_path: Path) -> None:
    async with broker(tmp_path, None) as url:
        code, out, _ = await stctl(url, "orders")
    assert code == 0
    assert "Window rates: none (this broker keeps no load history)" in out


async def test_an_invalid_configmap_is_named(tmp_path: Path) -> None:
    async with broker(tmp_path, None, cluster=yaml.safe_dump({"minSegments": 0})) as url:
        code, out, _ = await stctl(url, "orders", "-o", "json")
    assert code == 0
    assert "minSegments" in json.loads(out)["clusterProblem"]


async def test_a_missing_topic_and_a_malformed_name_are_refused(tmp_path: Path) -> None:
    async with broker(tmp_path, None) as url:
        status, body = await get_load(url, "default/nope")
        assert (status, body["code"]) == (404, "TopicNotFound")
        code, _, err = await stctl(url, "nope")
        assert (code, err) == (1, "stctl topics load: topic default/nope not found\n")
        code, _, err = await stctl(url, "a/b/c")
        assert code == 2 and "NAME or NAMESPACE/NAME" in err


async def test_a_history_that_cannot_be_read_is_named_and_the_rest_is_answered(
    tmp_path: Path,
) -> None:
    history = tmp_path / "load-history"
    async with broker(tmp_path, history) as url:
        write_history(history)
        today = datetime.now(UTC).date().isoformat()
        (history / f"date={today}" / "b-9-1-1.parquet").write_bytes(b"not parquet")
        status, report = await get_load(url, "default/orders")
        code, out, _ = await stctl(url, "orders")
    assert status == 200, report
    assert report["history"]["kept"] is True
    assert "the load history could not be read" in report["history"]["problem"]
    assert all(segment["windowRates"] == {} for segment in report["segments"])
    assert report["recommendation"]["decision"] == "Split"  # the rest of the report stands
    assert code == 0 and "Window rates: none (the load history could not be read: " in out
