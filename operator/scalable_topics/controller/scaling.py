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

Brokers die. While ``Planned``, nothing was ever written to a child (clients learn of children
only at the commit), so a child whose placement names a broker that is no longer live is
placed on a live one instead (a compare-and-swap of its placement) and made there; the copy
the dead broker may hold is removed by that broker when it returns, since the child's object
names another broker (broker/orphan_storage.py). A parent whose broker is gone and does not
answer cannot be read or sealed: while ``Planned`` the operation is rolled back (its children
deleted; a dead broker's copy is left to it). From ``ChildrenCreated`` on, a parent may be
sealed already, so the operation waits for the parent's broker to come back. Whatever the
operation waits for, its ``Scaling`` condition says; the topic's other work (the lifecycle
pass: segments, readiness, subscriptions) goes on meanwhile (topic_controller.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Sequence
from datetime import datetime
from typing import Any

import aiohttp

from ..admin.broker_admin import BrokerAdmin, BrokerAdminError, BrokerUnreachable
from ..model.clock import Clock
from ..model.conditions import Condition, find_condition, set_condition
from ..model.errors import LayoutError
from ..model.layout import ChangeKind, LayoutChange, PlannedChild, SegmentLayout
from ..model.placement import NoLiveBroker, live_urls
from ..model.resources import (
    MAX_SEGMENT_SUBSCRIPTIONS,
    AutoScaleStatus,
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
from ..tasks import gather_settled
from .brokers import registered_brokers
from .events import EventRecorder
from .failpoints import failpoint
from .lifecycle import Placements, TopicLifecycle
from .segment_objects import ensure_segment_object, mark_deleting

log = logging.getLogger(__name__)

SCALING = "Scaling"
# Scaling condition reasons while an operation cannot go on by itself.
WAITING_FOR_BROKER = "WaitingForBroker"
PLACING_CHILD = "PlacingChild"
# A broker's answer lost on the way (it died): the error types that mean "no answer".
_NO_ANSWER = (BrokerUnreachable, aiohttp.ClientError, TimeoutError)


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
        found = await self._parent_subscriptions(topic, change)
        subscriptions = pending.subscriptions
        if subscriptions is None:
            subscriptions = found
            topic = await self._write_status(
                topic, pending_operation=pending.model_copy(update={"subscriptions": found})
            )
            failpoint("scale:subscriptions-recorded")
        placements = Placements(brokers=registered_brokers(self._informers))
        live = live_urls(placements.brokers or [], self._clock.now())
        # Nothing was written to a child yet: one placed on a broker that is gone goes to
        # another (its copy there, if any, is removed by that broker when it returns).
        gone = {
            child.segment_id: broker
            for child in change.children
            if (broker := self._child_broker(topic, child)) is not None and broker not in live
        }
        if gone:
            why = "; ".join(
                f"child {child_id}'s broker {broker} is gone: placing it on another"
                for child_id, broker in gone.items()
            )
            topic = await self._show(topic, PLACING_CHILD, f"{change.describe()}: {why}", True)

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
            await self._lifecycle.ensure_storage(
                topic, raw, True, placements, record_state=False, abandon=gone.values()
            )
            failpoint("scale:child-created")

        # The children are independent: made side by side, placed as one pass would place them,
        # and every creation has ended before a failure is raised (none is left running).
        outcomes = await asyncio.gather(
            *(create(child) for child in change.children), return_exceptions=True
        )
        for outcome in outcomes:
            if isinstance(outcome, BaseException) and not isinstance(outcome, Exception):
                raise outcome  # a cancellation
        failures = [
            (child, outcome)
            for child, outcome in zip(change.children, outcomes, strict=True)
            if isinstance(outcome, Exception)
        ]
        if failures:
            child, failure = failures[0]
            waits = self._child_waits(topic, change, child, failure)
            if waits is not None:
                await self._show(topic, WAITING_FOR_BROKER, waits)
            raise failure
        return topic

    def _child_broker(self, topic: ScalableTopic, child: PlannedChild) -> str | None:
        """Where the child is placed, as last seen; None while it is not."""
        object_name = segment_object_name(
            topic.metadata.name, descriptor(child.segment_id, child.hash_range)
        )
        raw = self._informers.segments.get(topic.metadata.namespace or "default", object_name)
        broker = ((raw or {}).get("status") or {}).get("broker")
        return str(broker) if broker else None

    def _child_waits(
        self, topic: ScalableTopic, change: LayoutChange, child: PlannedChild, error: Exception
    ) -> str | None:
        """What making ``child`` waits for after ``error``, in words; None when it is not a
        wait (an error answer, say)."""
        what, child_id = change.describe(), child.segment_id
        if isinstance(error, NoLiveBroker):
            return f"{what} waits for a live broker to place child {child_id} on"
        broker = self._child_broker(topic, child)
        if not isinstance(error, _NO_ANSWER) or broker is None:
            return None
        return (
            f"{what} waits for broker {broker} (child {child_id}'s broker) to answer; "
            f"once its heartbeat Lease lapses, child {child_id} is placed on another"
        )

    async def _parent_subscriptions(self, topic: ScalableTopic, change: LayoutChange) -> list[str]:
        """The union of the parents' subscriptions, as their brokers have them now. A parent
        whose broker does not answer and is gone (no live heartbeat Lease) cannot be read or
        sealed: OperationCannotProceed. One that does not answer yet is live is waited for.
        OperationCannotProceed too when there are more than MAX_SEGMENT_SUBSCRIPTIONS (a merge
        of parents holding different ones that consumers created)."""
        names: set[str] = {s.name for s in topic.spec.subscriptions}
        for parent in await self._parents(topic, change.parent_ids):
            broker, parent_id = parent.status.broker, parent.spec.segment_id
            if broker is None:
                raise OperationCannotProceed(f"segment {parent_id} is not placed")
            try:
                names.update(
                    await self._admin.subscriptions(
                        broker,
                        parent.metadata.namespace or "default",
                        topic.metadata.name,
                        _descriptor(parent),
                    )
                )
            except BrokerAdminError as error:
                if error.status == 404:
                    raise OperationCannotProceed(
                        f"segment {parent_id}'s storage is gone from its broker"
                    ) from error
                raise
            except _NO_ANSWER as error:
                if not self._is_live(broker):
                    raise OperationCannotProceed(
                        f"segment {parent_id}'s broker {broker} is gone: its subscriptions "
                        "cannot be read and it cannot be sealed"
                    ) from error
                await self._show(
                    topic,
                    WAITING_FOR_BROKER,
                    f"{change.describe()} waits for broker {broker} (segment {parent_id}'s "
                    "broker) to answer",
                )
                raise
        if len(names) > MAX_SEGMENT_SUBSCRIPTIONS:  # the most a segment is created with
            raise OperationCannotProceed(
                f"the parents hold {len(names)} subscriptions between them, more than a "
                f"segment takes ({MAX_SEGMENT_SUBSCRIPTIONS}): delete some first"
            )
        return sorted(names)

    async def _terminate_parents(
        self, topic: ScalableTopic, change: LayoutChange
    ) -> dict[str, int]:
        """Seal the parents; their objects' names with their last entry ids. A parent may be
        sealed already, so a broker that does not answer is waited for, never given up."""
        terminated = {}
        # One after the other (the seed): a producer is never left between two sealed halves.
        for parent in await self._parents(topic, change.parent_ids):
            broker = parent.status.broker
            assert broker is not None
            try:
                terminated[parent.metadata.name] = await self._admin.terminate_segment(
                    broker,
                    parent.metadata.namespace or "default",
                    topic.metadata.name,
                    _descriptor(parent),
                )
            except _NO_ANSWER:
                until = "come back" if not self._is_live(broker) else "answer"
                await self._show(
                    topic,
                    WAITING_FOR_BROKER,
                    f"{change.describe()} waits for broker {broker} (segment "
                    f"{parent.spec.segment_id}'s broker) to {until} to seal it",
                )
                raise
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
        await gather_settled(
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
                    "auto_scale": _cooldown_started(topic.status.auto_scale, change.kind, now),
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
                await self._delete_child_storage(segment.status.broker, segment)
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

    async def _delete_child_storage(self, broker: str, segment: Segment) -> None:
        """Delete a rolled-back child's storage, or leave it to its broker when that does not
        answer in time: it removes storage without a Segment object when it registers again."""
        namespace = segment.metadata.namespace or "default"
        try:
            async with asyncio.timeout(self._lifecycle.broker_delete_timeout):
                await self._admin.delete_segment(
                    broker, namespace, segment.spec.topic, _descriptor(segment)
                )
        except _NO_ANSWER as error:
            log.warning(
                "rolling back child %s of %s/%s: broker %s did not answer (%s); leaving its "
                "storage for it to remove when it registers again",
                segment.spec.segment_id,
                namespace,
                segment.spec.topic,
                broker,
                error or "no answer in time",
            )

    # -- brokers --------------------------------------------------------------------------------

    def _is_live(self, broker: str) -> bool:
        """Whether a live broker's heartbeat Lease carries this URL now."""
        return broker in live_urls(registered_brokers(self._informers), self._clock.now())

    async def _show(
        self, topic: ScalableTopic, reason: str, message: str, event: bool = False
    ) -> ScalableTopic:
        """Say in the Scaling condition what the operation is waiting for or doing about a
        broker (with a Warning Event when ``event``); written only when it changes. The topic
        as last written."""
        current = find_condition(topic.status.conditions, SCALING)
        if current is not None and (current.status, current.reason, current.message) == (
            "True",
            reason,
            message,
        ):
            return topic
        log.info("%s/%s: %s", topic.metadata.namespace, topic.metadata.name, message)
        condition = self._condition("True", reason, message, topic)
        topic = await self._write_status(
            topic, conditions=set_condition(topic.status.conditions, condition)
        )
        if event:
            await self._events.record(topic, "Warning", reason, message)
        return topic

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


def _cooldown_started(
    current: AutoScaleStatus | None, kind: ChangeKind, now: datetime
) -> AutoScaleStatus:
    """The autoscale status with the cooldown of ``kind`` starting ``now``. Written only in the
    compare-and-swap that commits the layout, so a change that fails starts no cooldown and a
    new leader reads it from the topic (manual changes count as automatic ones do)."""
    field = "last_split_time" if kind is ChangeKind.SPLIT else "last_merge_time"
    return (current or AutoScaleStatus()).model_copy(update={field: now})


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
