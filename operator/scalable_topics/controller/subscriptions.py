"""Runtime subscriptions: the leader creates and deletes declared subscriptions on every segment.

A subscription declared when the topic is created is made with each segment at Earliest. One
added later starts at **Latest** on every segment, active and sealed: it sees the messages
produced from the moment each segment gets it, like a new subscription on any topic. On a sealed
segment that means it is drained at once, so the controller records the drained marker right
there (after the broker confirms it): a child's ordered dispatch for it never waits for a
consumer to visit a parent it has nothing to read from.

Deleting a subscription removes it from every segment, removes its drained markers (a later
subscription of the same name must not inherit them) and, last, its entry in
``status.subscriptions`` with the consumer registrations in it.

The plan and the record of intent are in :mod:`.subscription_plan`. Every step is idempotent:
creating an existing subscription keeps it, deleting one that is gone (or whose segment is gone)
is done. A segment whose broker cannot be reached leaves the work unfinished: the condition
``SubscriptionsReady`` says which segments, and the next pass tries again.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any

from ..admin.broker_admin import BrokerAdmin, BrokerAdminError, BrokerUnreachable
from ..model.clock import Clock
from ..model.conditions import Condition, ConditionStatus, find_condition, set_condition
from ..model.layout import SegmentLayout
from ..model.resources import ScalableTopic, Segment, segment_object_name
from ..model.segment import SegmentInfo
from ..model.timefmt import format_time
from ..protocol import InitialPosition
from ..store import NotFound, Store
from ..store.informers import Informers
from ..tasks import gather_settled
from .events import EventRecorder
from .subscription_plan import SubscriptionPlan, plan_subscriptions, record_intent, record_outcome

log = logging.getLogger(__name__)

SUBSCRIPTIONS_READY = "SubscriptionsReady"
_PARALLELISM = 8
_LISTED_FAILURES = 5


class SubscriptionSync:
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

    async def reconcile(self, namespace: str, name: str) -> bool:
        """One pass; False when a segment could not be brought in line (the condition says
        which: try again later). True when every segment has exactly the declared
        subscriptions, or as far as it can while a split or merge is pending (the pass after it
        finishes concludes). Raises Conflict when the topic changed under the pass."""
        raw = self._informers.topics.get(namespace, name)
        if raw is None:
            return True
        topic = ScalableTopic.model_validate(raw)
        if topic.metadata.deletion_timestamp is not None or not topic.status.segments:
            return True
        plan = plan_subscriptions(topic.spec.subscriptions, topic.status.subscriptions)
        if plan.empty:
            await self._write_condition(topic, self._ready(topic))
            return True
        intent = record_intent(topic.spec.subscriptions, topic.status.subscriptions, plan)
        if intent != topic.status.subscriptions:
            topic = await self._write(topic, {"subscriptions": intent})
        failures = await self._apply(topic, plan)
        if failures:
            await self._report_failures(topic, failures)
            return False
        final = topic.status.pending_operation is None
        outcome = record_outcome(topic.spec.subscriptions, topic.status.subscriptions, plan, final)
        condition = (
            self._ready(topic)
            if final
            else self._condition(
                topic,
                "False",
                "OperationPending",
                "a split or merge is in flight: its new segments are checked once it finishes",
            )
        )
        await self._write(
            topic,
            {
                "subscriptions": outcome,
                "conditions": set_condition(topic.status.conditions, condition),
            },
        )
        if final:
            await self._announce(topic, plan)
        return True

    # -- the brokers --------------------------------------------------------------------------

    async def _apply(self, topic: ScalableTopic, plan: SubscriptionPlan) -> list[str]:
        """Do the plan on every segment of the layout; the failures, one line per segment."""
        namespace, name = topic.metadata.namespace or "default", topic.metadata.name
        layout = SegmentLayout.from_status(topic.status.to_wire())
        objects = {
            item["metadata"]["name"]: Segment.model_validate(item)
            for item in self._informers.segments_of(namespace, name)
        }
        gate = asyncio.Semaphore(self._parallelism)

        async def one(info: SegmentInfo) -> str | None:
            async with gate:
                segment = objects.get(segment_object_name(name, info.descriptor))
                return await self._apply_to_segment(topic, info, segment, plan)

        results = await gather_settled(*(one(info) for info in layout.segments.values()))
        return [failure for failure in results if failure is not None]

    async def _apply_to_segment(
        self,
        topic: ScalableTopic,
        info: SegmentInfo,
        segment: Segment | None,
        plan: SubscriptionPlan,
    ) -> str | None:
        if segment is None or segment.status.broker is None:
            return f"segment {info.descriptor} is not placed on a broker yet"
        namespace, name = topic.metadata.namespace or "default", topic.metadata.name
        broker, descriptor = segment.status.broker, info.descriptor
        try:
            for subscription in plan.delete:
                await self._admin.delete_subscription(
                    broker, namespace, name, descriptor, subscription
                )
            for subscription in plan.create:
                await self._admin.create_subscription(
                    broker, namespace, name, descriptor, subscription, InitialPosition.LATEST
                )
            drained: dict[str, bool] = {}
            if plan.create and not info.is_active:
                stats = await self._admin.stats(broker, namespace, name, descriptor)
                drained = {
                    s: bool(stats.get("subscriptions", {}).get(s, {}).get("drained"))
                    for s in plan.create
                }
        except BrokerUnreachable as error:
            return f"segment {descriptor}: broker {broker} is unreachable ({error})"
        except BrokerAdminError as error:
            return f"segment {descriptor} on {broker}: {error}"
        await self._update_markers(segment, plan, drained)
        return None

    async def _update_markers(
        self, segment: Segment, plan: SubscriptionPlan, drained: dict[str, bool]
    ) -> None:
        """Forget the markers of deleted subscriptions; record those a new one is drained on."""
        markers: dict[str, Any] = {
            s: None
            for s in plan.delete
            if s in segment.status.drained and not drained.get(s, False)
        }
        now = format_time(self._clock.now())
        for subscription, is_drained in drained.items():
            if is_drained and (
                subscription not in segment.status.drained or subscription in plan.delete
            ):
                markers[subscription] = now
        if not markers:
            return
        with contextlib.suppress(NotFound):  # pruned meanwhile: nothing left to mark
            await self._store.patch_status(
                Segment.KIND,
                segment.metadata.namespace or "default",
                segment.metadata.name,
                {"status": {"drained": markers}},
            )

    # -- the topic's status -------------------------------------------------------------------

    async def _write(self, topic: ScalableTopic, changes: dict[str, Any]) -> ScalableTopic:
        status = topic.status.model_copy(update=changes)
        raw = topic.to_wire()
        raw["status"] = status.to_wire()
        return ScalableTopic.model_validate(await self._store.replace_status(raw))

    async def _write_condition(self, topic: ScalableTopic, condition: Condition) -> None:
        current = find_condition(topic.status.conditions, condition.type)
        if current is not None and (
            current.status,
            current.reason,
            current.message,
            current.observed_generation,
        ) == (condition.status, condition.reason, condition.message, condition.observed_generation):
            return
        await self._write(topic, {"conditions": set_condition(topic.status.conditions, condition)})

    async def _report_failures(self, topic: ScalableTopic, failures: list[str]) -> None:
        for failure in failures:
            log.warning(
                "subscriptions of %s/%s: %s", topic.metadata.namespace, topic.metadata.name, failure
            )
        listed = "; ".join(failures[:_LISTED_FAILURES])
        more = len(failures) - _LISTED_FAILURES
        message = listed + (f"; and {more} more" if more > 0 else "")
        condition = self._condition(topic, "False", "SegmentsUnavailable", message)
        previous = find_condition(topic.status.conditions, SUBSCRIPTIONS_READY)
        await self._write_condition(topic, condition)
        if self._events is not None and (previous is None or previous.reason != condition.reason):
            await self._events.record(
                topic, "Warning", "SubscriptionsNotApplied", f"{len(failures)} segments: {message}"
            )

    async def _announce(self, topic: ScalableTopic, plan: SubscriptionPlan) -> None:
        if self._events is None:
            return
        declared = {spec.name for spec in topic.spec.subscriptions}
        for subscription in plan.delete:
            if subscription not in declared:
                await self._events.record(
                    topic,
                    "Normal",
                    "SubscriptionDeleted",
                    f"subscription {subscription!r} was deleted from every segment",
                )
        for subscription in plan.create:
            await self._events.record(
                topic,
                "Normal",
                "SubscriptionCreated",
                f"subscription {subscription!r} is on every segment",
            )

    def _ready(self, topic: ScalableTopic) -> Condition:
        count = len(topic.spec.subscriptions)
        return self._condition(
            topic, "True", "Applied", f"{count} declared subscriptions on every segment"
        )

    def _condition(
        self, topic: ScalableTopic, status: ConditionStatus, reason: str, message: str
    ) -> Condition:
        return Condition(
            type=SUBSCRIPTIONS_READY,
            status=status,
            reason=reason,
            message=message,
            last_transition_time=self._clock.now(),
            observed_generation=topic.metadata.generation,
        )
