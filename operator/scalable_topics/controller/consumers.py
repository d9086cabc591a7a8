"""The consumer sessions of one topic's Stream and Checkpoint subscriptions, kept by its leader.

Seed: Consumer Session Lifecycle. Registrations live in ``status.subscriptions[].consumers``
(name, assigned segments, layout epoch, term); whether a consumer is connected lives here, in
memory only. A consumer whose connection drops keeps its registration, and its segments, for
the grace period; when that ends its registration is removed and the rest rebalanced. A new
leader loads every registration as disconnected with a fresh grace period, and stamps them with
its own term in one compare-and-swap write: from then on a deposed leader's write fails on the
resourceVersion, and one that reads again finds a newer term than its own and stops.

Assignments are the seed's round-robin over the Active segments and the sealed ones not yet
drained for the subscription (``model.consumer_sessions.reassign``). They are recomputed on
register and unregister, on grace expiry, and on every change of the layout, of the declared
subscriptions or of the topic's Segment objects (drained markers, placements, prunes), each
persisted before anyone is told; a consumer is told only when its segments (or where they are
served) changed.

The entries of ``status.subscriptions`` belong to the subscription sync (which records their
state); this module writes only the ``consumers`` of declared Stream and Checkpoint
subscriptions, adding an entry only when one is missing.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

from pydantic import ValidationError

from ..model.clock import Clock
from ..model.consumer_sessions import GraceTimers, SessionKey, drained_segments, reassign
from ..model.layout import SegmentLayout
from ..model.resources import (
    ConsumerRegistration,
    ScalableTopic,
    Segment,
    SubscriptionState,
    SubscriptionStatus,
    SubscriptionType,
)
from ..protocol import AssignedSegment, ErrorCode
from ..store import Conflict, NotFound, Object, Store, StoreError
from ..store.informer import Change
from ..store.informers import BY_TOPIC, Informers
from .led_topics import (
    DEFAULT_GRACE_PERIOD,
    Deposed,
    LedTopics,
    Refused,
    check_term,
    keep_settling,
    newest_term,
    retry,
)

log = logging.getLogger(__name__)

ORDERED_TYPES = frozenset({SubscriptionType.STREAM, SubscriptionType.CHECKPOINT})


class ConsumerRefused(Refused):
    """A registration request the coordinator turns down; ``code`` goes on the wire."""


@dataclass(frozen=True, slots=True)
class Grant:
    """What a consumer is told: its segments, from layout ``layout_epoch``, by ``term``."""

    term: int
    layout_epoch: int
    segments: tuple[AssignedSegment, ...]


class ConsumerChannel(Protocol):
    """A connected consumer as the coordinator sees it. Both calls must not block: the
    endpoint queues the frames, in call order."""

    def assigned(self, grant: Grant) -> None:
        """The consumer's assignment; the first call answers its registration."""
        ...

    def closed(self, code: ErrorCode, message: str) -> None:
        """The registration ended here (topic or subscription deleted, leadership lost)."""
        ...


@dataclass(eq=False, slots=True)
class _Live:
    channel: ConsumerChannel
    sent: tuple[AssignedSegment, ...] | None = None


@dataclass(frozen=True, slots=True)
class _SegmentObject:
    broker: str | None
    drained: frozenset[str]


class TopicConsumers:
    """One topic's consumer sessions, for one term of leadership. ``run`` serves until
    cancelled (or until the store shows a newer term); ``register``, ``unregister`` and
    ``detach`` are the endpoint's calls."""

    def __init__(
        self,
        store: Store,
        informers: Informers,
        namespace: str,
        name: str,
        term: int,
        clock: Clock,
        grace_period: float = DEFAULT_GRACE_PERIOD,
    ) -> None:
        self._store = store
        self._informers = informers
        self._namespace, self._name = namespace, name
        self._term = term
        self._clock = clock
        self._timers = GraceTimers(grace_period)
        self._lock = asyncio.Lock()
        self._ready = asyncio.Event()
        self._wake = asyncio.Event()
        self._topic_key: object = None
        self._segments: dict[int, _SegmentObject] = {}
        self._layout: SegmentLayout | None = None
        self._declared: dict[str, SubscriptionType] = {}
        self._members: dict[str, dict[str, datetime | None]] = {}
        self._assigned: dict[str, dict[str, ConsumerRegistration]] = {}
        self._live: dict[SessionKey, _Live] = {}
        self._closed: tuple[ErrorCode, str] | None = None

    @property
    def topic(self) -> str:
        return f"{self._namespace}/{self._name}"

    @property
    def term(self) -> int:
        return self._term

    def registrations(self, subscription: str) -> dict[str, ConsumerRegistration]:
        """The registrations of ``subscription`` as last persisted (name -> registration)."""
        return dict(self._assigned.get(subscription, {}))

    def connected(self, subscription: str) -> set[str]:
        return {name for (sub, name) in self._live if sub == subscription}

    # -- running --------------------------------------------------------------------------------

    async def run(self) -> None:
        key = (self._namespace, self._name)
        unsubscribes = []
        try:
            unsubscribes = [
                self._informers.topics.subscribe_key(key, self._topic_changed),
                self._informers.segments.subscribe_index(BY_TOPIC, key, self._segment_changed),
            ]
            await self._start()
            await self._keep_settled()
        except Deposed as deposed:
            log.warning("consumer sessions of %s: %s", self.topic, deposed)
        finally:
            for unsubscribe in unsubscribes:
                unsubscribe()
            self._shut(ErrorCode.NOT_LEADER, f"this controller no longer leads {self.topic}")

    async def _start(self) -> None:
        """Adopt the persisted registrations, each disconnected with a fresh grace period."""
        await self._informers.wait_synced()
        self._topic_key = _topic_key(self._informers.topics.get(self._namespace, self._name))
        for obj in self._informers.segments_of(self._namespace, self._name):
            parsed = _segment_object(obj)
            if parsed is not None:
                self._segments[parsed[0]] = parsed[1]
        await retry(self._adopt, f"loading consumer sessions of {self.topic}")
        self._ready.set()

    async def _adopt(self) -> None:
        async with self._lock:
            raw = self._informers.topics.get(self._namespace, self._name)
            if raw is None:
                raise NotFound(ScalableTopic.KIND, self._namespace, self._name)
            topic = ScalableTopic.model_validate(raw)
            self._check_fence(topic)
            now = self._clock.monotonic()
            for entry in topic.status.subscriptions:
                if _is_open(entry, topic) and entry.consumers:
                    members = self._members.setdefault(entry.name, {})
                    for consumer in entry.consumers:
                        members[consumer.name] = consumer.registered_at
                        self._timers.start((entry.name, consumer.name), now)
            await self._settle()
            adopted = sum(len(m) for m in self._members.values())
            log.info(
                "consumer sessions of %s: term %d adopted %d registrations",
                self.topic,
                self._term,
                adopted,
            )

    async def _keep_settled(self) -> None:
        """Settle on every change and at every grace deadline, retrying failures."""
        await keep_settling(
            self._settle_now,
            self._wake,
            self._timers.next_deadline,
            self._clock,
            f"settling consumer sessions of {self.topic}",
        )

    async def _settle_now(self) -> bool:
        async with self._lock:
            self._expire()
            await self._settle()
        return False  # it serves until cancelled or deposed

    def _expire(self) -> None:
        for subscription, name in self._timers.pop_expired(self._clock.monotonic()):
            members = self._members.get(subscription, {})
            if name in members:
                del members[name]
                log.info(
                    "consumer %s of %s/%s did not come back within %.0fs: its segments move",
                    name,
                    self.topic,
                    subscription,
                    self._timers.grace_period,
                )

    # -- the endpoint's calls -------------------------------------------------------------------

    async def register(
        self, subscription: str, consumer_name: str, channel: ConsumerChannel
    ) -> None:
        """Register (or reconnect) a consumer. On success the channel has received the
        consumer's assignment before this returns; otherwise ConsumerRefused says why."""
        await self._ready.wait()
        async with self._lock:
            self._refuse_if_closed()
            if subscription not in self._members:
                # The spec may have just declared it: make sure the cache is not behind.
                with contextlib.suppress(StoreError):
                    await self._informers.topics.catch_up(self._namespace, self._name)
                await self._settle_for_request()
            self._refuse_if_closed()
            self._check_subscription(subscription)
            key = (subscription, consumer_name)
            if key in self._live:
                raise ConsumerRefused(
                    ErrorCode.CONSUMER_BUSY,
                    f"consumer {consumer_name!r} of subscription {subscription!r} on "
                    f"{self.topic} is connected through another registration",
                )
            members = self._members[subscription]
            live = self._live[key] = _Live(channel)
            if consumer_name in members:
                # Back within its grace period: the same segments, nobody else disturbed.
                self._timers.cancel(key)
                self._wake.set()
                self._push_to(key, live)
                log.info(
                    "consumer %s of %s/%s reconnected", consumer_name, self.topic, subscription
                )
                return
            members[consumer_name] = self._clock.now()
            try:
                await self._settle_for_request()
            except BaseException:
                if self._live.get(key) is live:
                    del self._live[key]
                self._members.get(subscription, {}).pop(consumer_name, None)
                raise
            self._refuse_if_closed()
            log.info("consumer %s of %s/%s registered", consumer_name, self.topic, subscription)

    async def unregister(
        self, subscription: str, consumer_name: str, channel: ConsumerChannel
    ) -> None:
        """The consumer leaves: its registration goes at once and the rest are rebalanced."""
        async with self._lock:
            self._refuse_if_closed()
            key = (subscription, consumer_name)
            live = self._live.get(key)
            if live is None or live.channel is not channel:
                raise ConsumerRefused(
                    ErrorCode.UNKNOWN_REGISTRATION,
                    f"consumer {consumer_name!r} of {subscription!r} is not registered here",
                )
            del self._live[key]
            self._timers.cancel(key)
            self._members.get(subscription, {}).pop(consumer_name, None)
            log.info("consumer %s of %s/%s left", consumer_name, self.topic, subscription)
            try:
                await self._settle_for_request()
            except ConsumerRefused:
                self._wake.set()  # the leave stands; persisting it is retried
                raise

    def detach(self, subscription: str, consumer_name: str, channel: ConsumerChannel) -> None:
        """The consumer's connection is gone: its grace period starts."""
        key = (subscription, consumer_name)
        live = self._live.get(key)
        if live is None or live.channel is not channel:
            return
        del self._live[key]
        if consumer_name in self._members.get(subscription, {}):
            self._timers.start(key, self._clock.monotonic())
            self._wake.set()
            log.info(
                "consumer %s of %s/%s disconnected; it keeps its segments for %.0fs",
                consumer_name,
                self.topic,
                subscription,
                self._timers.grace_period,
            )

    # -- settling -------------------------------------------------------------------------------

    async def _settle_for_request(self) -> None:
        try:
            await self._settle()
        except Deposed as deposed:
            raise ConsumerRefused(ErrorCode.NOT_LEADER, str(deposed)) from None
        except (StoreError, ValueError) as error:
            raise ConsumerRefused(
                ErrorCode.SERVICE_NOT_READY, f"the controller cannot record it now: {error}"
            ) from None

    async def _settle(self) -> None:
        """Persist the assignment of the current members (read, compute, compare-and-swap,
        again on conflict), then tell each connected consumer whose segments changed."""
        while True:
            raw = self._informers.topics.get(self._namespace, self._name)
            if raw is None:
                self._topic_gone("was deleted")
                return
            topic = ScalableTopic.model_validate(raw)
            if topic.metadata.deletion_timestamp is not None:
                self._topic_gone("is being deleted")
                return
            self._check_fence(topic)
            layout = SegmentLayout.from_status(raw["status"]) if topic.status.segments else None
            self._observe_declared(topic)
            stored = {
                entry.name: {c.name: c.assigned_segments for c in entry.consumers}
                for entry in topic.status.subscriptions
            }
            desired = {
                subscription: {
                    registration.name: registration
                    for registration in reassign(
                        layout,
                        drained_segments(layout, self._drained_markers(), subscription),
                        members,
                        self._term,
                        stored.get(subscription),
                    )
                }
                for subscription, members in self._members.items()
            }
            entries = _with_consumers(raw, topic, desired)
            if entries is not None:
                try:
                    await self._store.patch_status(
                        ScalableTopic.KIND,
                        self._namespace,
                        self._name,
                        {"status": {"subscriptions": entries}},
                        resource_version=topic.metadata.resource_version,
                    )
                except Conflict:
                    # Someone else wrote the topic: read it again once the cache has it.
                    await self._informers.topics.wait_changed(
                        self._namespace, self._name, topic.metadata.resource_version or ""
                    )
                    continue
            break
        self._layout = layout
        self._assigned = desired
        for key, live in list(self._live.items()):
            self._push_to(key, live)

    def _observe_declared(self, topic: ScalableTopic) -> None:
        """Follow the declared subscriptions: ones that left (or stopped being ordered) end
        their registrations; new ones accept registrations."""
        declared = {s.name: s.type for s in topic.spec.subscriptions}
        self._declared = declared
        deleting = {
            e.name for e in topic.status.subscriptions if e.state is SubscriptionState.DELETING
        }
        for subscription in list(self._members):
            kind = declared.get(subscription)
            if kind in ORDERED_TYPES and subscription not in deleting:
                continue
            reason = (
                f"subscription {subscription!r} of {self.topic} was deleted"
                if kind is None or subscription in deleting
                else f"subscription {subscription!r} of {self.topic} became a {kind} subscription"
            )
            code = (
                ErrorCode.SUBSCRIPTION_NOT_FOUND
                if kind is None or subscription in deleting
                else ErrorCode.SUBSCRIPTION_TYPE_MISMATCH
            )
            for key in [k for k in self._live if k[0] == subscription]:
                self._live.pop(key).channel.closed(code, reason)
            for name in self._members.pop(subscription):
                self._timers.cancel((subscription, name))
            self._assigned.pop(subscription, None)
        for subscription, kind in declared.items():
            if kind in ORDERED_TYPES and subscription not in deleting:
                self._members.setdefault(subscription, {})

    def _push_to(self, key: SessionKey, live: _Live) -> None:
        grant = self._grant(key)
        if live.sent != grant.segments:
            live.sent = grant.segments
            live.channel.assigned(grant)

    def _grant(self, key: SessionKey) -> Grant:
        subscription, name = key
        registration = self._assigned.get(subscription, {}).get(name)
        if registration is None or self._layout is None:
            return Grant(self._term, registration.layout_epoch if registration else 0, ())
        segments = tuple(
            AssignedSegment(
                segment_id,
                self._layout.get(segment_id).hash_range,
                self._segments[segment_id].broker if segment_id in self._segments else None,
            )
            for segment_id in registration.assigned_segments
        )
        return Grant(registration.term, registration.layout_epoch, segments)

    def _drained_markers(self) -> dict[int, frozenset[str]]:
        return {segment_id: obj.drained for segment_id, obj in self._segments.items()}

    def _check_fence(self, topic: ScalableTopic) -> None:
        check_term(newest_term(topic), self._term, self.topic, self._shut)

    def _check_subscription(self, subscription: str) -> None:
        kind = self._declared.get(subscription)
        if kind is not None and kind not in ORDERED_TYPES:
            raise ConsumerRefused(
                ErrorCode.SUBSCRIPTION_TYPE_MISMATCH,
                f"subscription {subscription!r} of {self.topic} is a {kind} subscription: its "
                "consumers attach to every segment and register with no controller",
            )
        if subscription not in self._members:  # undeclared, or being deleted
            raise ConsumerRefused(
                ErrorCode.SUBSCRIPTION_NOT_FOUND,
                f"{self.topic} declares no subscription {subscription!r}",
            )

    def _refuse_if_closed(self) -> None:
        if self._closed is not None:
            raise ConsumerRefused(*self._closed)

    def _topic_gone(self, how: str) -> None:
        self._shut(ErrorCode.TOPIC_NOT_FOUND, f"topic {self.topic} {how}")
        self._members.clear()
        self._assigned.clear()

    def _shut(self, code: ErrorCode, message: str) -> None:
        """Stop serving: every connected consumer's registration ends here, later requests
        are refused with ``code``."""
        if self._closed is None:
            self._closed = (code, message)
        live, self._live = self._live, {}
        for entry in live.values():
            entry.channel.closed(code, message)
        self._ready.set()

    # -- following the informers ----------------------------------------------------------------

    def _topic_changed(self, change: Change) -> None:
        key = _topic_key(change.new)
        if key != self._topic_key:
            self._topic_key = key
            self._wake.set()

    def _segment_changed(self, change: Change) -> None:
        parsed = _segment_object(change.object)
        if parsed is None:
            return
        segment_id, segment = parsed
        if change.new is None:
            if self._segments.pop(segment_id, None) is not None:
                self._wake.set()
        elif self._segments.get(segment_id) != segment:
            self._segments[segment_id] = segment
            self._wake.set()


class ConsumerCoordinators(LedTopics[TopicConsumers]):
    """The consumer sessions of the topics this controller leads, for the endpoint to find."""

    def __init__(
        self,
        store: Store,
        informers: Informers,
        clock: Clock,
        grace_period: float = DEFAULT_GRACE_PERIOD,
    ):
        GraceTimers(grace_period)  # refuses a bad value here, not at the first leadership

        def make(namespace: str, name: str, term: int) -> TopicConsumers:
            return TopicConsumers(store, informers, namespace, name, term, clock, grace_period)

        super().__init__(make, "consumer sessions")


def _is_open(entry: SubscriptionStatus, topic: ScalableTopic) -> bool:
    declared = {s.name: s.type for s in topic.spec.subscriptions}
    return (
        declared.get(entry.name) in ORDERED_TYPES and entry.state is not SubscriptionState.DELETING
    )


def _with_consumers(
    raw: Object, topic: ScalableTopic, desired: dict[str, dict[str, ConsumerRegistration]]
) -> list[dict[str, Any]] | None:
    """``status.subscriptions`` with the consumers of the ordered subscriptions replaced by
    ``desired``; None when that is what is stored already. Other entries and fields stay."""
    stored: list[dict[str, Any]] = list((raw.get("status") or {}).get("subscriptions") or [])
    entries: list[dict[str, Any]] = []
    changed = False
    seen = set()
    for raw_entry, entry in zip(stored, topic.status.subscriptions, strict=True):
        seen.add(entry.name)
        wanted = desired.get(entry.name)
        if wanted is None or list(wanted.values()) == entry.consumers:
            entries.append(raw_entry)
            continue
        changed = True
        entries.append({**raw_entry, "consumers": [r.to_wire() for r in wanted.values()]})
    for subscription, registrations in desired.items():
        if subscription not in seen and registrations:
            changed = True
            entries.append(
                SubscriptionStatus(
                    name=subscription,
                    type=next(s.type for s in topic.spec.subscriptions if s.name == subscription),
                    consumers=list(registrations.values()),
                ).to_wire()
            )
    return entries if changed else None


def _topic_key(obj: Object | None) -> object:
    """What of a ScalableTopic the sessions depend on; other writes wake nobody."""
    if obj is None:
        return None
    metadata, spec, status = obj["metadata"], obj.get("spec") or {}, obj.get("status") or {}
    return (
        metadata.get("uid"),
        metadata.get("deletionTimestamp"),
        repr(spec.get("subscriptions")),
        status.get("epoch"),
        repr(status.get("segments")),
        repr(status.get("subscriptions")),
        repr(status.get("controller")),
    )


def _segment_object(obj: Object) -> tuple[int, _SegmentObject] | None:
    try:
        segment = Segment.model_validate(obj)
    except ValidationError:
        log.warning("ignoring a malformed Segment object %s", obj.get("metadata", {}).get("name"))
        return None
    return segment.spec.segment_id, _SegmentObject(
        segment.status.broker, frozenset(segment.status.drained)
    )
