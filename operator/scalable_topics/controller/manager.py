"""A controller process: holds its share of the ownership shards and leads their topics.

One informer per kind (store/informers.py) feeds everything; ``ShardOwnership`` campaigns for
the shard Leases (model/ownership.py); the ``TopicSupervisor`` runs one ``TopicController`` per
topic of the shards held, started when a shard is won or a topic of it appears, stopped when
the shard is lost or handed over (before its Lease can be taken elsewhere) or the topic is
gone. Any number of controller processes may run; each topic is led by exactly one.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path

from ..admin.broker_admin import BrokerAdmin
from ..http_sessions import admin_session
from ..model.clock import Clock, SystemClock
from ..model.ownership import DEFAULT_SHARD_COUNT, shard_of, validate_shard_count
from ..model.resources import CONTROLLER_ENDPOINT_ANNOTATION as ENDPOINT_ANNOTATION
from ..store import Store
from ..store.cluster_autoscale import ClusterAutoScale
from ..store.informer import Change
from ..store.informers import Informers
from ..tokens import Authenticator, load_public_key
from .consumers import ConsumerCoordinators
from .endpoint import serving_endpoint
from .leader import ElectionTiming
from .led_topics import DEFAULT_GRACE_PERIOD
from .lifecycle import BROKER_DELETE_TIMEOUT
from .metrics import ControllerMetrics
from .ownership import ShardOwnership, shard_index
from .producer_grants import ProducerGrantCoordinators
from .supervisor import DEFAULT_CONCURRENT_PASSES, TopicKey, TopicSupervisor
from .topic_controller import ControllerContext, TopicController

__all__ = ["ENDPOINT_ANNOTATION", "ControllerConfig", "ControllerManager"]

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class ControllerConfig:
    identity: str
    endpoint: str | None = None
    system_namespace: str = "scalable-topics"
    timing: ElectionTiming = field(default_factory=ElectionTiming)
    admin_token: str | None = None
    # Verifies client tokens on /metrics (with authenticate_metrics); brokers are the only
    # other callers, with the cluster token.
    token_public_key: Path | None = None
    authenticate_metrics: bool = False
    # Where the endpoint for consumer sessions and exclusive producer grants listens (host,
    # port); None serves nothing.
    listen: tuple[str, int] | None = None
    # A socket already listening on ``listen`` (see listening.py), served instead of binding
    # ``listen`` again: how a port of 0 is known before the endpoint is published.
    listen_socket: socket.socket | None = field(default=None, compare=False, repr=False)
    # How long a disconnected stream consumer keeps its segments, and a disconnected exclusive
    # producer the topic.
    consumer_grace_period: float = DEFAULT_GRACE_PERIOD
    # Every replica must use the same count (see docs/architecture.md before changing it).
    shards: int = DEFAULT_SHARD_COUNT
    concurrent_passes: int = DEFAULT_CONCURRENT_PASSES
    # How long deleting a topic waits for a broker before leaving it its storage of the topic.
    broker_delete_timeout: float = BROKER_DELETE_TIMEOUT

    def __post_init__(self) -> None:
        if not self.consumer_grace_period > 0:
            raise ValueError(
                f"the consumer grace period must be positive, not {self.consumer_grace_period}s"
            )
        validate_shard_count(self.shards)
        if self.concurrent_passes < 1:
            raise ValueError(f"concurrent passes must be at least 1, not {self.concurrent_passes}")
        if not self.broker_delete_timeout > 0:
            raise ValueError(
                f"the broker delete timeout must be positive, not {self.broker_delete_timeout}s"
            )


def _metrics_authenticator(config: ControllerConfig) -> Authenticator | None:
    """Who may read /metrics, with --authenticate-metrics (and credentials to check)."""
    if not config.authenticate_metrics:
        return None
    key = None if config.token_public_key is None else load_public_key(config.token_public_key)
    return Authenticator(config.admin_token, key)


class ControllerManager:
    def __init__(
        self,
        store: Store,
        config: ControllerConfig,
        clock: Clock | None = None,
        informers: Informers | None = None,
        *,
        follow_topics: bool = True,
        cluster_autoscale: ClusterAutoScale | None = None,
    ) -> None:
        """``informers``: running ones shared with a broker of the same process; by default
        the manager runs its own. ``follow_topics``: lead a topic of a held shard when the
        topics informer reports it; False when something else reports topics through
        ``topic_seen`` (the kopf operator's event handler). ``cluster_autoscale``: the
        process's autoscale settings when something else of the process built them from the
        shared ``informers``; by default the manager builds its own."""
        self._store = store
        self._config = config
        self._clock = clock
        self._informers = informers
        self._follow_topics = follow_topics
        self._cluster_autoscale = cluster_autoscale
        self._running_informers: Informers | None = None
        self._shard_terms: dict[int, int] = {}
        self._supervisor: TopicSupervisor | None = None
        self._context: ControllerContext | None = None
        self.metrics = ControllerMetrics()
        self.ownership: ShardOwnership | None = None

    @property
    def led_topics(self) -> frozenset[TopicKey]:
        return frozenset() if self._supervisor is None else self._supervisor.led

    @property
    def held_shards(self) -> frozenset[int]:
        return frozenset() if self.ownership is None else frozenset(self.ownership.held)

    @property
    def informers(self) -> Informers | None:
        """The informers the manager reads, once it runs."""
        return self._running_informers

    async def run(self) -> None:
        """Lead this replica's share of the topics until cancelled."""
        config = self._config
        clock = self._clock or SystemClock(asyncio.get_running_loop().time)
        async with self._informers_running() as informers:
            store = informers.writing_through(self._store)
            async with admin_session() as session:
                admin = BrokerAdmin(session, config.admin_token)
                coordinators = ConsumerCoordinators(
                    store, informers, clock, config.consumer_grace_period
                )
                grants = ProducerGrantCoordinators(
                    store, informers, admin, clock, config.consumer_grace_period
                )
                self._context = ControllerContext(
                    store,
                    informers,
                    admin,
                    clock,
                    config.identity,
                    config.endpoint,
                    config.system_namespace,
                    coordinators,
                    grants,
                    asyncio.Semaphore(config.concurrent_passes),
                    self.metrics,
                    config.broker_delete_timeout,
                    self._cluster_autoscale
                    or ClusterAutoScale(informers.configmaps, config.system_namespace),
                )
                supervisor = self._supervisor = TopicSupervisor(self._run_topic)
                ownership = self.ownership = ShardOwnership(
                    store,
                    informers,
                    config.identity,
                    config.endpoint,
                    config.shards,
                    config.timing,
                    clock,
                    self._lead_shard,
                )
                self.metrics.follow(
                    lambda: len(supervisor.led), lambda: len(ownership.held), self._store, informers
                )
                unsubscribe = (
                    informers.topics.subscribe(self._topic_changed)
                    if self._follow_topics
                    else lambda: None
                )
                try:
                    async with self._serving(coordinators, grants, informers):
                        await informers.wait_synced()
                        await ownership.run()
                finally:
                    unsubscribe()
                    await supervisor.close()

    @contextlib.asynccontextmanager
    async def _informers_running(self) -> AsyncIterator[Informers]:
        if self._informers is not None:
            self._running_informers = self._informers
            yield self._informers
            return
        informers = self._running_informers = Informers(self._store, self._config.system_namespace)
        informers.start()
        try:
            yield informers
        finally:
            await informers.stop()

    def _serving(
        self,
        coordinators: ConsumerCoordinators,
        grants: ProducerGrantCoordinators,
        informers: Informers,
    ) -> contextlib.AbstractAsyncContextManager[None]:
        listen, config = self._config.listen, self._config
        if listen is None:
            return contextlib.nullcontext()
        return serving_endpoint(
            coordinators,
            informers,
            config.identity,
            config.admin_token,
            *listen,
            grants,
            self.metrics,
            sock=config.listen_socket,
            metrics_authenticator=_metrics_authenticator(config),
        )

    # -- shards and topics ----------------------------------------------------------------------

    async def _lead_shard(self, shard: int, term: int, handover: asyncio.Event) -> None:
        """Lead every topic of the shard for ``term`` until it is handed over (or this is
        cancelled because its Lease was lost); return only once they have all stopped."""
        assert self._supervisor is not None and self._context is not None
        count = self._config.shards
        self._shard_terms[shard] = term
        topics = self._context.informers.topics.by_index(shard_index(count), shard)
        log.info(
            "%s leads shard %d (term %d): %d topics",
            self._config.identity,
            shard,
            term,
            len(topics),
        )
        for topic in topics:
            metadata = topic["metadata"]
            self._supervisor.lead((metadata["namespace"], metadata["name"]), term)
        try:
            await handover.wait()
        finally:
            if self._shard_terms.get(shard) == term:
                del self._shard_terms[shard]
            led = [key for key in self._supervisor.led if shard_of(*key, count) == shard]
            await self._supervisor.stop(led)
            log.info("%s stopped leading shard %d (term %d)", self._config.identity, shard, term)

    def _topic_changed(self, change: Change) -> None:
        if change.new is not None:
            self.topic_seen(*change.key)

    def topic_seen(self, namespace: str, name: str) -> None:
        """A topic appeared (or changed): lead it if its shard is held here and it is not led
        for the shard's term yet. Its controller reads it from the topics informer, which must
        hold it already (it returns at once, as for a deleted topic, when it does not)."""
        if self._supervisor is None:
            return
        key = (namespace, name)
        term = self._shard_terms.get(shard_of(namespace, name, self._config.shards))
        if term is not None and self._supervisor.term_of(key) != term:
            self._supervisor.lead(key, term)

    async def _run_topic(self, key: TopicKey, term: int) -> None:
        assert self._context is not None
        try:
            await TopicController(self._context, key[0], key[1], term).run()
        except Exception:
            self.metrics.restarts.inc()
            raise
