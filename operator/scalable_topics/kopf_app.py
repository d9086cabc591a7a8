"""The kopf operator: thin handlers in front of the controller manager.

kopf connects the process to Kubernetes the way operators are expected to (login from the same
kubeconfig or service account as the store adapter, a liveness endpoint, settings, a clean
stop), and its ``on.event`` handler for ScalableTopics tells the manager which topics exist.
Everything else stays where standalone runs it too: the manager's informers are the cache the
controllers read, its shard Leases elect the leader of each topic, its supervisor runs one
controller per led topic, and the controller's own finalizer guards deletion.

What kopf is deliberately not used for (docs/architecture.md says why at length): daemons and
timers (kopf stops a daemon when ``deletionTimestamp`` appears, exactly when the controller
must run the deletion, and puts a finalizer of its own on every object), kopf finalizers,
peering (it pauses whole operators; ours elect per shard), and kopf's event posting (the
controller posts its own Events, naming the topic's rule and figures). The handlers carry no
protocol logic.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import kopf

from .controller.manager import ControllerManager
from .model.resources import API_VERSION, ScalableTopic
from .store.kubernetes import ClusterSource, load_configuration

log = logging.getLogger(__name__)

# What kopf writes if any handler ever asks it to persist state (on.event handlers do not):
# names in our own API group, never kopf's defaults shared with other operators.
KOPF_PREFIX = "kopf.scalabletopics.dev"
# How long the event handler waits for the informer to hold a topic kopf reported: the two
# watch the same kind, so the informer is at most a watch delay behind.
INFORMER_CATCH_UP_SECONDS = 30.0


@dataclass(frozen=True, slots=True)
class WatchTimeouts:
    """kopf's watch requests: the API server ends each after ``server`` seconds (kopf then
    resumes from its last resourceVersion); a stream silent for ``inactivity`` seconds counts
    as dead (kopf asks for bookmarks, so a live one never is). ``server`` is whole seconds:
    kopf sends it as written, and the API server takes only an integer."""

    server: int = 300
    client: float = 330.0
    connect: float = 10.0
    inactivity: float = 360.0


class RetryForever:
    """kopf's ``networking.error_backoffs`` that never run out: 1, 2, 4... up to 30 s, then
    30 s for ever. kopf escalates a request that fails past its backoffs and stops the whole
    operator; an API server that is away for a while is no reason to (the informers and the
    readiness probe say it is away). An iterable, not a sized sequence: kopf iterates it afresh
    for every request and, not knowing a count, never gives up."""

    def __iter__(self) -> Iterator[float]:
        delay = 1.0
        while True:
            yield delay
            delay = min(delay * 2, 30.0)


class RetriesAsWarnings(logging.Filter):
    """kopf logs each failed attempt of a request it will retry at ERROR; a retry by design is
    a WARNING (one line per attempt: kopf adds no traceback to these)."""

    def filter(self, record: logging.LogRecord) -> bool:
        if (
            record.name.startswith("kopf")
            and record.levelno == logging.ERROR
            and record.getMessage().startswith("Request attempt")
            and "will retry" in record.getMessage()
        ):
            record.levelno, record.levelname = logging.WARNING, "WARNING"
        return True


def connection_info(configuration: Any) -> kopf.ConnectionInfo:
    """kopf's credentials from a kubernetes_asyncio Configuration loaded by the store adapter
    (bearer token or client certificate, the cluster CA, the namespace of a pod)."""
    token: str | None = None
    scheme: str | None = None
    header = configuration.api_key.get("BearerToken") or configuration.api_key.get("authorization")
    if header:
        scheme, _, token = str(header).partition(" ")
        if not token:  # a bare token, without its scheme
            scheme, token = "Bearer", scheme
    return kopf.ConnectionInfo(
        server=configuration.host,
        ca_path=configuration.ssl_ca_cert or None,
        insecure=not configuration.verify_ssl,
        scheme=scheme,
        token=token,
        username=configuration.username or None,
        password=configuration.password or None,
        certificate_path=configuration.cert_file or None,
        private_key_path=configuration.key_file or None,
    )


class OperatorApp:
    """The handlers of one operator process, registered on a registry of its own."""

    def __init__(
        self,
        manager: ControllerManager,
        source: ClusterSource,
        timeouts: WatchTimeouts | None = None,
    ) -> None:
        self._manager = manager
        self._source = source
        self._timeouts = timeouts or WatchTimeouts()
        self._managing: asyncio.Task[None] | None = None
        # Set when the manager stops on its own (it failed): kopf stops then, too.
        self.stop_flag = asyncio.Event()
        self.registry = kopf.OperatorRegistry()
        group, version = API_VERSION.split("/")
        on = kopf.on
        on.login(registry=self.registry)(self._login)
        on.startup(registry=self.registry)(self._startup)
        on.cleanup(registry=self.registry)(self._cleanup)
        on.probe(id="leadership", registry=self.registry)(self._leadership)
        on.probe(id="store", registry=self.registry)(self._store_health)
        on.event(group, version, ScalableTopic.PLURAL, registry=self.registry)(self._topic_event)

    @property
    def manager_task(self) -> asyncio.Task[None] | None:
        return self._managing

    async def _login(self, **_: Any) -> kopf.ConnectionInfo:
        return connection_info(await load_configuration(self._source))

    async def _startup(self, settings: kopf.OperatorSettings, **_: Any) -> None:
        settings.peering.standalone = True  # shard Leases elect, not kopf's peering
        settings.posting.enabled = False  # the controller posts its own Events
        settings.scanning.disabled = True  # no CRD or Namespace watches: less RBAC, no churn
        timeouts = self._timeouts
        settings.watching.server_timeout = timeouts.server
        settings.watching.client_timeout = timeouts.client
        settings.watching.connect_timeout = timeouts.connect
        settings.watching.inactivity_timeout = timeouts.inactivity
        settings.networking.connect_timeout = timeouts.connect
        settings.networking.error_backoffs = RetryForever()
        settings.persistence.finalizer = f"{KOPF_PREFIX}/finalizer"
        settings.persistence.progress_storage = kopf.AnnotationsProgressStorage(prefix=KOPF_PREFIX)
        settings.persistence.diffbase_storage = kopf.AnnotationsDiffBaseStorage(
            prefix=KOPF_PREFIX, key="last-handled-configuration"
        )
        self._managing = asyncio.get_running_loop().create_task(
            self._manager.run(), name="controller manager"
        )
        self._managing.add_done_callback(lambda _: self.stop_flag.set())

    async def _cleanup(self, **_: Any) -> None:
        """Stop the manager: its supervisor stops every topic controller and its shard Leases
        are released, so another replica leads them at once."""
        task = self._managing
        if task is None:
            return
        if not task.done():
            task.cancel()
        # Its outcome (a failure) is the caller's: ``run_operator`` reads it after kopf ends.
        await asyncio.wait({task})

    async def _leadership(self, **_: Any) -> dict[str, Any]:
        manager = self._manager
        return {
            "shards": sorted(manager.held_shards),
            "topics": len(manager.led_topics),
        }

    async def _store_health(self, **_: Any) -> dict[str, Any]:
        informers = self._manager.informers
        problems = ["not started"] if informers is None else informers.problems()
        return {"following": not problems, "problems": problems}

    async def _topic_event(self, type: str | None, body: kopf.Body, **_: Any) -> None:
        """A ScalableTopic was listed, added, changed or deleted. Deletions need nothing: the
        topic's controller ends when the topic leaves the informer."""
        if type == "DELETED":
            return
        informers = self._manager.informers
        if informers is None:
            return  # not running yet: it leads whatever the informer lists once it does
        namespace, name = body.metadata.namespace or "", body.metadata.name or ""
        if await informers.topics.wait_present(namespace, name, INFORMER_CATCH_UP_SECONDS):
            self._manager.topic_seen(namespace, name)
        else:
            log.info("%s/%s: gone before the informer saw it; nothing to lead", namespace, name)


async def run_operator(app: OperatorApp, *, liveness_endpoint: str | None) -> None:
    """Run kopf with ``app``'s handlers until ``app.stop_flag`` is set (kopf also stops on
    SIGINT and SIGTERM) or the manager fails; raise the manager's failure."""
    try:
        await kopf.operator(
            registry=app.registry,
            clusterwide=True,
            standalone=True,
            liveness_endpoint=liveness_endpoint,
            stop_flag=app.stop_flag,
        )
    finally:
        task, failure = app.manager_task, None
        if task is not None:
            if not task.done():
                task.cancel()
                await asyncio.wait({task})
            if not task.cancelled():
                failure = task.exception()  # retrieved even when kopf's own failure wins
    if failure is not None:
        raise failure
