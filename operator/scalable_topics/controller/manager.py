"""A controller process: campaigns for every ScalableTopic's Lease and leads the ones it wins.

Each topic has a Lease ``<topic>-controller`` in its namespace, annotated with the holder's
endpoint. Any number of controller processes may run; each topic is led by exactly one, which
reconciles it whenever the topic changes (and retries with backoff while it is not settled).
When a topic is gone, its campaign stops and its Lease is removed.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field

import aiohttp

from ..admin.broker_admin import BrokerAdmin, BrokerAdminError, BrokerUnreachable
from ..model.clock import Clock, SystemClock
from ..model.placement import NoLiveBroker
from ..model.resources import CONTROLLER_ENDPOINT_ANNOTATION as ENDPOINT_ANNOTATION
from ..model.resources import ScalableTopic, controller_lease_name
from ..store import Conflict, EventType, Expired, LeaseLock, NotFound, Store, StoreError
from ..store.kinds import LEASE
from ..tasks import cancel_and_wait
from .consumers import ConsumerCoordinators
from .endpoint import serving_endpoint
from .leader import ElectionTiming, LeaderElector
from .led_topics import DEFAULT_GRACE_PERIOD
from .lifecycle import LeaderIdentity, TopicLifecycle
from .producer_grants import ProducerGrantCoordinators
from .scaling import OperationCannotProceed, TopicScaler

log = logging.getLogger(__name__)

_RETRY_FIRST, _RETRY_MAX = 0.5, 30.0
_IMMEDIATE_RETRIES = 5
# A settled topic is looked at again this often: drained markers (on Segment objects) and
# retention age change nothing on the topic, yet they decide garbage collection.
_RESYNC_SECONDS = 30.0


@dataclass(frozen=True, slots=True)
class ControllerConfig:
    identity: str
    endpoint: str | None = None
    system_namespace: str = "scalable-topics"
    timing: ElectionTiming = field(default_factory=ElectionTiming)
    admin_token: str | None = None
    # Where the endpoint for consumer sessions and exclusive producer grants listens (host,
    # port); None serves nothing.
    listen: tuple[str, int] | None = None
    # A socket already listening on ``listen`` (see listening.py), served instead of binding
    # ``listen`` again: how a port of 0 is known before the endpoint is published.
    listen_socket: socket.socket | None = field(default=None, compare=False, repr=False)
    # How long a disconnected stream consumer keeps its segments, and a disconnected exclusive
    # producer the topic.
    consumer_grace_period: float = DEFAULT_GRACE_PERIOD

    def __post_init__(self) -> None:
        if not self.consumer_grace_period > 0:
            raise ValueError(
                f"the consumer grace period must be positive, not {self.consumer_grace_period}s"
            )


class _Topic:
    """One topic's campaign and the wake-up its leader waits on."""

    def __init__(self) -> None:
        self.changed = asyncio.Event()
        self.task: asyncio.Task[None] | None = None


class ControllerManager:
    def __init__(self, store: Store, config: ControllerConfig, clock: Clock | None = None) -> None:
        self._store = store
        self._config = config
        self._clock = clock
        self._topics: dict[tuple[str, str], _Topic] = {}
        self._admin: BrokerAdmin | None = None
        self._coordinators: ConsumerCoordinators | None = None
        self._grants: ProducerGrantCoordinators | None = None

    async def run(self) -> None:
        """Follow every ScalableTopic until cancelled."""
        clock = self._clock or SystemClock(asyncio.get_running_loop().time)
        self._clock = clock
        coordinators = ConsumerCoordinators(self._store, clock, self._config.consumer_grace_period)
        self._coordinators = coordinators
        async with aiohttp.ClientSession() as session:
            self._admin = BrokerAdmin(session, self._config.admin_token)
            self._grants = ProducerGrantCoordinators(
                self._store, self._admin, clock, self._config.consumer_grace_period
            )
            async with self._serving(coordinators, self._grants):
                await self._follow_until_cancelled()

    async def _follow_until_cancelled(self) -> None:
        try:
            await self._follow_topics()
        finally:
            for topic in self._topics.values():
                if topic.task is not None:
                    topic.task.cancel()
            await asyncio.gather(
                *(t.task for t in self._topics.values() if t.task), return_exceptions=True
            )

    def _serving(
        self, coordinators: ConsumerCoordinators, grants: ProducerGrantCoordinators
    ) -> AbstractAsyncContextManager[None]:
        listen, config = self._config.listen, self._config
        if listen is None:
            return contextlib.nullcontext()
        return serving_endpoint(
            coordinators,
            self._store,
            config.identity,
            config.admin_token,
            *listen,
            grants,
            sock=config.listen_socket,
        )

    async def _follow_topics(self) -> None:
        while True:
            try:
                listing = await self._store.list(ScalableTopic.KIND)
                present = set()
                for item in listing.items:
                    key = (item["metadata"]["namespace"], item["metadata"]["name"])
                    present.add(key)
                    self._touch(key)
                for key in set(self._topics) - present:
                    await self._forget(key)
                async with self._store.watch(
                    ScalableTopic.KIND, resource_version=listing.resource_version
                ) as events:
                    async for event in events:
                        key = (
                            event.object["metadata"]["namespace"],
                            event.object["metadata"]["name"],
                        )
                        if event.type is EventType.DELETED:
                            await self._forget(key)
                        else:
                            self._touch(key)
            except asyncio.CancelledError:
                raise
            except Expired:
                continue
            except StoreError:
                log.warning("watching ScalableTopics failed; listing again", exc_info=True)
                await asyncio.sleep(_RETRY_FIRST)

    def _touch(self, key: tuple[str, str]) -> None:
        topic = self._topics.get(key)
        if topic is None:
            topic = self._topics[key] = _Topic()
            topic.task = asyncio.get_running_loop().create_task(
                self._campaign(key, topic), name=f"campaign {key}"
            )
        topic.changed.set()

    async def _forget(self, key: tuple[str, str]) -> None:
        topic = self._topics.pop(key, None)
        if topic is None or topic.task is None:
            return
        await cancel_and_wait(topic.task)
        with contextlib.suppress(NotFound, StoreError):
            await self._store.delete(LEASE.kind, key[0], controller_lease_name(key[1]))

    async def _campaign(self, key: tuple[str, str], topic: _Topic) -> None:
        namespace, name = key
        assert self._clock is not None
        annotations = {ENDPOINT_ANNOTATION: self._config.endpoint} if self._config.endpoint else {}
        lock = LeaseLock(
            self._store,
            namespace,
            controller_lease_name(name),
            self._config.identity,
            max(1, round(self._config.timing.lease_duration)),
            self._clock,
            annotations,
        )

        async def lead(term: int) -> None:
            assert self._coordinators is not None and self._grants is not None
            # Consumer sessions and the exclusive producer are served for exactly as long as
            # the topic is led.
            async with (
                self._coordinators.leading(namespace, name, term),
                self._grants.leading(namespace, name, term),
            ):
                await self._lead(namespace, name, term, topic)

        elector = LeaderElector(lock, self._config.timing, self._clock, lead)
        while True:
            try:
                await elector.run()  # returns when leadership is lost: campaign again
            except Exception:
                log.exception("leading %s/%s failed; campaigning again", namespace, name)
                await asyncio.sleep(_RETRY_FIRST)

    async def _lead(self, namespace: str, name: str, term: int, topic: _Topic) -> None:
        assert self._admin is not None and self._clock is not None
        leader = LeaderIdentity(self._config.identity, self._config.endpoint, term)
        lifecycle = TopicLifecycle(
            self._store, self._admin, self._clock, leader, self._config.system_namespace
        )
        scaler = TopicScaler(self._store, self._admin, self._clock, lifecycle, lifecycle.events)
        delay = _RETRY_FIRST
        conflicts = 0
        while True:
            topic.changed.clear()
            try:
                # Requests first: a split must not wait for a full pass over every segment.
                await scaler.advance(namespace, name)
                settled = await lifecycle.reconcile(namespace, name)
                conflicts = 0
            except Conflict:
                # Another writer of the status (consumer sessions, grants) came first: read
                # again at once, a few times, before backing off like any other failure.
                conflicts += 1
                if conflicts <= _IMMEDIATE_RETRIES:
                    continue
                log.info(
                    "reconciling %s/%s: repeated conflicts; retrying in %.1fs",
                    namespace,
                    name,
                    delay,
                )
                settled = False
            except (
                StoreError,
                BrokerAdminError,
                BrokerUnreachable,
                NoLiveBroker,
                OperationCannotProceed,
                ValueError,
            ) as error:
                # Conflicts, unreachable brokers, no live broker yet: all transient.
                log.info("reconciling %s/%s: %s; retrying in %.1fs", namespace, name, error, delay)
                settled = False
            if settled:
                delay = _RETRY_FIRST
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(_RESYNC_SECONDS):
                        await topic.changed.wait()
                continue
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(delay):
                    await topic.changed.wait()
            delay = min(delay * 2, _RETRY_MAX)
