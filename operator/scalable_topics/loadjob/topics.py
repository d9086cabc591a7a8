"""What the load job reads from the store: every topic it can recommend for, and the cluster's
autoscale settings (the ConfigMap, read directly: a run is too short-lived for an informer)."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from pydantic import ValidationError

from ..model.autoscale_config import (
    CLUSTER_CONFIGMAP,
    CLUSTER_CONFIGMAP_KEY,
    CLUSTER_DEFAULTS,
    AutoScaleConfig,
    parse_cluster_config,
    resolve,
)
from ..model.layout import SegmentLayout
from ..model.resources import (
    AutoScaleRecommendation,
    ScalableTopic,
    SubscriptionType,
)
from ..store import NotFound, Store

log = logging.getLogger(__name__)

# The subscriptions whose consumers each need a segment of their own.
_ASSIGNED = (SubscriptionType.STREAM, SubscriptionType.CHECKPOINT)


class SettingsInvalid(ValueError):
    """The cluster's autoscale ConfigMap is unusable: a run recommends nothing until it is
    fixed (the controller keeps its last valid settings and evaluates on its own)."""


@dataclass(frozen=True)
class TopicSnapshot:
    """One topic as the run read it: its layout, policy, consumers and autoscale status."""

    namespace: str
    name: str
    layout: SegmentLayout
    config: AutoScaleConfig
    consumers: Mapping[str, int]
    last_split: datetime | None
    last_merge: datetime | None
    recommendation: AutoScaleRecommendation | None

    @property
    def key(self) -> tuple[str, str]:
        return self.namespace, self.name


async def read_cluster_config(store: Store, system_namespace: str) -> AutoScaleConfig:
    """The cluster's settings; the built-in defaults without the ConfigMap, a ValueError naming
    the problem when it is invalid (a run has no earlier settings to fall back on)."""
    try:
        obj = await store.get("ConfigMap", system_namespace, CLUSTER_CONFIGMAP)
    except NotFound:
        return CLUSTER_DEFAULTS
    text = (obj.get("data") or {}).get(CLUSTER_CONFIGMAP_KEY)
    where = f"ConfigMap {system_namespace}/{CLUSTER_CONFIGMAP}"
    if not isinstance(text, str):
        raise SettingsInvalid(f"{where} has no key {CLUSTER_CONFIGMAP_KEY}")
    try:
        return parse_cluster_config(text)
    except ValueError as error:
        raise SettingsInvalid(f"{where}: {error}") from None


def snapshot(obj: Mapping[str, Any], cluster: AutoScaleConfig) -> TopicSnapshot | None:
    """The topic's snapshot, or None when the job has nothing to recommend for it (autoscale
    off, no layout yet); a ValueError names a topic whose policy or layout is unusable."""
    topic = ScalableTopic.model_validate(obj)
    name = f"{topic.metadata.namespace}/{topic.metadata.name}"
    try:
        config = resolve(cluster, topic.spec.auto_scale)
    except ValueError as error:
        raise ValueError(f"topic {name}: {error}") from None
    status = topic.status
    if not config.enabled or status.epoch is None or not status.segments:
        return None
    try:
        layout = SegmentLayout.from_status(status.to_wire())
    except ValueError as error:
        raise ValueError(f"topic {name}: {error}") from None
    consumers = {
        sub.name: len(sub.consumers) for sub in status.subscriptions if sub.type in _ASSIGNED
    }
    auto = status.auto_scale
    return TopicSnapshot(
        namespace=topic.metadata.namespace or "",
        name=topic.metadata.name,
        layout=layout,
        config=config,
        consumers=consumers,
        last_split=None if auto is None else auto.last_split_time,
        last_merge=None if auto is None else auto.last_merge_time,
        recommendation=None if auto is None else auto.recommendation,
    )


async def read_topics(store: Store, cluster: AutoScaleConfig) -> list[TopicSnapshot]:
    """Every topic with autoscale on and a layout; one whose policy or status is unusable is
    logged and left out (the controller reports it on the topic)."""
    found: list[TopicSnapshot] = []
    for obj in (await store.list(ScalableTopic.KIND)).items:
        try:
            topic = snapshot(obj, cluster)
        except (ValueError, ValidationError) as error:
            log.warning("no recommendation: %s", error)
            continue
        if topic is not None:
            found.append(topic)
    return found
