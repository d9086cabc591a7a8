"""``stctl topics load``: a topic's load records, recommendation, last action, next eligible
times and the policy with the source of each value, read from a real embedded store."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml

from scalable_topics.cli import build_parser
from scalable_topics.model.autoscale_config import CLUSTER_CONFIGMAP, CLUSTER_CONFIGMAP_KEY
from scalable_topics.model.layout import SegmentLayout
from scalable_topics.model.resources import TOPIC_LABEL, ScalableTopic, Segment, segment_object_name
from scalable_topics.model.timefmt import format_time
from scalable_topics.store import EmbeddedStore

NOW = datetime.now(UTC)


async def seed(path: Path, cluster: str | None = "splitCooldownSeconds: 120\n") -> None:
    layout = SegmentLayout.initial(2, NOW - timedelta(hours=1))
    async with await EmbeddedStore.open(path) as store:
        await store.create(
            {
                "apiVersion": "scalabletopics.dev/v1alpha1",
                "kind": "ScalableTopic",
                "metadata": {"name": "orders", "namespace": "default"},
                "spec": {"initialSegments": 2, "autoScale": {"mergeWindowSeconds": 600}},
            }
        )
        auto_scale = {
            "lastSplitTime": format_time(NOW - timedelta(seconds=20)),
            "recommendation": {
                "decision": "Split",
                "segmentIds": [1],
                "rule": "msgRateIn",
                "window": "2m",
                "reason": "msgRateIn 14,200/s over 2m",
                "layoutEpoch": 0,
                "computedAt": format_time(NOW - timedelta(seconds=30)),
                "expiresAt": format_time(NOW + timedelta(minutes=2)),
            },
            "lastAction": {
                "decision": "Merge",
                "segmentIds": [3, 4],
                "rule": "coldPair",
                "reason": "cold",
                "source": "controller",
                "at": format_time(NOW - timedelta(hours=2)),
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
                        "sampledAt": format_time(NOW),
                        "coldSince": format_time(NOW - timedelta(seconds=90)),
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


def stctl(capsys: pytest.CaptureFixture[str], *words: str) -> tuple[int, str, str]:
    args = build_parser().parse_args(["topics", "load", *words])
    code = args.run(args)
    out, err = capsys.readouterr()
    return code, out, err


def test_the_json_report_shows_loads_recommendation_cooldowns_and_policy_sources(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    asyncio.run(seed(tmp_path / "store.db"))
    code, out, _ = stctl(
        capsys, "orders", "--store", f"embedded://{tmp_path}/store.db", "-o", "json"
    )
    assert code == 0
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


def test_the_text_report_for_people(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    asyncio.run(seed(tmp_path / "store.db"))
    code, out, _ = stctl(capsys, "default/orders", "--store", f"embedded://{tmp_path}/store.db")
    assert code == 0
    assert "Topic default/orders  epoch 0  autoscale enabled" in out
    assert "Recommendation: Split 1 (rule msgRateIn, window 2m), computed" in out
    assert "fresh: msgRateIn 14,200/s over 2m" in out
    assert "Last automatic action: Merge 3,4" in out
    assert "Next split: at " in out and "Next merge: now (no change yet)" in out
    assert any(line.split() == ["mergeWindowSeconds", "600", "topic"] for line in out.splitlines())


def test_an_invalid_configmap_and_invalid_overrides_are_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    asyncio.run(seed(tmp_path / "store.db", cluster=yaml.safe_dump({"minSegments": 0})))
    code, out, _ = stctl(
        capsys, "orders", "--store", f"embedded://{tmp_path}/store.db", "-o", "json"
    )
    assert code == 0
    report = json.loads(out)
    assert "minSegments" in report["clusterProblem"]


def test_a_missing_topic_and_a_malformed_name_are_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    asyncio.run(seed(tmp_path / "store.db"))
    store = f"embedded://{tmp_path}/store.db"
    code, _, err = stctl(capsys, "nope", "--store", store)
    assert (code, err.strip()) == (1, "stctl topics load: topic default/nope does not exist")
    code, _, err = stctl(capsys, "a/b/c", "--store", store)
    assert code == 2 and "NAME or NAMESPACE/NAME" in err
