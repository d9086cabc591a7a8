"""Garbage collection of sealed segments nothing needs any more (the decisions: gc_policy).

The leader runs it at the end of a pass that found the topic otherwise settled, never while a
split or merge is pending: that operation was planned against a base epoch, and a prune would
bump the epoch under it. Each pruned segment costs three steps, in this order:

1. **The layout**, one compare-and-swap that removes the segment (epoch + 1). From then on no
   DAG watcher, producer or consumer is told about it, and a concurrent writer's CAS fails.
2. **Its storage**, deleted on its broker (already gone counts as done); the object's state is
   ``Deleting`` from just before.
3. **Its Segment object**, with the status it carries (drained markers, ``load``): it is the
   only record of where the storage lives, so it goes after the storage.

A controller may die between any two steps. What it leaves is a Segment object (and maybe its
storage) whose segment is not in the layout: every pass first finishes those, recognised as an
object of the topic whose id is below ``nextSegmentId`` but which the layout does not hold
(ids at or above it are children a split or merge has reserved and not applied yet). The other
order would be worse: storage deleted first leaves a layout naming a segment that clients can
no longer open, and an object deleted before its storage leaves storage nothing points at.
While the object still exists, children keep reading its drained markers; once it is gone they
count the parent as drained, which it is: only drained segments are pruned.

The drained state comes from the segment's broker at the time of the decision (a new
subscription could only be created between that read and the CAS by a consumer subscribing to a
segment that is being pruned; it would find it gone).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Iterable
from dataclasses import dataclass, field

from ..admin.broker_admin import BrokerAdmin, BrokerAdminError, BrokerUnreachable
from ..admin.stats import SegmentReport
from ..model.clock import Clock
from ..model.layout import SegmentLayout
from ..model.resources import ScalableTopic, Segment, segment_object_name
from ..model.segment import SegmentInfo
from ..store import NotFound, Store
from ..store.informers import Informers
from ..tasks import gather_settled
from .events import EventRecorder
from .gc_policy import Verdict, decide, frontier, newer_bytes
from .segment_objects import mark_deleting

log = logging.getLogger(__name__)

_PARALLELISM = 8


@dataclass(slots=True)
class GcOutcome:
    """What one pass did: segments pruned, leftovers of earlier passes removed, objects whose
    storage could not be deleted yet (the next pass retries), and why each candidate stays."""

    pruned: list[int] = field(default_factory=list)
    finished: list[str] = field(default_factory=list)
    unfinished: list[str] = field(default_factory=list)
    kept: dict[int, str] = field(default_factory=dict)


class SegmentCollector:
    def __init__(
        self,
        store: Store,
        informers: Informers,
        admin: BrokerAdmin,
        clock: Clock,
        events: EventRecorder | None = None,
        parallelism: int = _PARALLELISM,
    ) -> None:
        self._store = store
        self._informers = informers
        self._admin = admin
        self._clock = clock
        self._events = events
        self._parallelism = parallelism

    async def collect(self, namespace: str, name: str) -> GcOutcome:
        """One pass over the topic. Raises Conflict when the topic changed under a prune: read
        again and retry. A broker that cannot delete a pruned segment's storage now does not
        fail the pass: its object stays, and the next pass finishes it."""
        result = GcOutcome()
        raw = self._informers.topics.get(namespace, name)
        if raw is None:
            return result
        topic = ScalableTopic.model_validate(raw)
        if (
            topic.metadata.deletion_timestamp is not None
            or topic.status.pending_operation is not None
            or not topic.status.segments
        ):
            return result
        layout = SegmentLayout.from_status(topic.status.to_wire())
        objects = {
            item["metadata"]["name"]: Segment.model_validate(item)
            for item in self._informers.segments_of(namespace, name)
        }
        for segment in objects.values():
            if _leftover(layout, segment):
                removed = await self._remove(segment)
                (result.finished if removed else result.unfinished).append(segment.metadata.name)
        declared = [spec.name for spec in topic.spec.subscriptions]
        while candidates := frontier(layout):
            verdicts = await self._judge(topic, layout, candidates, objects, declared)
            to_prune = [info for info in candidates if verdicts[info.segment_id].prune]
            for info in candidates:
                if not verdicts[info.segment_id].prune:
                    result.kept[info.segment_id] = verdicts[info.segment_id].reason
            if not to_prune:
                break
            for info in to_prune:
                topic, layout = await self._prune(topic, layout, info)
                pruned = objects.pop(segment_object_name(name, info.descriptor), None)
                if pruned is not None and not await self._remove(pruned):
                    result.unfinished.append(pruned.metadata.name)
                result.pruned.append(info.segment_id)
                result.kept.pop(info.segment_id, None)
                reason = verdicts[info.segment_id].reason
                log.info("pruned segment %s of %s/%s: %s", info.descriptor, namespace, name, reason)
                if self._events is not None:
                    await self._events.record(
                        topic,
                        "Normal",
                        "SegmentPruned",
                        f"segment {info.segment_id} ({info.descriptor}) was pruned: {reason}",
                    )
        return result

    async def _judge(
        self,
        topic: ScalableTopic,
        layout: SegmentLayout,
        candidates: tuple[SegmentInfo, ...],
        objects: dict[str, Segment],
        declared: list[str],
    ) -> dict[int, Verdict]:
        name = topic.metadata.name
        reports = await self._reports(topic, candidates, objects)
        retention = topic.spec.retention
        sizes: dict[int, int] = {}
        needs_sizes = (
            retention is not None
            and retention.max_size_bytes is not None
            and any(r is not None and not r.subscriptions for r in reports.values())
        )
        if needs_sizes:
            others = [info for info in layout.segments.values() if info not in candidates]
            everything = reports | await self._reports(topic, others, objects)
            sizes = {sid: r.size_bytes for sid, r in everything.items() if r is not None}
        now = self._clock.now()
        verdicts = {}
        for info in candidates:
            newer = newer_bytes(layout, info.segment_id, sizes) if needs_sizes else None
            verdicts[info.segment_id] = decide(
                info, reports[info.segment_id], declared, retention, now, newer
            )
            if verdicts[info.segment_id].prune is False:
                log.debug(
                    "keeping segment %s of %s: %s",
                    info.descriptor,
                    name,
                    verdicts[info.segment_id].reason,
                )
        return verdicts

    async def _reports(
        self, topic: ScalableTopic, infos: Iterable[SegmentInfo], objects: dict[str, Segment]
    ) -> dict[int, SegmentReport | None]:
        """Each segment's report; None when its broker cannot tell (unreachable, no storage
        there, an answer that makes no sense)."""
        namespace, name = topic.metadata.namespace or "default", topic.metadata.name
        gate = asyncio.Semaphore(self._parallelism)

        async def one(info: SegmentInfo) -> tuple[int, SegmentReport | None]:
            segment = objects.get(segment_object_name(name, info.descriptor))
            if segment is None or segment.status.broker is None:
                return info.segment_id, None
            async with gate:
                try:
                    stats = await self._admin.stats(
                        segment.status.broker, namespace, name, info.descriptor
                    )
                    return info.segment_id, SegmentReport.from_broker(stats)
                except (BrokerUnreachable, BrokerAdminError, ValueError) as error:
                    log.info(
                        "no drain report for segment %s of %s: %s", info.descriptor, name, error
                    )
                    return info.segment_id, None

        return dict(await gather_settled(*(one(info) for info in infos)))

    async def _prune(
        self, topic: ScalableTopic, layout: SegmentLayout, info: SegmentInfo
    ) -> tuple[ScalableTopic, SegmentLayout]:
        pruned = layout.prune(info.segment_id)
        raw = topic.to_wire()
        raw["status"] = {**topic.status.to_wire(), **pruned.to_status()}
        written = ScalableTopic.model_validate(await self._store.replace_status(raw))
        return written, pruned

    async def _remove(self, segment: Segment) -> bool:
        """Delete the segment's storage, then its object (what is gone already is done); False
        when its broker cannot do it now, leaving the object for the next pass."""
        namespace = segment.metadata.namespace or "default"
        if segment.status.broker is not None:
            await mark_deleting(self._store, segment)
            descriptor = segment.metadata.name.removeprefix(f"{segment.spec.topic}-")
            try:
                await self._admin.delete_segment(
                    segment.status.broker, namespace, segment.spec.topic, descriptor
                )
            except (BrokerUnreachable, BrokerAdminError) as error:
                log.warning("deleting pruned segment %s failed: %s", segment.metadata.name, error)
                return False
        with contextlib.suppress(NotFound):
            await self._store.delete(Segment.KIND, namespace, segment.metadata.name)
        return True


def _leftover(layout: SegmentLayout, segment: Segment) -> bool:
    """An object of a pruned segment (a pass died before removing it). Ids at or above
    ``nextSegmentId`` are reserved for a split or merge that is not applied yet: never ours."""
    segment_id = segment.spec.segment_id
    if segment_id >= layout.next_segment_id:
        return False
    info = layout.segments.get(segment_id)
    name = segment_object_name(segment.spec.topic, info.descriptor) if info else None
    return name != segment.metadata.name
