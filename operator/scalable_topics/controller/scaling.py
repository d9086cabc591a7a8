"""Split and merge: the seed's ordered protocols, made resumable.

A request (an annotation, see model/scale_request.py) is checked against the live layout; an
impossible one is refused with the reason and changes nothing. A possible one is written down
first, as ``status.pendingOperation`` (kind, base epoch, parents, the reserved child ids and
ranges, step), and then carried out step by step:

1. ``Planned``: discover the parents' subscriptions (their union for a merge) and record them
   in the intent, once: a leader that takes over creates the remaining children with exactly
   that list, never one read later (a subscription made on a parent meanwhile would give the
   children different ones). Then create each child's Segment object, place it and create
   its storage with those subscriptions at Earliest, and record ``ChildrenCreated``.
2. ``ChildrenCreated``: terminate the parents, one after the other; then one compare-and-swap
   writes the new layout and clears the intent. Clients see the children only now, when their
   cursors exist and the parents are sealed. The Segment objects' states (parents Terminated,
   children Active) are recorded after that, off the path producers wait on; a lifecycle pass
   records them too if the leader dies first.

Every step is idempotent (creating existing storage or terminating a sealed segment is a no-op)
and every write is a compare-and-swap on what was read, so a leader that dies anywhere is
replaced by one that redoes the step it finds recorded and goes on; a deposed leader's late
write is refused. A new leader always finishes the operation; it rolls back only an operation
that can no longer be carried out, and only while it is ``Planned`` (no parent can have been
terminated before ``ChildrenCreated`` was recorded), by deleting the children it made.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Sequence
from typing import Any

from ..admin.broker_admin import BrokerAdmin, BrokerAdminError
from ..model.clock import Clock
from ..model.conditions import Condition, set_condition
from ..model.errors import LayoutError
from ..model.layout import ChangeKind, LayoutChange, PlannedChild, SegmentLayout
from ..model.resources import (
    LastOperation,
    OperationResult,
    OperationStep,
    PendingOperation,
    ScalableTopic,
    Segment,
    SegmentPhase,
    TopicPhase,
    segment_object_name,
)
from ..model.scale_request import (
    REQUEST_ANNOTATIONS,
    REQUESTER_ANNOTATION,
    InvalidScaleRequest,
    ScaleRequest,
    read_scale_request,
)
from ..model.segment import descriptor
from ..store import Conflict, NotFound, Store
from ..store.informers import Informers
from .events import EventRecorder
from .failpoints import failpoint
from .lifecycle import Placements, TopicLifecycle
from .segment_objects import ensure_segment_object, mark_deleting

log = logging.getLogger(__name__)

SCALING = "Scaling"


class OperationCannotProceed(Exception):
    """The pending operation can no longer be carried out (its parent is gone, or the layout
    moved under it): a leader rolls it back if that is still safe."""


class TopicScaler:
    def __init__(
        self,
        store: Store,
        informers: Informers,
        admin: BrokerAdmin,
        clock: Clock,
        lifecycle: TopicLifecycle,
        events: EventRecorder,
    ) -> None:
        self._store = store
        self._informers = informers
        self._admin = admin
        self._clock = clock
        self._lifecycle = lifecycle
        self._events = events

    async def advance(self, namespace: str, name: str) -> None:
        """Finish the pending operation, then take requests until none is left. A topic whose
        segments are not all served yet waits (its leader's lifecycle pass comes first)."""
        while True:
            raw = self._informers.topics.get(namespace, name)
            if raw is None or raw["metadata"].get("deletionTimestamp"):
                return  # deletion needs no spec: the lifecycle removes everything
            topic = ScalableTopic.model_validate(raw)
            if topic.status.phase not in (TopicPhase.READY, TopicPhase.SCALING):
                return
            if topic.status.pending_operation is not None:
                await self._carry_out(topic)
                continue
            try:
                request = read_scale_request(topic.metadata.annotations)
            except InvalidScaleRequest as error:
                requester = topic.metadata.annotations.get(REQUESTER_ANNOTATION)
                await self._refuse(topic, error.kind, (), requester, str(error))
                await self._forget_request(topic, error.annotation)
                continue
            if request is None:
                return
            await self._take(topic, request)

    # -- requests -------------------------------------------------------------------------------

    async def _take(self, topic: ScalableTopic, request: ScaleRequest) -> None:
        if request.answered(topic.status.last_operation):
            # Answered already (it is removed only after the operation is over).
            await self._forget_request(topic, request.annotation)
            return
        layout = SegmentLayout.from_status(topic.status.to_wire())
        try:
            change = request.plan(layout)
        except LayoutError as error:
            await self._refuse(
                topic, request.kind, request.segment_ids, request.requested_by, str(error)
            )
            await self._forget_request(topic, request.annotation)
            return
        pending = PendingOperation.model_validate(
            {
                **change.to_dict(),
                "step": OperationStep.PLANNED,
                "requestedBy": request.requested_by,
                "startedAt": self._clock.now(),
            }
        )
        condition = self._condition(
            "True",
            "Splitting" if change.kind is ChangeKind.SPLIT else "Merging",
            f"{change.describe()} in progress",
            topic,
        )
        await self._write_status(
            topic,
            pending_operation=pending,
            phase=TopicPhase.SCALING,
            conditions=set_condition(topic.status.conditions, condition),
        )
        failpoint("scale:planned")
        # The annotation stays until the operation is over (then it is recognised as done):
        # removing it now would be one more write before producers can move on.

    async def _refuse(
        self,
        topic: ScalableTopic,
        kind: ChangeKind,
        segment_ids: Sequence[int],
        requested_by: str | None,
        why: str,
    ) -> None:
        log.info("refusing a scaling request on %s: %s", topic.metadata.name, why)
        last = LastOperation(
            kind=kind.value,
            parent_ids=list(segment_ids),
            result=OperationResult.REJECTED,
            message=why,
            requested_by=requested_by,
            finished_at=self._clock.now(),
        )
        condition = self._condition("False", "Rejected", why, topic)
        await self._write_status(
            topic,
            last_operation=last,
            conditions=set_condition(topic.status.conditions, condition),
        )
        await self._events.record(topic, "Warning", "ScalingRejected", why)

    async def _forget_request(self, topic: ScalableTopic, annotation: str) -> None:
        """Remove the answered request (its annotation and requester) only while the topic
        still holds exactly that request: the admin API writes the next request, replacing
        this one, as soon as it sees the answer, and removing any part of that one would
        leave it answered to nobody. A compare-and-swap, again on conflict."""
        namespace, name = topic.metadata.namespace or "default", topic.metadata.name
        answered = _request_annotations(topic)
        while True:
            current = await self._read(namespace, name)
            if current is None or _request_annotations(current) != answered:
                return
            removal = {
                key: None
                for key in (annotation, REQUESTER_ANNOTATION)
                if key in current.metadata.annotations
            }
            if not removal:
                return
            version = current.metadata.resource_version or ""
            try:
                await self._store.patch(
                    ScalableTopic.KIND,
                    namespace,
                    name,
                    {"metadata": {"annotations": removal}},
                    resource_version=version,
                )
                return
            except Conflict:
                await self._informers.topics.wait_changed(namespace, name, version)

    # -- carrying out ---------------------------------------------------------------------------

    async def _carry_out(self, topic: ScalableTopic) -> None:
        pending = topic.status.pending_operation
        assert pending is not None
        change = LayoutChange.from_dict(pending.to_wire())
        layout = SegmentLayout.from_status(topic.status.to_wire())
        try:
            layout.validate(change)  # a LayoutError: it no longer fits the layout
            if pending.step is OperationStep.PLANNED:
                topic = await self._create_children(topic, change)
                topic = await self._record_step(topic, OperationStep.CHILDREN_CREATED)
                failpoint("scale:children-created")
            terminated = await self._terminate_parents(topic, change)
            failpoint("scale:parents-terminated")
        except (OperationCannotProceed, LayoutError) as error:
            if pending.step is not OperationStep.PLANNED:
                raise  # a parent may be sealed already: only going forward is safe
            await self._roll_back(topic, change, str(error))
            return
        await self._commit(topic, change, layout)
        await self._record_segment_states(topic, change, terminated)

    async def _create_children(self, topic: ScalableTopic, change: LayoutChange) -> ScalableTopic:
        """Create the children with the subscriptions the operation recorded (recorded first
        when it has none yet); the topic as last written."""
        pending = topic.status.pending_operation
        assert pending is not None
        # Read every time: it also finds a parent that can no longer be split or merged
        # (OperationCannotProceed) while rolling back is still safe.
        found = await self._parent_subscriptions(topic, change.parent_ids)
        subscriptions = pending.subscriptions
        if subscriptions is None:
            subscriptions = found
            topic = await self._write_status(
                topic, pending_operation=pending.model_copy(update={"subscriptions": found})
            )
            failpoint("scale:subscriptions-recorded")
        placements = Placements()

        async def create(child: PlannedChild) -> None:
            raw = await ensure_segment_object(
                self._store,
                self._informers,
                topic,
                child.segment_id,
                child.hash_range,
                change.parent_ids,
                subscriptions,
            )
            await self._lifecycle.ensure_storage(topic, raw, True, placements, record_state=False)
            failpoint("scale:child-created")

        # The children are independent: made side by side, placed as one pass would place them.
        await asyncio.gather(*(create(child) for child in change.children))
        return topic

    async def _parent_subscriptions(
        self, topic: ScalableTopic, parent_ids: Sequence[int]
    ) -> list[str]:
        """The union of the parents' subscriptions, as their brokers have them now."""
        names: set[str] = {s.name for s in topic.spec.subscriptions}
        for parent in await self._parents(topic, parent_ids):
            if parent.status.broker is None:
                raise OperationCannotProceed(f"segment {parent.spec.segment_id} is not placed")
            try:
                names.update(
                    await self._admin.subscriptions(
                        parent.status.broker,
                        parent.metadata.namespace or "default",
                        topic.metadata.name,
                        _descriptor(parent),
                    )
                )
            except BrokerAdminError as error:
                if error.status == 404:
                    raise OperationCannotProceed(
                        f"segment {parent.spec.segment_id}'s storage is gone from its broker"
                    ) from error
                raise
        return sorted(names)

    async def _terminate_parents(
        self, topic: ScalableTopic, change: LayoutChange
    ) -> dict[str, int]:
        """Seal the parents; their objects' names with their last entry ids."""
        terminated = {}
        # One after the other (the seed): a producer is never left between two sealed halves.
        for parent in await self._parents(topic, change.parent_ids):
            assert parent.status.broker is not None
            terminated[parent.metadata.name] = await self._admin.terminate_segment(
                parent.status.broker,
                parent.metadata.namespace or "default",
                topic.metadata.name,
                _descriptor(parent),
            )
            failpoint("scale:parent-terminated")
        return terminated

    async def _record_segment_states(
        self, topic: ScalableTopic, change: LayoutChange, terminated: dict[str, int]
    ) -> None:
        namespace = topic.metadata.namespace or "default"
        states: dict[str, dict[str, Any]] = {
            name: {"state": SegmentPhase.TERMINATED.value, "lastEntryId": last}
            for name, last in terminated.items()
        }
        for child in change.children:
            name = segment_object_name(
                topic.metadata.name, descriptor(child.segment_id, child.hash_range)
            )
            states[name] = {"state": SegmentPhase.ACTIVE.value}
        await asyncio.gather(
            *(
                self._store.patch_status(Segment.KIND, namespace, name, {"status": status})
                for name, status in states.items()
            )
        )

    async def _commit(
        self, topic: ScalableTopic, change: LayoutChange, layout: SegmentLayout
    ) -> None:
        now = self._clock.now()
        new_layout = layout.apply(change, now)
        message = _describe_done(change, new_layout.epoch)
        pending = topic.status.pending_operation
        last = LastOperation(
            kind=change.kind.value,
            parent_ids=list(change.parent_ids),
            child_ids=list(change.child_ids),
            result=OperationResult.SUCCEEDED,
            message=message,
            requested_by=pending.requested_by if pending else None,
            epoch=new_layout.epoch,
            finished_at=now,
        )
        condition = self._condition("False", "Succeeded", message, topic)
        raw = topic.to_wire()
        raw["status"] = {
            **topic.status.model_copy(
                update={
                    "pending_operation": None,
                    "last_operation": last,
                    "active_segments": len(new_layout.active),
                    "phase": TopicPhase.READY,
                    "conditions": set_condition(topic.status.conditions, condition),
                }
            ).to_wire(),
            **new_layout.to_status(),
        }
        committed = ScalableTopic.model_validate(await self._store.replace_status(raw))
        failpoint("scale:committed")
        log.info("%s/%s: %s", topic.metadata.namespace, topic.metadata.name, message)
        reason = "Split" if change.kind is ChangeKind.SPLIT else "Merged"
        await self._events.record(committed, "Normal", reason, message)

    async def _roll_back(self, topic: ScalableTopic, change: LayoutChange, why: str) -> None:
        namespace, name = topic.metadata.namespace or "default", topic.metadata.name
        for child in change.children:
            object_name = segment_object_name(name, descriptor(child.segment_id, child.hash_range))
            try:
                raw = await self._store.get(Segment.KIND, namespace, object_name)
            except NotFound:
                continue
            segment = Segment.model_validate(raw)
            if segment.status.broker is not None:
                await mark_deleting(self._store, segment)
                await self._admin.delete_segment(
                    segment.status.broker, namespace, name, _descriptor(segment)
                )
            with contextlib.suppress(NotFound):
                await self._store.delete(Segment.KIND, namespace, object_name)
        pending = topic.status.pending_operation
        message = f"{change.describe()} rolled back: {why}"
        last = LastOperation(
            kind=change.kind.value,
            parent_ids=list(change.parent_ids),
            child_ids=list(change.child_ids),
            result=OperationResult.ROLLED_BACK,
            message=message,
            requested_by=pending.requested_by if pending else None,
            finished_at=self._clock.now(),
        )
        condition = self._condition("False", "RolledBack", message, topic)
        await self._write_status(
            topic,
            pending_operation=None,
            last_operation=last,
            phase=TopicPhase.READY,
            conditions=set_condition(topic.status.conditions, condition),
        )
        await self._events.record(topic, "Warning", "ScalingRolledBack", message)

    # -- store helpers --------------------------------------------------------------------------

    async def _parents(self, topic: ScalableTopic, parent_ids: Sequence[int]) -> list[Segment]:
        layout = SegmentLayout.from_status(topic.status.to_wire())
        namespace = topic.metadata.namespace or "default"
        parents = []
        for parent_id in parent_ids:
            info = layout.get(parent_id)
            object_name = segment_object_name(topic.metadata.name, info.descriptor)
            raw = self._informers.segments.get(namespace, object_name)
            if raw is None:  # gone, or not in the cache yet: only the store can tell
                try:
                    raw = await self._store.get(Segment.KIND, namespace, object_name)
                except NotFound:
                    raise OperationCannotProceed(
                        f"segment {parent_id}'s Segment object is gone"
                    ) from None
            parents.append(Segment.model_validate(raw))
        return parents

    async def _record_step(self, topic: ScalableTopic, step: OperationStep) -> ScalableTopic:
        pending = topic.status.pending_operation
        assert pending is not None
        return await self._write_status(
            topic, pending_operation=pending.model_copy(update={"step": step})
        )

    async def _write_status(self, topic: ScalableTopic, **changes: Any) -> ScalableTopic:
        """A compare-and-swap of the status on the version read: Conflict if anyone wrote."""
        raw = topic.to_wire()
        raw["status"] = topic.status.model_copy(update=changes).to_wire()
        return ScalableTopic.model_validate(await self._store.replace_status(raw))

    async def _read(self, namespace: str, name: str) -> ScalableTopic | None:
        raw = self._informers.topics.get(namespace, name)
        return None if raw is None else ScalableTopic.model_validate(raw)

    def _condition(self, status: str, reason: str, message: str, topic: ScalableTopic) -> Condition:
        return Condition(
            type=SCALING,
            status=status,
            reason=reason,
            message=message,
            last_transition_time=self._clock.now(),
            observed_generation=topic.metadata.generation,
        )


def _request_annotations(topic: ScalableTopic) -> dict[str, str | None]:
    return {key: topic.metadata.annotations.get(key) for key in REQUEST_ANNOTATIONS}


def _descriptor(segment: Segment) -> str:
    return segment.metadata.name.removeprefix(f"{segment.spec.topic}-")


def _describe_done(change: LayoutChange, epoch: int) -> str:
    children = ", ".join(
        f"{c.segment_id} ({c.hash_range.start:04x}-{c.hash_range.end:04x})" for c in change.children
    )
    parents = " and ".join(str(p) for p in change.parent_ids)
    if change.kind is ChangeKind.SPLIT:
        return f"segment {parents} split into {children} at epoch {epoch}"
    return f"segments {parents} merged into {children} at epoch {epoch}"
