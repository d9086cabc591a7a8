"""One led topic's controller: what its leader does for one term, until the topic is gone.

It serves the topic's consumer sessions and exclusive producer for the term, and passes over
the topic (split and merge requests first, then the lifecycle: creation, segments, readiness,
subscriptions, garbage collection, deletion) whenever the informers show a change of the topic
or of its Segment objects. Reads come from the informers; writes are compare-and-swaps.

A temporary failure of the split or merge does not hold up the rest of the pass: the lifecycle
runs after it all the same (a split may wait minutes for a broker to come back), and the pass
then fails with it. A pass that fails is classified (failures.py). A temporary failure is retried with
exponential backoff and jitter (a new change wakes it sooner); a Conflict is retried as soon
as the change that caused it arrives. A permanent one is shown in the topic's status (Ready
False with reason and message, phase Failed, one Warning Event) and not retried until the
spec's generation changes, except that deleting the topic always proceeds.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
from dataclasses import dataclass
from typing import Any

from ..admin.broker_admin import BrokerAdmin
from ..model.clock import Clock
from ..model.conditions import Condition, find_condition, set_condition
from ..model.resources import ScalableTopic, TopicPhase
from ..store import Conflict, Object, Store, StoreError
from ..store.cluster_autoscale import ClusterAutoScale
from ..store.informer import Change
from ..store.informers import BY_TOPIC, Informers
from ..tasks import TaskOwner
from .autoscaler import TopicAutoScaler
from .consumers import ConsumerCoordinators
from .events import EventRecorder
from .failures import Failure, classify
from .lifecycle import BROKER_DELETE_TIMEOUT, READY, LeaderIdentity, TopicLifecycle
from .metrics import ControllerMetrics
from .producer_grants import ProducerGrantCoordinators
from .scaling import TopicScaler

log = logging.getLogger(__name__)

RETRY_FIRST, RETRY_MAX = 0.5, 30.0
# A settled topic with sealed segments is looked at again this often: retention age changes
# nothing in the store, yet it decides garbage collection.
RESYNC_SECONDS = 30.0
# How long a pass that met a Conflict waits for the change that caused it to arrive.
CONFLICT_WAIT_SECONDS = 1.0
_MESSAGE_LIMIT = 32768  # what a condition's message may hold


@dataclass(frozen=True, slots=True)
class ControllerContext:
    """What every topic controller of a process shares."""

    store: Store  # writes are taken into the informers at once (WriteThroughStore)
    informers: Informers
    admin: BrokerAdmin
    clock: Clock
    identity: str
    endpoint: str | None
    system_namespace: str
    coordinators: ConsumerCoordinators
    grants: ProducerGrantCoordinators
    passes: asyncio.Semaphore  # bounds the passes running at once, over all topics
    metrics: ControllerMetrics
    broker_delete_timeout: float = BROKER_DELETE_TIMEOUT
    # The cluster's autoscale settings; None runs no autoscaler (tests of other parts).
    autoscale: ClusterAutoScale | None = None


class TopicController:
    def __init__(self, context: ControllerContext, namespace: str, name: str, term: int) -> None:
        self._context = context
        self._namespace, self._name = namespace, name
        self._term = term
        self._wake = asyncio.Event()
        leader = LeaderIdentity(context.identity, context.endpoint, term)
        self._lifecycle = TopicLifecycle(
            context.store,
            context.informers,
            context.admin,
            context.clock,
            leader,
            context.system_namespace,
            context.broker_delete_timeout,
        )
        self._events: EventRecorder = self._lifecycle.events
        self._scaler = TopicScaler(
            context.store,
            context.informers,
            context.admin,
            context.clock,
            self._lifecycle,
            self._events,
        )
        self._autoscaler = (
            None
            if context.autoscale is None
            else TopicAutoScaler(
                context.store,
                context.informers,
                context.clock,
                context.autoscale,
                self._events,
                context.metrics,
                context.identity,
                namespace,
                name,
            )
        )

    @property
    def topic(self) -> str:
        return f"{self._namespace}/{self._name}"

    async def run(self) -> None:
        """Lead the topic until it is gone (returns) or this term ends (cancelled)."""
        context, key = self._context, (self._namespace, self._name)
        unsubscribes = [
            context.informers.topics.subscribe_key(key, self._changed),
            context.informers.segments.subscribe_index(BY_TOPIC, key, self._changed),
        ]
        # Autoscale evaluations run beside the passes, for exactly as long as the topic is led.
        owner = TaskOwner(f"autoscale of {self.topic}", log)
        try:
            if self._autoscaler is not None:
                owner.spawn(self._autoscaler.run(), f"autoscale {self.topic}")
            # Consumer sessions and the exclusive producer are served for exactly as long as
            # the topic is led.
            async with (
                context.coordinators.leading(self._namespace, self._name, self._term),
                context.grants.leading(self._namespace, self._name, self._term),
            ):
                await self._keep_reconciling()
        finally:
            await owner.close()
            for unsubscribe in unsubscribes:
                unsubscribe()

    def _changed(self, change: Change) -> None:
        self._wake.set()

    async def _keep_reconciling(self) -> None:
        topics = self._context.informers.topics
        delay = RETRY_FIRST
        failed_generation: int | None = None
        while True:
            raw = topics.get(self._namespace, self._name)
            if raw is None:
                return  # deleted (its finalizer is ours: deletion ran to its end)
            metadata = raw["metadata"]
            self._wake.clear()  # from here on, a change means another pass
            if failed_generation == metadata.get("generation") and not metadata.get(
                "deletionTimestamp"
            ):
                await self._wait(None)  # nothing to retry until the spec changes
                continue
            try:
                async with self._context.passes:
                    settled = await self._pass()
            except Conflict:
                self._context.metrics.failed(False, "Conflict")
                await self._wait(CONFLICT_WAIT_SECONDS)  # the conflicting change is on its way
                continue
            except Exception as error:
                failure = classify(error)
                self._context.metrics.failed(failure.permanent, failure.reason)
                if failure.permanent:
                    if await self._report_permanent(raw, failure):
                        failed_generation = metadata.get("generation")
                    # Not again before a change (a deletion, which must go on, backs off).
                    deleting = bool(metadata.get("deletionTimestamp"))
                    await self._wait(delay if deleting else CONFLICT_WAIT_SECONDS)
                    delay = min(delay * 2, RETRY_MAX) if deleting else delay
                    continue
                if failure.reason == "InternalError":
                    log.error("%s: the pass failed", self.topic, exc_info=error)
                log.info("%s: %s; retrying in about %.1fs", self.topic, failure.message, delay)
                await self._wait(delay * (0.5 + random.random()))
                delay = min(delay * 2, RETRY_MAX)
                continue
            failed_generation = None
            if settled:
                delay = RETRY_FIRST
                await self._wait(RESYNC_SECONDS if self._has_sealed_segments() else None)
            else:
                await self._wait(delay * (0.5 + random.random()))
                delay = min(delay * 2, RETRY_MAX)

    async def _pass(self) -> bool:
        self._context.metrics.passes.inc()
        # Requests first: a split must not wait for a full pass over every segment.
        try:
            await self._scaler.advance(self._namespace, self._name)
        except Conflict:
            raise  # read again first: the lifecycle would act on what is already outdated
        except Exception as error:
            if classify(error).permanent:
                raise
            # A split or merge that must wait (for a broker to come back, say) holds up only
            # itself: the rest of the topic's work goes on. Its failure is still what the
            # pass ends with (counted, retried with backoff), unless the lifecycle fails too.
            try:
                await self._lifecycle.reconcile(self._namespace, self._name)
            except Exception:
                failure = classify(error)
                self._context.metrics.failed(failure.permanent, failure.reason)
                log.info("%s: %s", self.topic, failure.message)
                raise
            raise
        return await self._lifecycle.reconcile(self._namespace, self._name)

    async def _wait(self, seconds: float | None) -> None:
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(seconds):
                await self._wake.wait()

    def _has_sealed_segments(self) -> bool:
        raw = self._context.informers.topics.get(self._namespace, self._name)
        segments = ((raw or {}).get("status") or {}).get("segments") or ()
        return any(isinstance(s, dict) and s.get("state") == "Sealed" for s in segments)

    async def _report_permanent(self, raw: Object, failure: Failure) -> bool:
        """Ready=False with the reason, phase Failed, and one Warning Event, written on the
        stored object as it is (its spec may not even parse); False when the store did not
        take it (try again)."""
        log.warning("%s cannot be reconciled: %s (%s)", self.topic, failure.message, failure.reason)
        generation = raw["metadata"].get("generation")
        status: dict[str, Any] = dict(raw.get("status") or {})
        try:
            conditions = [Condition.model_validate(c) for c in status.get("conditions") or ()]
        except ValueError:
            conditions = []
        current = find_condition(conditions, READY)
        if current is not None and (
            current.status,
            current.reason,
            current.message,
            current.observed_generation,
        ) == ("False", failure.reason, failure.message[:_MESSAGE_LIMIT], generation):
            return True  # shown already
        condition = Condition(
            type=READY,
            status="False",
            reason=failure.reason,
            message=failure.message[:_MESSAGE_LIMIT],
            last_transition_time=self._context.clock.now(),
            observed_generation=generation,
        )
        patch = {
            "status": {
                "conditions": [
                    c.model_dump(mode="json", by_alias=True, exclude_none=True)
                    for c in set_condition(conditions, condition)
                ],
                # A deletion that fails stays Deleting: flipping the phase would make the
                # next pass write Deleting again, and each write wakes the other.
                "phase": (
                    TopicPhase.DELETING
                    if raw["metadata"].get("deletionTimestamp")
                    else TopicPhase.FAILED
                ).value,
                "observedGeneration": generation,
            }
        }
        try:
            await self._context.store.patch_status(
                ScalableTopic.KIND,
                self._namespace,
                self._name,
                patch,
                resource_version=raw["metadata"].get("resourceVersion"),
            )
        except StoreError as error:
            log.info("%s: could not record the failure yet: %s", self.topic, error)
            return False
        await self._events.record_on(raw, "Warning", failure.reason, failure.message)
        return True
