"""A topic's lifecycle, reconciled by its leader: creation and finalizer-driven deletion.

``reconcile`` is idempotent and resumable: every step reads what the informers and the brokers
already have, does only what is missing, and writes with a compare-and-swap on the
resourceVersion it read, so a controller that dies anywhere is replaced by one that finishes
the same work, and a deposed leader's late write is refused.

Creation: the layout (``initialSegments``) goes into the topic's status first, then one
Segment object per segment (labelled with the topic, owned by it), then each segment is placed
on the least-loaded live broker (recorded in the Segment status before the storage is made, so
a retry goes to the same broker) and created there with the declared subscriptions at
Earliest. When every active segment is served, the topic is Ready; the pass then brings the
segments' subscriptions in line with the spec (subscriptions.py) and, when that is done,
garbage-collects drained sealed segments (gc.py).

Deletion: the finalizer holds the topic (phase Deleting) while every segment's storage and
Segment object is removed (the object in state Deleting meanwhile); storage or objects already
gone count as done, so a retried delete never gets stuck.
Deleting storage is best effort per broker: a broker that does not answer within
``broker_delete_timeout`` (``BROKER_DELETE_TIMEOUT`` seconds unless configured; refused
connections fail at once) is given up for the pass and does not hold the deletion. Its
storage of the topic is removed by the broker itself when it registers again
(broker/orphan_storage.py), since the Segment objects are gone by then.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import defaultdict
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..admin.broker_admin import (
    BROKER_FULL_STATUS,
    BrokerAdmin,
    BrokerAdminError,
    BrokerUnreachable,
)
from ..model.clock import Clock
from ..model.conditions import Condition, set_condition
from ..model.layout import SegmentLayout
from ..model.placement import BrokerInfo, choose_broker
from ..model.resources import (
    FINALIZER,
    ControllerStatus,
    ObjectMeta,
    ScalableTopic,
    Segment,
    SegmentPhase,
    TopicPhase,
    namespace_problem,
    topic_name_problem,
)
from ..store import Conflict, NotFound, Store
from ..store.informers import Informers
from ..tasks import gather_settled
from .brokers import registered_brokers
from .events import EventRecorder
from .failures import InvalidSpec
from .gc import SegmentCollector
from .segment_objects import SegmentObject, ensure_segment_object, mark_deleting
from .subscriptions import SubscriptionSync

log = logging.getLogger(__name__)

READY = "Ready"
# How long deleting a topic waits for one broker's answer before leaving that broker's storage
# of the topic to the broker (it removes it when it registers again).
BROKER_DELETE_TIMEOUT = 10.0


@dataclass(frozen=True, slots=True)
class LeaderIdentity:
    identity: str
    endpoint: str | None
    term: int


class TopicLifecycle:
    def __init__(
        self,
        store: Store,
        informers: Informers,
        admin: BrokerAdmin,
        clock: Clock,
        leader: LeaderIdentity,
        system_namespace: str,
        broker_delete_timeout: float = BROKER_DELETE_TIMEOUT,
    ) -> None:
        self._store = store
        self._informers = informers
        self._admin = admin
        self._clock = clock
        self._leader = leader
        self._system_namespace = system_namespace
        self.events = EventRecorder(store, clock, leader.identity)
        self.broker_delete_timeout = broker_delete_timeout
        self._subscriptions = SubscriptionSync(store, informers, admin, clock, self.events)
        self._gc = SegmentCollector(store, informers, admin, clock, self.events)

    async def reconcile(self, namespace: str, name: str) -> bool:
        """Bring the topic one full pass closer to its spec; True when it is settled (Ready, or
        deleted). Raises Conflict when someone else wrote first: read again and retry."""
        raw = self._informers.topics.get(namespace, name)
        if raw is None:
            return True
        if raw["metadata"].get("deletionTimestamp"):
            return await self._finalize(raw)
        # Before anything is written: a name that cannot label its Segments (a topic stored by
        # an older release, or straight into the store) would leave a topic half created.
        problem = namespace_problem(namespace) or topic_name_problem(name)
        if problem is not None:
            raise InvalidSpec(f"metadata.name: {problem}")
        topic = ScalableTopic.model_validate(raw)
        if FINALIZER not in topic.metadata.finalizers:
            raw = await self._store.patch(
                ScalableTopic.KIND,
                namespace,
                name,
                {"metadata": {"finalizers": [*topic.metadata.finalizers, FINALIZER]}},
                resource_version=topic.metadata.resource_version,
            )
            topic = ScalableTopic.model_validate(raw)
        if not topic.status.segments:
            raw = await self._write_initial_layout(topic)
            topic = ScalableTopic.model_validate(raw)
        layout = SegmentLayout.from_status(topic.status.to_wire())
        served = 0
        placements = Placements()
        for info in layout.segments.values():
            segment = await self._ensure_segment_object(topic, layout, info.segment_id)
            if await self.ensure_storage(topic, segment, info.is_active, placements):
                served += 1 if info.is_active else 0
        ready = served == len(layout.active)
        await self._write_readiness(namespace, name, ready, len(layout.active))
        # Runtime subscriptions once every segment has storage; GC only on a settled topic.
        if not ready or not await self._subscriptions.reconcile(namespace, name):
            return False
        await self._gc.collect(namespace, name)
        return True

    # -- creation -------------------------------------------------------------------------------

    async def _write_initial_layout(self, topic: ScalableTopic) -> dict[str, Any]:
        layout = SegmentLayout.initial(topic.spec.initial_segments, self._clock.now())
        status = {
            **topic.status.to_wire(),
            **layout.to_status(),
            "activeSegments": len(layout.active),
            "phase": TopicPhase.PENDING.value,
            "controller": self._controller_status(),
        }
        raw = topic.to_wire()
        raw["status"] = status
        return await self._store.replace_status(raw)

    async def _ensure_segment_object(
        self, topic: ScalableTopic, layout: SegmentLayout, segment_id: int
    ) -> dict[str, Any]:
        info = layout.get(segment_id)
        return await ensure_segment_object(
            self._store,
            self._informers,
            topic,
            info.segment_id,
            info.hash_range,
            info.parent_ids,
            [s.name for s in topic.spec.subscriptions],
        )

    async def ensure_storage(
        self,
        topic: ScalableTopic,
        raw: dict[str, Any],
        active: bool,
        placements: Placements | None = None,
        *,
        record_state: bool = True,
        abandon: Collection[str] = (),
    ) -> bool:
        """Place the segment and create its storage; True when it is served. Without
        ``record_state`` the caller records the object's state itself, later. A placement on
        a broker in ``abandon`` (URLs) is replaced, with a compare-and-swap, by a new one: only
        for a segment nothing was written to yet (a split's or merge's child before the commit),
        whose broker the caller found gone."""
        segment = Segment.model_validate(raw)
        wanted = SegmentPhase.ACTIVE if active else SegmentPhase.TERMINATED
        # Terminated is final: a parent sealed by a split or merge that is not yet committed
        # to the layout is still listed as active there, and must stay sealed.
        if segment.status.broker is not None and segment.status.state in (
            wanted,
            SegmentPhase.TERMINATED,
        ):
            return True
        namespace = segment.metadata.namespace or "default"
        broker = segment.status.broker
        if broker is None or broker in abandon:
            placements = placements if placements is not None else Placements()
            if placements.brokers is None:
                placements.brokers = registered_brokers(self._informers)
            chosen = choose_broker(placements.brokers, self._clock.now(), placements.planned)
            placements.planned[chosen.identity] = placements.planned.get(chosen.identity, 0) + 1
            broker = chosen.url
            # Record the placement before creating storage: a retry goes to the same broker.
            raw = await self._store.patch_status(
                Segment.KIND,
                namespace,
                segment.metadata.name,
                {
                    "status": {
                        "broker": broker,
                        "state": SegmentPhase.PENDING.value,
                        "range": _range(segment),
                    }
                },
                resource_version=segment.metadata.resource_version,
            )
        retention = topic.spec.retention
        descriptor = segment.metadata.name.removeprefix(f"{segment.spec.topic}-")
        try:
            await self._admin.create_segment(
                broker,
                namespace,
                segment.spec.topic,
                descriptor,
                parents=segment.spec.parents,
                subscriptions=segment.spec.subscriptions,
                producer_epoch=topic.status.producer.epoch if topic.status.producer else 0,
                producer_holder=topic.status.producer.holder if topic.status.producer else None,
                retention=(
                    (retention.max_size_bytes, retention.max_age_seconds)
                    if retention is not None
                    else (None, None)
                ),
            )
        except BrokerAdminError as error:
            if error.status == BROKER_FULL_STATUS:
                # It refused to make it, so it holds none of it: the next pass places the
                # segment on a broker with room (the heartbeats said this one had some).
                await self._store.patch_status(
                    Segment.KIND,
                    namespace,
                    segment.metadata.name,
                    {"status": {"broker": None, "state": None}},
                    resource_version=raw["metadata"]["resourceVersion"],
                )
            raise
        if not active:
            await self._admin.terminate_segment(broker, namespace, segment.spec.topic, descriptor)
        if not record_state:
            return True
        await self._store.patch_status(
            Segment.KIND,
            namespace,
            segment.metadata.name,
            {"status": {"state": wanted.value}},
            resource_version=Segment.model_validate(raw).metadata.resource_version,
        )
        return True

    async def _write_readiness(self, namespace: str, name: str, ready: bool, active: int) -> None:
        raw = self._informers.topics.get(namespace, name)
        if raw is None:
            return
        topic = ScalableTopic.model_validate(raw)
        condition = Condition(
            type=READY,
            status="True" if ready else "False",
            reason="SegmentsServed" if ready else "PlacingSegments",
            message=f"{active} active segments served"
            if ready
            else "segments are being placed on brokers",
            last_transition_time=self._clock.now(),
            observed_generation=topic.metadata.generation,
        )
        status = topic.status.model_copy(
            update={
                "conditions": set_condition(topic.status.conditions, condition),
                "phase": TopicPhase.SCALING
                if topic.status.pending_operation is not None
                else TopicPhase.READY
                if ready
                else TopicPhase.PENDING,
                "active_segments": active,
                "observed_generation": topic.metadata.generation,
                # The LEADER column: whoever leads now, with its term, not the creator.
                "controller": ControllerStatus.model_validate(self._controller_status()),
            }
        )
        if status == topic.status:
            return  # a write would only wake every watcher for nothing
        raw["status"] = status.to_wire()
        await self._store.replace_status(raw)

    def _controller_status(self) -> dict[str, Any]:
        status: dict[str, Any] = {"identity": self._leader.identity, "term": self._leader.term}
        if self._leader.endpoint:
            status["endpoint"] = self._leader.endpoint
        return status

    # -- deletion -------------------------------------------------------------------------------

    async def _finalize(self, raw: dict[str, Any]) -> bool:
        """Remove every segment, then the finalizer; True when the topic is gone. The phase
        is Deleting meanwhile, and each segment's state while its storage is removed. Only
        the metadata is read: a topic whose spec is invalid still goes."""
        metadata = ObjectMeta.model_validate(raw["metadata"])
        namespace, name = metadata.namespace or "default", metadata.name
        if (raw.get("status") or {}).get("phase") != TopicPhase.DELETING.value:
            metadata = await self._write_deleting(raw)
        # Read without the model: an object whose spec it refuses still goes.
        segments = [SegmentObject.of(item) for item in self._informers.segments_of(namespace, name)]
        await self._delete_storage(namespace, name, segments)
        for segment in segments:
            with contextlib.suppress(NotFound):
                await self._store.delete(Segment.KIND, namespace, segment.name)
        finalizers = [f for f in metadata.finalizers if f != FINALIZER]
        try:
            await self._store.patch(
                ScalableTopic.KIND,
                namespace,
                name,
                {"metadata": {"finalizers": finalizers}},
                resource_version=metadata.resource_version,
            )
        except NotFound:
            pass
        except Conflict:
            return False  # changed under us: the next pass reads it again
        return True

    async def _write_deleting(self, raw: dict[str, Any]) -> ObjectMeta:
        """Phase Deleting and its Ready condition, patched onto the status as stored (its
        spec may not parse); the topic's metadata as written."""
        status = raw.get("status") or {}
        try:
            conditions = [Condition.model_validate(c) for c in status.get("conditions") or ()]
        except ValueError:
            conditions = []
        condition = Condition(
            type=READY,
            status="False",
            reason="Deleting",
            message=f"deleting {len(status.get('segments') or ())} segment(s), then the topic",
            last_transition_time=self._clock.now(),
            observed_generation=raw["metadata"].get("generation"),
        )
        written = await self._store.patch_status(
            ScalableTopic.KIND,
            raw["metadata"].get("namespace") or "default",
            raw["metadata"]["name"],
            {
                "status": {
                    "phase": TopicPhase.DELETING.value,
                    "conditions": [
                        c.model_dump(mode="json", by_alias=True, exclude_none=True)
                        for c in set_condition(conditions, condition)
                    ],
                }
            },
            resource_version=raw["metadata"].get("resourceVersion"),
        )
        return ObjectMeta.model_validate(written["metadata"])

    async def _delete_storage(
        self, namespace: str, name: str, segments: Sequence[SegmentObject]
    ) -> None:
        """Delete the segments' storage, brokers side by side, each broker's one after the
        other. A broker that does not answer in time is given up: its remaining segments are
        left to it (it removes storage without a Segment object when it registers)."""
        by_broker: defaultdict[str, list[SegmentObject]] = defaultdict(list)
        for segment in segments:
            if segment.broker is not None:
                by_broker[segment.broker].append(segment)

        async def on(broker: str, hosted: list[SegmentObject]) -> None:
            for segment in hosted:
                descriptor = segment.name.removeprefix(f"{name}-")
                await mark_deleting(self._store, segment)
                try:
                    async with asyncio.timeout(self.broker_delete_timeout):
                        gone = not await self._admin.delete_segment(
                            broker, namespace, name, descriptor
                        )
                except (BrokerUnreachable, TimeoutError) as error:
                    log.warning(
                        "deleting %s/%s: broker %s did not answer (%s); leaving its storage of "
                        "%d segment(s) for it to remove when it registers again",
                        namespace,
                        name,
                        broker,
                        error or f"no answer within {self.broker_delete_timeout:g} s",
                        len(hosted) - hosted.index(segment),
                    )
                    return
                if gone:
                    log.info("segment %s of %s/%s was already gone", descriptor, namespace, name)

        # Every broker's deletions end before a failure (an error answer: retried) is raised.
        await gather_settled(*(on(broker, hosted) for broker, hosted in by_broker.items()))


@dataclass(slots=True)
class Placements:
    """One pass's view of the brokers, and what it placed before their loads report it."""

    brokers: list[BrokerInfo] | None = None
    planned: dict[str, int] = field(default_factory=dict)


def _range(segment: Segment) -> str:
    return f"{segment.spec.hash_range.start:04x}-{segment.spec.hash_range.end:04x}"
