"""The broker process: an aiohttp application serving the wire protocol, the segment and topic
admin APIs and metrics."""

from __future__ import annotations

import asyncio
import gc
import logging
import os
import signal
import socket
import sys
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

from aiohttp import web

from ..http_access import AUTHENTICATOR_KEY, METRICS_AUTHENTICATED_KEY, authentication
from ..http_bad_requests import quiet_malformed_requests
from ..store import Store, open_store
from ..store.cluster_autoscale import ClusterAutoScale
from ..store.informers import Informers
from ..tasks import cancel_and_wait
from ..tokens import Authenticator, load_public_key
from ..websocket_upgrade import client_left_during_upgrade
from .admin import REGISTRY_KEY, TOKEN_KEY, add_routes, admin_errors
from .admin_body import BODY_MAX_BYTES
from .body_timeout import body_timeout
from .config import BrokerConfig
from .connection_limits import ConnectionLimits, refused_upgrade
from .controller_links import ControllerLinks
from .drain_markers import DrainMarkers
from .inflight import PublishCounters
from .load_metrics import LOAD_HISTORY_KEY, LOAD_REPORTER_KEY
from .load_reporter import LoadReporter
from .metrics import (
    CONNECTION_LIMITS_KEY,
    NAMESPACE_WATCHES_KEY,
    PUBLISH_COUNTERS_KEY,
    install_metrics,
    metrics_handler,
)
from .namespace_watch import NamespaceWatchRegistry
from .orphan_storage import reclaim_until_done, store_knows_broker
from .registration import Registration
from .registry import SegmentRegistry
from .session import Session
from .topic_admin import INFORMERS_KEY, STORE_KEY, add_topic_routes
from .topic_load import CLUSTER_AUTOSCALE_KEY, LOAD_HISTORY_LOCATION_KEY
from .topic_watch import TopicWatchHub

if TYPE_CHECKING:
    from .load_history import LoadHistory

log = logging.getLogger(__name__)

CONFIG_KEY = web.AppKey("broker_config", BrokerConfig)
TOPIC_WATCHES_KEY = web.AppKey("topic_watches", TopicWatchHub)
CONTROLLER_LINKS_KEY = web.AppKey("controller_links", ControllerLinks)
SESSIONS_KEY = web.AppKey("sessions", set[Session])  # open WebSockets
# aiohttp refuses WebSocket messages past this; a frame between the protocol limit and it still
# gets a FrameTooLarge error frame instead of a dropped connection.
_WEBSOCKET_SLACK_BYTES = 1024 * 1024


async def websocket(request: web.Request) -> web.StreamResponse:
    # Past a connection limit the upgrade is refused before anything is set up for it.
    limits = request.app[CONNECTION_LIMITS_KEY]
    address = request.remote  # the TCP peer: no forwarding header is believed
    refusal = limits.admit(address)
    if refusal is not None:
        return refused_upgrade(refusal)
    try:
        return await _serve_websocket(request, limits)
    finally:
        limits.leave(address)


async def _serve_websocket(request: web.Request, limits: ConnectionLimits) -> web.StreamResponse:
    config = request.app[CONFIG_KEY]
    # No aiohttp heartbeat and no autoping: the session's watchdog pings (see ws_watchdog.py).
    ws = web.WebSocketResponse(
        max_msg_size=config.max_frame_bytes + _WEBSOCKET_SLACK_BYTES, autoping=False
    )
    try:
        await ws.prepare(request)
    except ConnectionResetError:
        return client_left_during_upgrade()
    session = Session(
        ws,
        config,
        request.app[REGISTRY_KEY],
        topic_watches=request.app[TOPIC_WATCHES_KEY],
        controller_links=request.app[CONTROLLER_LINKS_KEY],
        publish_counters=request.app[PUBLISH_COUNTERS_KEY],
        authenticator=request.app[AUTHENTICATOR_KEY],
        limits=limits,
        namespace_watches=request.app[NAMESPACE_WATCHES_KEY],
    )
    sessions = request.app[SESSIONS_KEY]
    sessions.add(session)
    try:
        await session.serve()
    finally:
        sessions.discard(session)
    return ws


async def _end_namespace_watches(app: web.Application) -> None:
    """On shutdown, before the sessions close: each namespace watch hears WatchEnded
    ServiceNotReady, so that its client watches again elsewhere (docs/protocol.md)."""
    registry = app.get(NAMESPACE_WATCHES_KEY)
    if registry is not None:
        await registry.stop()


async def _close_sessions(app: web.Application) -> None:
    """On shutdown, before the handlers are cancelled: every client hears 1001 (going away)."""
    sessions: set[Session] = app[SESSIONS_KEY]
    await asyncio.gather(*(session.going_away() for session in list(sessions)))


def authenticator(config: BrokerConfig) -> Authenticator:
    """What the broker accepts: the cluster token, and client tokens when it has their key."""
    key = None if config.token_public_key is None else load_public_key(config.token_public_key)
    return Authenticator(config.auth_token, key)


def runner_options(config: BrokerConfig) -> dict[str, Any]:
    """The options of the aiohttp runner (``web.run_app``, ``web.AppRunner``) serving ``config``.

    aiohttp closes a connection that has not sent a whole request head within its keep-alive
    timeout of connecting (or of its previous response): that bounds the WebSocket handshake
    and a slow-loris sending half a header, and it is also how long an idle keep-alive HTTP
    connection stays open."""
    return {"keepalive_timeout": config.handshake_timeout}


def build_app(
    config: BrokerConfig,
    store: Store | None = None,
    informers: Informers | None = None,
    cluster_autoscale: ClusterAutoScale | None = None,
) -> web.Application:
    """The broker application; ``store`` defaults to opening ``config.store_url``, and
    ``informers`` (running ones, shared with a controller in the same process) to its own,
    ``cluster_autoscale`` (the process's, read from those informers) to one of its own."""
    app = web.Application(
        middlewares=[authentication, admin_errors, body_timeout(config.body_timeout)],
        client_max_size=BODY_MAX_BYTES,
    )
    quiet_malformed_requests()
    app[CONFIG_KEY] = config
    app[SESSIONS_KEY] = set()
    app.on_shutdown.append(_end_namespace_watches)
    app.on_shutdown.append(_close_sessions)
    app[PUBLISH_COUNTERS_KEY] = PublishCounters()
    app[CONNECTION_LIMITS_KEY] = ConnectionLimits.of(config)
    if config.auth_token is not None:
        app[TOKEN_KEY] = config.auth_token
    app[AUTHENTICATOR_KEY] = authenticator(config)
    app[METRICS_AUTHENTICATED_KEY] = config.authenticate_metrics

    async def lifecycle(app: web.Application) -> AsyncIterator[None]:
        owned = store is None
        backend = (
            open_store(config.store_url, budget=config.store_budget) if store is None else store
        )
        app[STORE_KEY] = backend
        own_informers = informers is None
        cached = Informers(backend, config.system_namespace) if informers is None else informers
        if own_informers:
            cached.start()
        app[INFORMERS_KEY] = cached
        markers = DrainMarkers(backend, cached)
        await markers.start()
        registry = SegmentRegistry(config, markers)
        await registry.start()
        app[REGISTRY_KEY] = registry
        topic_watches = TopicWatchHub(cached)
        await topic_watches.start()
        app[TOPIC_WATCHES_KEY] = topic_watches
        namespace_watches = NamespaceWatchRegistry(cached.topics)
        await namespace_watches.start()
        app[NAMESPACE_WATCHES_KEY] = namespace_watches
        controller_links = ControllerLinks(cached, config)
        await controller_links.start()
        app[CONTROLLER_LINKS_KEY] = controller_links
        history = _load_history(config, cached)
        if history is not None:
            await history.start()
            app[LOAD_HISTORY_KEY] = history
        cluster = cluster_autoscale or ClusterAutoScale(cached.configmaps, config.system_namespace)
        app[CLUSTER_AUTOSCALE_KEY] = cluster
        if config.load_history:
            app[LOAD_HISTORY_LOCATION_KEY] = config.load_history
        reporter = LoadReporter(
            backend,
            cached,
            cluster,
            lambda: registry,
            config.identity,
            history,
        )
        await reporter.start()
        app[LOAD_REPORTER_KEY] = reporter
        sessions: set[Session] = app[SESSIONS_KEY]
        install_metrics(app, sessions)
        known = await store_knows_broker(
            backend, config.system_namespace, config.identity, len(list(registry))
        )
        registration = Registration(
            backend, config, lambda: _load(registry), registry.capacity, cached
        )
        await registration.start()
        # Storage of segments deleted while this broker was away.
        reclaiming = (
            asyncio.get_running_loop().create_task(
                reclaim_until_done(backend, registry, config), name="reclaim orphaned storage"
            )
            if known
            else None
        )
        retention = asyncio.get_running_loop().create_task(_retention_loop(registry, config))
        log.info(
            "broker %s serving %s; it hosts up to %d segments and serves up to %d connections",
            config.identity,
            config.url,
            registry.capacity,
            app[CONNECTION_LIMITS_KEY].max_connections,
        )
        try:
            yield
        finally:
            if reclaiming is not None:
                await cancel_and_wait(reclaiming)
            await topic_watches.stop()
            await namespace_watches.stop()
            await controller_links.stop()
            await registration.stop()
            await reporter.stop()
            if history is not None:
                await history.stop()  # writes what is buffered
            await cancel_and_wait(retention)
            await registry.close()
            await markers.stop()
            if own_informers:
                await cached.stop()
            if owned:
                await backend.close()

    app.cleanup_ctx.append(lifecycle)
    app.router.add_get("/ws", websocket)
    app.router.add_get("/metrics", metrics_handler)
    add_routes(app)
    add_topic_routes(app)
    return app


def _load_history(config: BrokerConfig, informers: Informers) -> LoadHistory | None:
    if not config.load_history:
        return None
    # Imported only here: pyarrow costs every broker that keeps no history some 75 MiB.
    from .load_history import LoadHistory

    return LoadHistory(
        config.load_history,
        config.identity,
        informers,
        config.load_history_flush,
        config.load_history_retention,
    )


def _load(registry: SegmentRegistry) -> tuple[int, float]:
    segments = list(registry)
    return len(segments), sum(s.load.sample().msg_rate_in for s in segments)


async def _retention_loop(registry: SegmentRegistry, config: BrokerConfig) -> None:
    while True:
        await asyncio.sleep(config.retention_check_interval)
        for segment in registry:
            try:
                dropped = await segment.apply_retention()
            except Exception:
                log.exception("retention failed on segment %s", segment.key)
                continue
            if dropped:
                log.info(
                    "retention dropped %d consumed entries of segment %s", dropped, segment.key
                )


async def _stop_when_stdin_closes(app: web.Application) -> AsyncIterator[None]:
    """A supervisor holds the write end of our stdin and never writes: when it exits, even
    killed, the pipe closes and we stop as on SIGTERM, instead of holding the port."""
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader()
    transport, _ = await loop.connect_read_pipe(
        lambda: asyncio.StreamReaderProtocol(reader), sys.stdin
    )

    async def watch() -> None:
        await reader.read()  # everything until end-of-file: nothing ever comes
        log.warning("the supervising process is gone (stdin closed); stopping")
        os.kill(os.getpid(), signal.SIGTERM)

    watching = loop.create_task(watch(), name="watch stdin")
    yield
    await cancel_and_wait(watching)
    transport.close()


def run(
    config: BrokerConfig, *, sock: socket.socket | None = None, stop_on_stdin_eof: bool = False
) -> None:
    """Serve until SIGINT or SIGTERM, on ``sock`` when given (bound to ``config.port``, see
    listening.py), else on ``config.host:config.port``."""
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    config.data_dir.mkdir(parents=True, exist_ok=True)
    # The dispatch path allocates a few short-lived objects per message; collecting the young
    # generation every 700 allocations costs throughput. Objects from start-up are frozen so
    # that full collections do not walk them again.
    gc.freeze()
    gc.set_threshold(50_000, 50, 100)
    app = build_app(config)
    if stop_on_stdin_eof:
        app.cleanup_ctx.append(_stop_when_stdin_closes)
    options = runner_options(config)
    if sock is not None:
        web.run_app(app, sock=sock, print=None, handle_signals=True, **options)
    else:
        web.run_app(
            app, host=config.host, port=config.port, print=None, handle_signals=True, **options
        )
