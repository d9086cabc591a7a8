"""One led topic's autoscaler: evaluate when something that matters changed, act through the
scale request path.

An evaluation reads the topic, its Segment objects' load records and the cluster's settings
from the informers, chooses between its own decision and the load job's recommendation
(model/autoscale_choice.py) and, when that is a split or merge, asks for it with the same
annotation ``stctl topics split`` writes, so every guarantee of the split and merge protocols
holds. One automatic operation at a time: while an operation runs or a request waits, an
evaluation does nothing, and the operation's end is itself a trigger.

Triggers set one "dirty" flag that the loop clears before it evaluates, so a trigger that
arrives during an evaluation makes the loop run again rather than being lost: a consumer
registering on a Stream or Checkpoint subscription, a load record of one of the topic's
segments changing, a new recommendation, the topic's policy or the cluster's ConfigMap
changing, the end of an operation, and a periodic tick every ``load_report_interval`` (read
anew each time) for the time-based gates. While the split cooldown runs, the loop also wakes
when it ends, so a burst of consumers converges in one chain of splits rather than one per
tick. An evaluation that fails is logged and counted; the loop goes on.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
from datetime import datetime, timedelta
from typing import Any, Final

from ..model.autoscale_choice import Choice, choose
from ..model.autoscale_config import RATE_NAMES, AutoScaleConfig, resolve
from ..model.autoscale_inputs import autoscale_inputs
from ..model.autoscale_policy import Merge, NoAction, Split
from ..model.clock import Clock
from ..model.layout import ChangeKind
from ..model.resources import (
    AutoScaleAction,
    AutoScaleDecisionKind,
    ScalableTopic,
    Segment,
    TopicPhase,
)
from ..model.scale_request import REQUEST_ANNOTATIONS, occupying, request_annotations
from ..store import Conflict, Object, Store
from ..store.cluster_autoscale import ClusterAutoScale
from ..store.informer import Change
from ..store.informers import BY_TOPIC, Informers
from .events import EventRecorder
from .metrics import ControllerMetrics

log = logging.getLogger(__name__)

# The rules a decision may name, as metric labels; anything else (a load job's rule this
# controller does not know) is counted as "other", so the label set stays bounded.
KNOWN_RULES: Final = frozenset({"consumers", "coldPair", *(wire for _, wire in RATE_NAMES)})
# Who asks for automatic operations, in the request's requester and the topic's lastOperation.
REQUESTER_PREFIX: Final = "autoscaler"


class TopicAutoScaler:
    def __init__(
        self,
        store: Store,
        informers: Informers,
        clock: Clock,
        cluster: ClusterAutoScale,
        events: EventRecorder,
        metrics: ControllerMetrics,
        identity: str,
        namespace: str,
        name: str,
    ) -> None:
        self._store = store
        self._informers = informers
        self._clock = clock
        self._cluster = cluster
        self._events = events
        self._metrics = metrics
        self._identity = identity
        self._namespace, self._name = namespace, name
        self._dirty = asyncio.Event()
        self._follow_up: float | None = None  # monotonic time of the evaluation after a cooldown
        self._reported_problem: str | None = None

    @property
    def topic(self) -> str:
        return f"{self._namespace}/{self._name}"

    async def run(self) -> None:
        """Evaluate on every trigger until cancelled."""
        key = (self._namespace, self._name)
        unsubscribes = [
            self._informers.topics.subscribe_key(key, self._topic_changed),
            self._informers.segments.subscribe_index(BY_TOPIC, key, self._segment_changed),
            self._cluster.subscribe(self._dirty.set),
        ]
        try:
            self._dirty.set()
            while True:
                await self._wait()
                self._dirty.clear()  # from here on, a trigger means another evaluation
                try:
                    await self.evaluate()
                except Exception:
                    self._metrics.autoscale_evaluations.labels("failed").inc()
                    log.exception("%s: an autoscale evaluation failed", self.topic)
        finally:
            for unsubscribe in unsubscribes:
                unsubscribe()

    async def _wait(self) -> None:
        # The tick is read anew each time: a ConfigMap change of the interval applies at once.
        timeout = self._cluster.current().load_report_interval
        if self._follow_up is not None:
            timeout = min(timeout, max(0.0, self._follow_up - self._clock.monotonic()))
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(timeout):
                await self._dirty.wait()

    # -- triggers ----------------------------------------------------------------------------------

    def _topic_changed(self, change: Change) -> None:
        if (
            change.old is None
            or change.new is None
            or _relevant(change.old) != _relevant(change.new)
        ):
            self._dirty.set()

    def _segment_changed(self, change: Change) -> None:
        if (
            change.old is None
            or change.new is None
            or _load_and_state(change.old) != (_load_and_state(change.new))
        ):
            self._dirty.set()

    # -- one evaluation ----------------------------------------------------------------------------

    async def evaluate(self) -> None:
        """Decide for the topic as the informers show it now, and ask for what was decided."""
        self._follow_up = None
        raw = self._informers.topics.get(self._namespace, self._name)
        if raw is None or raw["metadata"].get("deletionTimestamp"):
            return
        topic = ScalableTopic.model_validate(raw)
        status = topic.status
        if status.epoch is None or not status.segments or status.phase is not TopicPhase.READY:
            self._metrics.autoscale_evaluations.labels("busy").inc()
            return
        if occupying(topic.metadata.annotations, status.pending_operation, status.last_operation):
            # One operation at a time: its end changes the topic, which evaluates again.
            self._metrics.autoscale_evaluations.labels("busy").inc()
            return
        config = await self._policy(topic)
        if config is None:
            self._metrics.autoscale_evaluations.labels("invalid").inc()
            return
        if not config.enabled:
            self._metrics.autoscale_evaluations.labels("disabled").inc()
            return
        segments = [
            Segment.model_validate(s)
            for s in self._informers.segments.by_index(BY_TOPIC, (self._namespace, self._name))
        ]
        now = self._clock.now()
        inputs = autoscale_inputs(topic, segments, now)
        recommendation = status.auto_scale.recommendation if status.auto_scale else None
        choice = choose(config, inputs, status.epoch, recommendation)
        if recommendation is not None and choice.recommendation != "none":
            self._metrics.autoscale_recommendations.labels(choice.recommendation).inc()
        self._plan_follow_up(inputs.last_split, config, now)
        if isinstance(choice.decision, NoAction):
            self._metrics.autoscale_evaluations.labels("noAction").inc()
            log.debug("%s: no autoscale action: %s", self.topic, choice.decision.reason)
            return
        await self._ask(topic, choice, choice.decision, now)

    async def _policy(self, topic: ScalableTopic) -> AutoScaleConfig | None:
        """The topic's policy over the cluster's, or None (with one Warning Event per distinct
        problem) when the two do not combine into a valid one."""
        try:
            config = resolve(self._cluster.current(), topic.spec.auto_scale)
        except ValueError as error:
            problem = str(error)
            if problem != self._reported_problem:
                self._reported_problem = problem
                log.warning("%s: autoscale does nothing: %s", self.topic, problem)
                await self._events.record(topic, "Warning", "AutoScaleInvalid", problem)
            return None
        self._reported_problem = None
        return config

    def _plan_follow_up(
        self, last_split: datetime | None, config: AutoScaleConfig, now: datetime
    ) -> None:
        """While the split cooldown runs, evaluate again the moment it ends (a burst of
        consumers then converges one split per cooldown, not per tick)."""
        if last_split is None:
            return
        left = (last_split + timedelta(seconds=config.split_cooldown) - now).total_seconds()
        if left > 0:
            self._follow_up = self._clock.monotonic() + left

    async def _ask(
        self, topic: ScalableTopic, choice: Choice, decision: Split | Merge, now: datetime
    ) -> None:
        """Write the request on the version evaluated (a compare-and-swap: a topic that moved
        meanwhile is evaluated again), then record it as the topic's last automatic action."""
        if isinstance(decision, Split):
            kind, ids = ChangeKind.SPLIT, [decision.segment_id]
            what = f"split of segment {decision.segment_id}"
            reason, kind_name = "AutoSplit", AutoScaleDecisionKind.SPLIT
        else:
            kind, ids = ChangeKind.MERGE, [decision.first_id, decision.second_id]
            what = f"merge of segments {decision.first_id} and {decision.second_id}"
            reason, kind_name = "AutoMerge", AutoScaleDecisionKind.MERGE
        requester = f"{REQUESTER_PREFIX}@{self._identity}/{secrets.token_hex(6)}"
        version = topic.metadata.resource_version or ""
        try:
            written = await self._store.patch(
                ScalableTopic.KIND,
                self._namespace,
                self._name,
                {"metadata": {"annotations": request_annotations(kind, ids, requester)}},
                resource_version=version,
            )
        except Conflict:
            self._dirty.set()
            await self._informers.topics.wait_changed(self._namespace, self._name, version)
            return
        self._metrics.autoscale_evaluations.labels("acted").inc()
        rule = decision.rule if decision.rule in KNOWN_RULES else "other"
        self._metrics.autoscale_decisions.labels(kind_name.value, rule).inc()
        source = (
            "the load job's recommendation"
            if choice.source == "recommendation"
            else ("the controller's evaluation")
        )
        message = (
            f"asked for a {what} ({source}; rule {decision.rule}, window {choice.window}): "
            f"{decision.reason}"
        )
        log.info("%s: %s", self.topic, message)
        await self._events.record(ScalableTopic.model_validate(written), "Normal", reason, message)
        action = AutoScaleAction(
            decision=kind_name,
            segment_ids=ids,
            rule=decision.rule,
            window=choice.window,
            reason=decision.reason,
            source=choice.source,
            at=now,
        )
        # A merge patch: it never undoes a status write of the scaler, which may already have
        # taken the request.
        await self._store.patch_status(
            ScalableTopic.KIND,
            self._namespace,
            self._name,
            {"status": {"autoScale": {"lastAction": action.to_wire()}}},
        )


def _relevant(raw: Object) -> tuple[Any, ...]:
    """What of a topic an evaluation depends on, beyond the clock."""
    status = raw.get("status") or {}
    annotations = (raw.get("metadata") or {}).get("annotations") or {}
    auto_scale = status.get("autoScale") or {}
    return (
        (raw.get("spec") or {}).get("autoScale"),
        status.get("epoch"),
        status.get("phase"),
        status.get("pendingOperation") is not None,
        tuple(annotations.get(key) for key in REQUEST_ANNOTATIONS),
        tuple(
            (s.get("name"), s.get("type"), len(s.get("consumers") or ()))
            for s in status.get("subscriptions") or ()
        ),
        auto_scale.get("recommendation"),
        auto_scale.get("lastSplitTime"),
        auto_scale.get("lastMergeTime"),
    )


def _load_and_state(raw: Object) -> tuple[Any, ...]:
    status = raw.get("status") or {}
    return status.get("load"), status.get("state")
