"""What the autoscaler's tests share: topic default/orders in a MemoryStore on loop time, a
running TopicAutoScaler, and a stand-in for the scaler that answers its requests.

The stand-in commits a requested split or merge as the scaler's last step does (the layout, the
cooldown time and lastOperation in one write), without brokers: the autoscaler reads only the
topic and its Segment objects, and the scaler's own protocol is tested in test_scaling.py.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

import yaml
from led_topic_fixtures import NAME, NS, T0

from scalable_topics.controller.autoscaler import TopicAutoScaler
from scalable_topics.controller.events import EventRecorder
from scalable_topics.controller.metrics import ControllerMetrics
from scalable_topics.model.autoscale_config import CLUSTER_CONFIGMAP, CLUSTER_CONFIGMAP_KEY
from scalable_topics.model.layout import ChangeKind, SegmentLayout
from scalable_topics.model.resources import (
    LastOperation,
    OperationResult,
    ScalableTopic,
    Segment,
    segment_object_name,
)
from scalable_topics.model.scale_request import REQUEST_ANNOTATIONS, read_scale_request
from scalable_topics.store import NotFound, Store
from scalable_topics.store.cluster_autoscale import ClusterAutoScale
from scalable_topics.store.informers import Informers
from scalable_topics.store.kinds import EVENT
from scalable_topics.tasks import TaskOwner
from support.memory_store import MemoryStore

SYSTEM = "scalable-topics"


class LoopClock:
    """Wall time that moves with the loop's (fake, under looptime) time."""

    def now(self) -> datetime:
        return T0 + timedelta(seconds=asyncio.get_running_loop().time())

    def monotonic(self) -> float:
        return asyncio.get_running_loop().time()


@dataclass
class World:
    store: Store  # writes through the informers
    informers: Informers
    clock: LoopClock
    metrics: ControllerMetrics
    autoscaler: TopicAutoScaler
    commits: list[tuple[float, str]] = field(default_factory=list)  # (loop time, what)

    async def topic(self) -> ScalableTopic:
        return ScalableTopic.model_validate(await self.store.get(ScalableTopic.KIND, NS, NAME))

    async def active(self) -> list[int]:
        topic = await self.topic()
        return [s.segment_id for s in SegmentLayout.from_status(topic.status.to_wire()).active]

    async def set_consumers(self, subscription: str, count: int) -> None:
        topic = await self.topic()
        subscriptions = [s.to_wire() for s in topic.status.subscriptions if s.name != subscription]
        subscriptions.append(
            {
                "name": subscription,
                "type": "Stream",
                "consumers": [{"name": f"c{i}"} for i in range(count)],
            }
        )
        await self.store.patch_status(
            ScalableTopic.KIND, NS, NAME, {"status": {"subscriptions": subscriptions}}
        )

    async def set_spec(self, auto_scale: dict[str, Any] | None) -> None:
        await self.store.patch(ScalableTopic.KIND, NS, NAME, {"spec": {"autoScale": auto_scale}})

    async def set_cluster(self, settings: dict[str, Any]) -> None:
        data = {CLUSTER_CONFIGMAP_KEY: yaml.safe_dump(settings)}
        try:
            await self.store.patch("ConfigMap", SYSTEM, CLUSTER_CONFIGMAP, {"data": data})
        except NotFound:
            await self.store.create(
                {
                    "apiVersion": "v1",
                    "kind": "ConfigMap",
                    "metadata": {"name": CLUSTER_CONFIGMAP, "namespace": SYSTEM},
                    "data": data,
                }
            )

    async def set_load(
        self, segment_id: int, msg_rate_in: float, cold_since: datetime | None = None
    ) -> None:
        """Write a segment's load record as its broker would (creating its object first)."""
        topic = await self.topic()
        info = SegmentLayout.from_status(topic.status.to_wire()).get(segment_id)
        name = segment_object_name(NAME, info.descriptor)
        if self.informers.segments.get(NS, name) is None:
            await self.store.create(
                {
                    "apiVersion": "scalabletopics.dev/v1alpha1",
                    "kind": "Segment",
                    "metadata": {"name": name, "namespace": NS, "labels": {}},
                    "spec": {
                        "topic": NAME,
                        "segmentId": segment_id,
                        "hashRange": {"start": info.hash_range.start, "end": info.hash_range.end},
                    },
                }
            )
        load: dict[str, Any] = {
            "msgRateIn": msg_rate_in,
            "sampledAt": self.clock.now().isoformat(),
            "coldSince": None if cold_since is None else cold_since.isoformat(),
        }
        await self.store.patch_status(Segment.KIND, NS, name, {"status": {"load": load}})

    async def events(self, reason: str) -> list[str]:
        listing = await self.store.list(EVENT.kind, namespace=NS)
        return [e["message"] for e in listing.items if e["reason"] == reason]

    async def answer_requests(self) -> None:
        """Commit every request the topic carries, as the scaler's commit would."""
        changed = asyncio.Event()
        unsubscribe = self.informers.topics.subscribe_key((NS, NAME), lambda _: changed.set())
        try:
            while True:
                await changed.wait()
                changed.clear()
                raw = self.informers.topics.get(NS, NAME)
                if raw is None:
                    continue
                topic = ScalableTopic.model_validate(raw)
                request = read_scale_request(topic.metadata.annotations)
                if request is None or request.answered(topic.status.last_operation):
                    continue
                await self._commit(topic, request.kind, request.segment_ids, request.requested_by)
        finally:
            unsubscribe()

    async def _commit(
        self, topic: ScalableTopic, kind: ChangeKind, ids: tuple[int, ...], requester: str | None
    ) -> None:
        layout = SegmentLayout.from_status(topic.status.to_wire())
        change = layout.plan_split(ids[0]) if kind is ChangeKind.SPLIT else layout.plan_merge(*ids)
        now = self.clock.now()
        new = layout.apply(change, now)
        cooldown = "lastSplitTime" if kind is ChangeKind.SPLIT else "lastMergeTime"
        last = LastOperation(
            kind=kind.value,
            parent_ids=list(ids),
            child_ids=list(change.child_ids),
            result=OperationResult.SUCCEEDED,
            requested_by=requester,
            epoch=new.epoch,
            finished_at=now,
        )
        await self.store.patch_status(
            ScalableTopic.KIND,
            NS,
            NAME,
            {
                "status": {
                    **new.to_status(),
                    "activeSegments": len(new.active),
                    "lastOperation": last.to_wire(),
                    "autoScale": {cooldown: now.isoformat()},
                }
            },
        )
        await self.store.patch(
            ScalableTopic.KIND,
            NS,
            NAME,
            {"metadata": {"annotations": dict.fromkeys(REQUEST_ANNOTATIONS)}},
        )
        self.commits.append((asyncio.get_running_loop().time(), change.describe()))


@contextlib.asynccontextmanager
async def autoscaled_topic(
    segments: int = 1,
    auto_scale: dict[str, Any] | None = None,
    cluster: dict[str, Any] | None = None,
    answer: bool = True,
) -> AsyncIterator[World]:
    """Topic default/orders with ``segments`` active segments, led by a running autoscaler
    (and the scaler's stand-in, unless ``answer`` is False)."""
    clock = LoopClock()
    raw_store = MemoryStore(clock=clock)
    informers = Informers(raw_store, SYSTEM)
    informers.start()
    owner = TaskOwner("autoscale test")
    try:
        await informers.wait_synced()
        store = informers.writing_through(raw_store)
        layout = SegmentLayout.initial(segments, clock.now())
        await store.create(
            {
                "apiVersion": "scalabletopics.dev/v1alpha1",
                "kind": "ScalableTopic",
                "metadata": {"name": NAME, "namespace": NS},
                "spec": {"initialSegments": segments, "autoScale": auto_scale},
            }
        )
        await store.patch_status(
            ScalableTopic.KIND,
            NS,
            NAME,
            {"status": {**layout.to_status(), "phase": "Ready", "activeSegments": segments}},
        )
        metrics = ControllerMetrics()
        autoscaler = TopicAutoScaler(
            store,
            informers,
            clock,
            ClusterAutoScale(informers.configmaps, SYSTEM),
            EventRecorder(store, clock, "controller-0"),
            metrics,
            "controller-0",
            NS,
            NAME,
        )
        world = World(store, informers, clock, metrics, autoscaler)
        if cluster is not None:
            await world.set_cluster(cluster)
        if answer:
            owner.spawn(world.answer_requests(), "scaler stand-in")
        owner.spawn(autoscaler.run(), "autoscaler")
        yield world
    finally:
        await owner.close()
        await informers.stop()


def counter(metrics: ControllerMetrics, name: str, **labels: str) -> float:
    """A counter's value (summed over the labels not given)."""
    return sum(
        sample.value
        for metric in metrics.registry.collect()
        for sample in metric.samples
        if sample.name == f"{name}_total"
        and all(sample.labels.get(key) == value for key, value in labels.items())
    )
