"""The cluster's autoscale settings from the ConfigMap: defaults without one, its settings
when valid, the last valid ones (and the problem named) when not, each change seen at once."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from dataclasses import replace
from pathlib import Path

import pytest

from scalable_topics.model.autoscale_config import (
    CLUSTER_CONFIGMAP,
    CLUSTER_CONFIGMAP_KEY,
    CLUSTER_DEFAULTS,
)
from scalable_topics.store import EmbeddedStore
from scalable_topics.store.cluster_autoscale import ClusterAutoScale
from scalable_topics.store.informer import Informer
from scalable_topics.store.kinds import CONFIG_MAP
from support.eventually import eventually

NAMESPACE = "scalable-topics-system"


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[EmbeddedStore]:
    async with await EmbeddedStore.open(tmp_path / "store.db", poll_interval=0.005) as store:
        yield store


@pytest.fixture
async def configmaps(store: EmbeddedStore) -> AsyncIterator[Informer]:
    informer = Informer(store, CONFIG_MAP.kind, NAMESPACE)
    informer.start()
    await informer.wait_synced()
    yield informer
    await informer.stop()


def settings(text: str | None, name: str = CLUSTER_CONFIGMAP) -> dict[str, object]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "data": {} if text is None else {CLUSTER_CONFIGMAP_KEY: text},
    }


async def test_the_configmap_is_in_force_as_it_changes_and_a_bad_one_keeps_the_last(
    store: EmbeddedStore, configmaps: Informer, caplog: pytest.LogCaptureFixture
) -> None:
    cluster = ClusterAutoScale(configmaps, NAMESPACE)
    heard: list[None] = []
    unsubscribe = cluster.subscribe(lambda: heard.append(None))
    assert cluster.current() == CLUSTER_DEFAULTS and cluster.problem is None

    obj = await store.create(settings("maxSegments: 8\nloadReportIntervalSeconds: 2"))
    await eventually(lambda: cluster.current().max_segments == 8, "the settings in force")
    eight = replace(CLUSTER_DEFAULTS, max_segments=8, load_report_interval=2.0)
    assert cluster.current() == eight and len(heard) == 1

    with caplog.at_level(logging.ERROR):
        obj["data"] = {CLUSTER_CONFIGMAP_KEY: "maxSegments: 0\nminSegments: -1"}
        obj = await store.replace(obj)
        await eventually(lambda: cluster.problem is not None, "the problem named")
    assert "maxSegments" in str(cluster.problem) and "minSegments" in str(cluster.problem)
    assert cluster.current() == eight  # the last valid settings stay in force
    assert f"ConfigMap {NAMESPACE}/{CLUSTER_CONFIGMAP}" in caplog.text

    obj["data"] = {"other": "x"}
    obj = await store.replace(obj)
    await eventually(lambda: "has no key" in str(cluster.problem), "a missing key named")
    assert cluster.current() == eight

    await store.delete("ConfigMap", NAMESPACE, CLUSTER_CONFIGMAP)
    await eventually(lambda: cluster.current() == CLUSTER_DEFAULTS, "the defaults again")
    assert cluster.problem is None
    assert len(heard) == 4
    unsubscribe()


async def test_other_configmaps_are_not_the_settings(
    store: EmbeddedStore, configmaps: Informer
) -> None:
    cluster = ClusterAutoScale(configmaps, NAMESPACE)
    await store.create(settings("maxSegments: 8", name="something-else"))
    await eventually(lambda: len(configmaps) == 1, "the other ConfigMap cached")
    assert cluster.current() == CLUSTER_DEFAULTS
