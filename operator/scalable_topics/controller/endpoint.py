"""The controller's endpoint: brokers relay their clients' requests for topic leaders here.

One WebSocket per broker connection, speaking wire protocol v1 with the broker as the client
(Connect first, then requests multiplexed by id, Ping/Pong). Today it serves consumer
registrations of Stream and Checkpoint subscriptions: RegisterConsumer is answered by Success
and then ConsumerAssignment pushes, UnregisterConsumer by Success, and the controller ends a
registration with RegistrationClosed. A request about a topic this controller does not lead is
refused with NotLeader, naming the leader's endpoint when one is elected; brokers find the
leader through the Lease of the topic's ownership shard and ask again.

The connection is a generic request channel to topic leaders: the topic-wide exclusive
producer grant (AcquireExclusive, ReleaseExclusive; ``endpoint_grants.py``) travels the same
way.

When the connection drops, each registration on it is *detached*, not removed: the consumer
keeps its segments for the grace period (seed: Consumer Session Lifecycle).

Connections end as a broker's client connections do (docs/protocol.md, section 4): the Error
first, then the close code of ``close_code_for`` (1003 for a text message, 1001 when the
controller stops); a watchdog closes a connection with no Connect within ``CONNECT_SECONDS``
of the upgrade, or one that falls silent (``ws_watchdog.py``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
from collections.abc import AsyncIterator, Coroutine
from dataclasses import dataclass
from typing import Any, NoReturn

from aiohttp import WSMsgType, web

from ..credentials import same_secret
from ..http_access import AUTHENTICATOR_KEY, METRICS_AUTHENTICATED_KEY, authentication
from ..http_bad_requests import quiet_malformed_requests
from ..protocol import (
    DEFAULT_MAX_FRAME_BYTES,
    DEFAULT_MAX_MESSAGE_BYTES,
    SUPPORTED_VERSIONS,
    AcquireExclusive,
    CloseCode,
    Command,
    Connect,
    Connected,
    ConsumerAssignment,
    Error,
    ErrorCode,
    NamespaceUpdate,
    Ping,
    Pong,
    ProtocolError,
    RegisterConsumer,
    RegistrationClosed,
    ReleaseExclusive,
    Sender,
    Success,
    UnregisterConsumer,
    WatchEnded,
    WatchNamespace,
    close_code_for,
    decode_frame,
    encode_frame,
    negotiate_version,
    speaks,
)
from ..store.informers import Informers
from ..tasks import cancel_and_wait
from ..tokens import Authenticator
from ..websocket_upgrade import client_left_during_upgrade
from ..ws_watchdog import Watchdog
from .consumers import ConsumerCoordinators, ConsumerRefused, Grant, TopicConsumers
from .endpoint_grants import GrantRequests
from .metrics import ControllerMetrics
from .producer_grants import GrantRefused, ProducerGrantCoordinators, TopicProducerGrants

log = logging.getLogger(__name__)

ENDPOINT_PATH = "/ws"
CONNECT_SECONDS = 10.0  # a broker sends Connect at once
# aiohttp closes a connection that has not sent a whole request head within its keep-alive
# timeout (of connecting, or of its previous answer): the bound on a slow or half-sent
# WebSocket upgrade and on idle probe connections, as the brokers' --handshake-timeout.
HANDSHAKE_SECONDS = 10.0
COORDINATORS_KEY = web.AppKey("consumer_coordinators", ConsumerCoordinators)
GRANTS_KEY = web.AppKey("producer_grants", ProducerGrantCoordinators)


@dataclass(frozen=True, slots=True)
class EndpointSettings:
    identity: str  # named in Connected
    token: str | None  # required from brokers when set


INFORMERS_KEY = web.AppKey("controller_informers", Informers)
SETTINGS_KEY = web.AppKey("controller_endpoint_settings", EndpointSettings)
SOCKETS_KEY = web.AppKey("controller_endpoint_sockets", set)


class _Refused(Exception):
    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code


def build_endpoint_app(
    coordinators: ConsumerCoordinators,
    informers: Informers,
    identity: str,
    token: str | None = None,
    grants: ProducerGrantCoordinators | None = None,
    metrics: ControllerMetrics | None = None,
    metrics_authenticator: Authenticator | None = None,
) -> web.Application:
    """The endpoint as an aiohttp application: the protocol on ``/ws``, ``/healthz`` (the
    process answers), ``/readyz`` (its caches follow the store) and, with ``metrics``,
    ``/metrics``, which requires credentials with ``metrics_authenticator``. Without
    ``grants`` it refuses exclusive producer requests."""
    quiet_malformed_requests()
    app = web.Application(middlewares=[authentication])
    if metrics_authenticator is not None:
        app[AUTHENTICATOR_KEY] = metrics_authenticator
        app[METRICS_AUTHENTICATED_KEY] = True
    app[COORDINATORS_KEY] = coordinators
    if grants is not None:
        app[GRANTS_KEY] = grants
    app[INFORMERS_KEY] = informers
    app[SETTINGS_KEY] = EndpointSettings(identity, token)
    app[SOCKETS_KEY] = set()
    app.on_shutdown.append(_close_sockets)
    app.router.add_get(ENDPOINT_PATH, _websocket)
    app.router.add_get("/healthz", _healthz)
    app.router.add_get("/readyz", _readyz)
    if metrics is not None:
        app.router.add_get("/metrics", metrics.handler)
    return app


async def _close_sockets(app: web.Application) -> None:
    # Open WebSockets would hold the shutdown until its timeout; brokers reconnect anyway.
    sockets: set[web.WebSocketResponse] = app[SOCKETS_KEY]
    for ws in list(sockets):
        await ws.close(code=CloseCode.GOING_AWAY, message=b"controller shutting down")


async def _healthz(_: web.Request) -> web.Response:
    return web.Response(text="ok")


async def _readyz(request: web.Request) -> web.Response:
    """503 naming each cause while the informers are not synced or cannot reach the store: a
    replica that cannot see the store must not take traffic (nor count as available)."""
    problems = request.app[INFORMERS_KEY].problems()
    if problems:
        return web.Response(status=503, text="not ready: " + "; ".join(problems) + "\n")
    return web.Response(text="ok\n")


async def _websocket(request: web.Request) -> web.StreamResponse:
    # No aiohttp heartbeat and no autoping: the session's watchdog pings (see ws_watchdog.py).
    ws = web.WebSocketResponse(max_msg_size=DEFAULT_MAX_FRAME_BYTES, autoping=False)
    try:
        await ws.prepare(request)
    except ConnectionResetError:
        return client_left_during_upgrade()
    sockets: set[web.WebSocketResponse] = request.app[SOCKETS_KEY]
    sockets.add(ws)
    settings = request.app[SETTINGS_KEY]
    session = EndpointSession(
        ws,
        request.app[COORDINATORS_KEY],
        request.app[INFORMERS_KEY],
        settings.identity,
        settings.token,
        request.app.get(GRANTS_KEY),
    )
    try:
        await session.serve()
    finally:
        sockets.discard(ws)
    return ws


class _Registration:
    """One registration of the connection: the coordinator's channel to its consumer."""

    def __init__(
        self,
        session: EndpointSession,
        command: RegisterConsumer,
        coordinator: TopicConsumers,
    ) -> None:
        self.session = session
        self.registration_id = command.registration_id
        self.request_id = command.request_id
        self.subscription = command.subscription
        self.consumer_name = command.consumer_name
        self.coordinator = coordinator
        self.accepted = False

    def accept(self) -> None:
        if not self.accepted:
            self.accepted = True
            self.session.enqueue(Success(self.request_id))

    def assigned(self, grant: Grant) -> None:
        self.accept()  # the Success answering RegisterConsumer goes before the first push
        self.session.enqueue(
            ConsumerAssignment(self.registration_id, grant.term, grant.layout_epoch, grant.segments)
        )

    def closed(self, code: ErrorCode, message: str) -> None:
        if not self.accepted:
            return  # the refused RegisterConsumer is answered with an Error instead
        self.session.forget(self)
        self.session.enqueue(RegistrationClosed(self.registration_id, code, message))


class EndpointSession:
    def __init__(
        self,
        ws: web.WebSocketResponse,
        coordinators: ConsumerCoordinators,
        informers: Informers,
        identity: str,
        token: str | None,
        grants: ProducerGrantCoordinators | None = None,
    ) -> None:
        self._ws = ws
        self._coordinators = coordinators
        self._grants = grants
        self._grant_requests = GrantRequests(self.enqueue, self._grants_of)
        self._informers = informers
        self._identity = identity
        self._token = token
        self._version: int | None = None
        self._registrations: dict[int, _Registration] = {}
        self._outbox: asyncio.Queue[Command | None] = asyncio.Queue()  # None: the end
        self._tasks: set[asyncio.Task[None]] = set()
        self._closing = False
        self._watchdog = Watchdog(ws, CONNECT_SECONDS)

    async def serve(self) -> None:
        writer = asyncio.get_running_loop().create_task(self._write())
        self._watchdog.start()
        try:
            ending = await self._read()
        finally:
            await self._watchdog.stop()
            self._closing = True
            for registration in list(self._registrations.values()):
                registration.coordinator.detach(
                    registration.subscription, registration.consumer_name, registration
                )
            self._registrations.clear()
            self._grant_requests.detach_all()
            # The last answers (an Error before closing, say) go out first.
            self._outbox.put_nowait(None)
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(1):
                    await asyncio.shield(writer)
            await cancel_and_wait(writer)
        if ending is not None:
            code, reason = ending
            await self._ws.close(code=code, message=reason.encode())

    async def _read(self) -> tuple[CloseCode, str] | None:
        """Serve frames until the broker closes (None) or a frame ends the connection: then
        the close code and reason to close with, once the Error naming the problem is out."""
        async for frame in self._ws:
            self._watchdog.heard()
            if frame.type is WSMsgType.BINARY:
                fatal = await self._handle(frame.data)
                if fatal is not None:
                    return close_code_for(fatal) or CloseCode.PROTOCOL_ERROR, fatal.value
            elif frame.type is WSMsgType.TEXT:
                self.enqueue(
                    Error(None, ErrorCode.MALFORMED_FRAME, "frames must be binary messages")
                )
                return CloseCode.UNSUPPORTED_DATA, "binary messages only"
            elif frame.type is WSMsgType.PING:
                try:
                    await self._ws.pong(frame.data)
                except ConnectionError:
                    return None  # the client went away before its ping was answered
            elif frame.type is WSMsgType.ERROR:
                return None  # aiohttp closed it (1009 for a message above its size limit)
        return None

    def enqueue(self, command: Command) -> None:
        self._outbox.put_nowait(command)

    def forget(self, registration: _Registration) -> None:
        if self._registrations.get(registration.registration_id) is registration:
            del self._registrations[registration.registration_id]

    async def _write(self) -> None:
        while (command := await self._outbox.get()) is not None:
            if self._ws.closed:
                continue
            try:
                await self._ws.send_bytes(encode_frame(command))
            except ConnectionError:
                log.debug("broker went away while sending %s", type(command).__name__)

    async def _handle(self, data: bytes) -> ErrorCode | None:
        """Handle one frame; the error code when the connection must close."""
        try:
            command = decode_frame(data)
        except ProtocolError as error:
            self.enqueue(Error.from_protocol_error(error))
            return error.code if error.code.closes_connection else None
        if self._version is None and not isinstance(command, Connect):
            self.enqueue(
                Error(None, ErrorCode.NOT_CONNECTED, f"{type(command).__name__} before Connect")
            )
            return ErrorCode.NOT_CONNECTED
        if self._version is not None and not speaks(self._version, command):
            self.enqueue(
                Error(
                    _request_id(command),
                    ErrorCode.UNKNOWN_COMMAND,
                    f"{type(command).__name__} is not part of protocol version {self._version}",
                )
            )
            return ErrorCode.UNKNOWN_COMMAND
        try:
            self._dispatch(command)
        except _Refused as refusal:
            self.enqueue(Error(_request_id(command), refusal.code, str(refusal)))
            return refusal.code if refusal.code.closes_connection else None
        return None

    def _dispatch(self, command: Command) -> None:
        match command:
            case Connect():
                self._connect(command)
            case Ping():
                self.enqueue(Pong())
            case Pong():
                pass
            case RegisterConsumer():
                if command.registration_id in self._registrations:
                    raise _Refused(
                        ErrorCode.ID_IN_USE,
                        f"registration id {command.registration_id} is in use on this connection",
                    )
                self._spawn(command.request_id, self._register(command))
            case UnregisterConsumer():
                self._spawn(command.request_id, self._unregister(command))
            case AcquireExclusive():
                self._spawn(command.request_id, self._grant_requests.acquire(command))
            case ReleaseExclusive():
                self._spawn(command.request_id, self._grant_requests.release(command))
            case WatchNamespace():
                # Refused as every namespace watch refusal is: the watch ends, and the
                # connection carries on.
                message = "a controller endpoint does not serve WatchNamespace: watch at a broker"
                ended = WatchEnded(ErrorCode.INVALID_REQUEST, message)
                self.enqueue(NamespaceUpdate(command.watch_id, ended=ended))
            case _:
                raise _Refused(
                    ErrorCode.UNEXPECTED_COMMAND
                    if command.SENT_BY is Sender.BROKER
                    else ErrorCode.INVALID_REQUEST,
                    f"a controller endpoint does not serve {type(command).__name__}",
                )

    def _connect(self, command: Connect) -> None:
        if self._version is not None:
            raise _Refused(ErrorCode.UNEXPECTED_COMMAND, "the connection is already established")
        if self._token is not None and not (
            command.auth_token is not None and same_secret(command.auth_token, self._token)
        ):
            raise _Refused(ErrorCode.AUTHENTICATION_FAILED, "the auth token is missing or wrong")
        version = negotiate_version(command.protocol_versions)
        if version is None:
            raise _Refused(
                ErrorCode.UNSUPPORTED_VERSION,
                f"this controller speaks protocol versions {list(SUPPORTED_VERSIONS)}, "
                f"the peer offered {list(command.protocol_versions)}",
            )
        self._version = version
        self._watchdog.connected()
        self.enqueue(
            Connected(
                command.request_id,
                version,
                self._identity,
                DEFAULT_MAX_FRAME_BYTES,
                DEFAULT_MAX_MESSAGE_BYTES,
            )
        )

    async def _register(self, command: RegisterConsumer) -> None:
        try:
            coordinator = await self._leader_of(command.topic)
        except _Refused as refusal:
            self.enqueue(Error(command.request_id, refusal.code, str(refusal)))
            return
        registration = _Registration(self, command, coordinator)
        if command.registration_id in self._registrations:
            self.enqueue(
                Error(
                    command.request_id,
                    ErrorCode.ID_IN_USE,
                    f"registration id {command.registration_id} is in use on this connection",
                )
            )
            return
        self._registrations[command.registration_id] = registration
        try:
            await coordinator.register(command.subscription, command.consumer_name, registration)
        except ConsumerRefused as refusal:
            self.forget(registration)
            self.enqueue(Error(command.request_id, refusal.code, str(refusal)))
            return
        except BaseException:
            self.forget(registration)
            raise
        registration.accept()
        if self._closing:  # the broker went away while the registration was recorded
            self.forget(registration)
            coordinator.detach(command.subscription, command.consumer_name, registration)

    async def _unregister(self, command: UnregisterConsumer) -> None:
        registration = self._registrations.get(command.registration_id)
        if registration is None or not registration.accepted:
            self.enqueue(
                Error(
                    command.request_id,
                    ErrorCode.UNKNOWN_REGISTRATION,
                    f"registration id {command.registration_id} is not open on this connection",
                )
            )
            return
        try:
            await registration.coordinator.unregister(
                registration.subscription, registration.consumer_name, registration
            )
        except ConsumerRefused as refusal:
            self.enqueue(Error(command.request_id, refusal.code, str(refusal)))
            return
        self.forget(registration)
        self.enqueue(Success(command.request_id))

    async def _leader_of(self, topic: str) -> TopicConsumers:
        namespace, name = _topic_name(topic)
        coordinator = self._coordinators.get(namespace, name)
        if coordinator is not None:
            return coordinator
        await self._refuse_not_led(namespace, name)

    async def _grants_of(self, topic: str) -> TopicProducerGrants:
        """The topic's exclusive producer if this controller leads it; GrantRefused if not."""
        if self._grants is None:
            raise GrantRefused(
                ErrorCode.INVALID_REQUEST, "this controller endpoint serves no producer grants"
            )
        try:
            namespace, name = _topic_name(topic)
            grants = self._grants.get(namespace, name)
            if grants is not None:
                return grants
            await self._refuse_not_led(namespace, name)
        except _Refused as refusal:
            raise GrantRefused(refusal.code, str(refusal)) from None

    async def _refuse_not_led(self, namespace: str, name: str) -> NoReturn:
        """Refuse a request about a topic this controller does not lead, saying why."""
        topic = f"{namespace}/{name}"
        informers = self._informers
        if informers.topics.synced and informers.topics.get(namespace, name) is None:
            raise _Refused(ErrorCode.TOPIC_NOT_FOUND, f"no topic {topic}")
        leader = informers.leader_endpoint(namespace, name)
        where = f"its leader is at {leader}" if leader else "no controller leads it right now"
        raise _Refused(ErrorCode.NOT_LEADER, f"this controller does not lead {topic}; {where}")

    def _spawn(self, request_id: int, work: Coroutine[Any, Any, None]) -> None:
        async def answered() -> None:
            try:
                await work
            except Exception as error:
                # A bug must cost one request, not the connection.
                log.exception("request %d failed", request_id)
                self.enqueue(
                    Error(request_id, ErrorCode.INTERNAL_ERROR, f"internal error: {error}")
                )

        task = asyncio.get_running_loop().create_task(answered())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)


def _topic_name(topic: str) -> tuple[str, str]:
    namespace, _, name = topic.partition("/")
    if not namespace or not name or "/" in name:
        raise _Refused(ErrorCode.INVALID_REQUEST, f"a topic is named namespace/name, not {topic!r}")
    return namespace, name


def _request_id(command: Command) -> int | None:
    request_id = getattr(command, "request_id", None)
    return request_id if isinstance(request_id, int) else None


@contextlib.asynccontextmanager
async def serving_endpoint(
    coordinators: ConsumerCoordinators,
    informers: Informers,
    identity: str,
    token: str | None,
    host: str,
    port: int,
    grants: ProducerGrantCoordinators | None = None,
    metrics: ControllerMetrics | None = None,
    *,
    sock: socket.socket | None = None,
    metrics_authenticator: Authenticator | None = None,
) -> AsyncIterator[None]:
    """Listen on ``host:port`` (on ``sock`` when given, bound there already) while the context
    is open."""
    runner = web.AppRunner(
        build_endpoint_app(
            coordinators, informers, identity, token, grants, metrics, metrics_authenticator
        ),
        keepalive_timeout=HANDSHAKE_SECONDS,
    )
    await runner.setup()
    try:
        site = web.TCPSite(runner, host, port) if sock is None else web.SockSite(runner, sock)
        await site.start()
        log.info("controller %s serves consumer sessions on %s:%d", identity, host, port)
        yield
    finally:
        await runner.cleanup()
