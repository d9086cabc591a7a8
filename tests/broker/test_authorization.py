"""Namespace authorization (docs/authorization.md): each role on each surface, allowed and
refused, with tokens of the namespace at stake and of another one.

A broker application on loopback requires the cluster token or a client token signed by the
test's key; two topics, team-a/orders and team-b/orders, each have a segment on it. For every
token, each test asks every surface for everything and compares the whole outcome with the
table written below (never derived from model/authorization.py, which it checks)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp.test_utils import TestServer
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from dag_objects import AT, create_topic, put_segments

from scalable_topics import tokens
from scalable_topics.broker.topic_admin import INFORMERS_KEY
from scalable_topics.client import Client, NotAuthorized
from scalable_topics.client.admin import Admin
from scalable_topics.controller.consumers import ConsumerCoordinators
from scalable_topics.controller.endpoint import build_endpoint_app
from scalable_topics.controller.metrics import ControllerMetrics
from scalable_topics.model.clock import SystemClock
from scalable_topics.model.hash_range import HashRange
from scalable_topics.model.layout import SegmentLayout
from scalable_topics.model.segment import descriptor
from scalable_topics.protocol import (
    PROTOCOL_VERSION,
    AcquireExclusive,
    Command,
    Connect,
    Connected,
    Error,
    ErrorCode,
    NamespaceUpdate,
    Ping,
    Pong,
    ProducerAccessMode,
    ProducerOpen,
    ProducerOpened,
    RegisterConsumer,
    SegmentSubscriptionType,
    Subscribe,
    Success,
    TopicUpdate,
    WatchNamespace,
    WatchTopic,
    decode_frame,
    encode_frame,
)
from scalable_topics.store import EmbeddedStore
from scalable_topics.store.informers import Informers
from support.eventually import eventually
from support.servers import broker_server

CLUSTER = "cluster-s3cret"
NAMESPACES = ("team-a", "team-b")
WAIT = 20.0  # bounds a failing test only

ALLOWED = "allowed"
REFUSED = "refused"  # 403 NotAuthorized, or the wire's NotAuthorized
UNAUTHENTICATED = "unauthenticated"  # 401 AuthenticationFailed, or the wire's

WIRE = (
    "produce",
    "exclusive producer",
    "subscribe",
    "register consumer",
    "watch",
    "watch namespace",
)
TOPIC_API = (
    "list",
    "describe",
    "stats",
    "load",
    "list subscriptions",
    "create subscription",
    "delete subscription",
    "split",
    "create topic",
    "delete topic",
)

# What each principal may do, per namespace: the specification of docs/authorization.md.
READS = {"watch", "watch namespace", "list", "describe", "stats", "load", "list subscriptions"}
PRODUCES = {"produce", "exclusive producer"}
CONSUMES = {"subscribe", "register consumer"}
EVERYTHING = set(WIRE) | set(TOPIC_API)
MAY: dict[str, dict[str, set[str]]] = {
    "producer of team-a": {"team-a": READS | PRODUCES, "team-b": set()},
    "consumer of team-a": {"team-a": READS | CONSUMES, "team-b": set()},
    "admin of team-a": {"team-a": EVERYTHING, "team-b": set()},
    "admin of every namespace": {"team-a": EVERYTHING, "team-b": EVERYTHING},
    "the cluster token": {"team-a": EVERYTHING, "team-b": EVERYTHING},
}
GRANTS = {
    "producer of team-a": ["produce:team-a"],
    "consumer of team-a": ["consume:team-a"],
    "admin of team-a": ["admin:team-a"],
    "admin of every namespace": ["admin:*"],
}
# The control plane's own surfaces, and /metrics (it names every topic).
CONTROL_PLANE_ONLY = {"segment admin API", "controller endpoint"}
METRICS_READERS = {"admin of every namespace", "the cluster token"}


@dataclass
class Cluster:
    url: str
    controller_url: str
    key_path: Path
    store: EmbeddedStore

    def token(self, who: str) -> str:
        if who == "the cluster token":
            return CLUSTER
        return tokens.issue(tokens.load_private_key(self.key_path), who, GRANTS[who], 600)


@pytest.fixture
async def cluster(tmp_path: Path, store: EmbeddedStore) -> AsyncIterator[Cluster]:
    private, public = tokens.generate_key()
    key_path, public_path = tmp_path / "token-key.pem", tmp_path / "token-key.pub.pem"
    key_path.write_bytes(private)
    public_path.write_bytes(public)
    broker = broker_server(
        store,
        tmp_path / "broker",
        auth_token=CLUSTER,
        token_public_key=public_path,
        authenticate_metrics=True,
    )
    informers = Informers(store, "scalable-topics")
    informers.start()
    controller = TestServer(
        build_endpoint_app(
            ConsumerCoordinators(store, informers, SystemClock()),
            informers,
            "controller-0",
            CLUSTER,
            metrics=ControllerMetrics(),
            metrics_authenticator=tokens.Authenticator(
                CLUSTER, tokens.load_public_key(public_path)
            ),
        ),
        host="127.0.0.1",
    )
    await broker.start_server()
    await controller.start_server()
    try:
        url = f"http://127.0.0.1:{broker.port}"
        ws_url = f"ws://127.0.0.1:{broker.port}"
        async with aiohttp.ClientSession() as http:
            for namespace in NAMESPACES:
                layout = SegmentLayout.initial(1, AT)
                await create_topic(store, namespace, "orders", layout)
                await put_segments(store, namespace, "orders", layout, {0: ws_url})
                segment = descriptor(0, HashRange(0, 0xFFFF))
                async with http.put(
                    f"{url}/admin/v1/segments/{namespace}/orders/{segment}",
                    json={"subscriptions": ["billing"]},
                    headers={"Authorization": f"Bearer {CLUSTER}"},
                ) as response:
                    assert response.status == 201, await response.text()
        seen = broker.app[INFORMERS_KEY]
        await eventually(
            lambda: all(
                seen.topics.get(ns, "orders") and seen.segments_of(ns, "orders")
                for ns in NAMESPACES
            ),
            "the broker sees the topics and their segments",
        )
        yield Cluster(url, f"http://127.0.0.1:{controller.port}", key_path, store)
    finally:
        await controller.close()
        await broker.close()
        await informers.stop()


# -- the wire protocol ----------------------------------------------------------------------


def wire_command(kind: str, namespace: str, request_id: int) -> Command:
    topic = f"{namespace}/orders"
    match kind:
        case "produce":
            return ProducerOpen(request_id, request_id, topic, 0)
        case "exclusive producer":
            return AcquireExclusive(
                request_id, request_id, topic, "p", ProducerAccessMode.EXCLUSIVE
            )
        case "subscribe":
            return Subscribe(
                request_id, request_id, topic, 0, "billing", SegmentSubscriptionType.SHARED, "c"
            )
        case "register consumer":
            return RegisterConsumer(request_id, request_id, topic, "billing", "c")
        case "watch":
            return WatchTopic(request_id, request_id, topic)
        case "watch namespace":
            return WatchNamespace(request_id, namespace, {})
    raise AssertionError(kind)


# The broker's answer to each command it allows (the relays answer once a controller does:
# here, none before the Pong that follows them).
ANSWERS: dict[str, type[Command] | None] = {
    "produce": ProducerOpened,
    "subscribe": Success,
    "watch": TopicUpdate,
    "watch namespace": NamespaceUpdate,  # its snapshot
    "exclusive producer": None,
    "register consumer": None,
}


class Wire:
    """A raw protocol connection, reading every frame."""

    def __init__(self, ws: aiohttp.ClientWebSocketResponse) -> None:
        self.ws = ws

    async def next(self) -> Command:
        frame = await self.ws.receive(timeout=WAIT)
        assert frame.type is aiohttp.WSMsgType.BINARY, frame
        return decode_frame(frame.data, 1 << 24)

    async def send(self, command: Command) -> None:
        await self.ws.send_bytes(encode_frame(command))


async def ask_on_the_wire(url: str, token: str, kind: str, namespace: str) -> str:
    async with aiohttp.ClientSession() as http, http.ws_connect(url + "/ws") as ws:
        wire = Wire(ws)
        await wire.send(Connect(1, (PROTOCOL_VERSION,), "tests", token))
        assert isinstance(await wire.next(), Connected)
        await wire.send(wire_command(kind, namespace, 2))
        # Commands are handled in order, a refusal before the next frame is read: the Pong
        # marks the end of what the command's own handling answered.
        await wire.send(Ping())
        answers: list[Command] = []
        while not isinstance(answer := await wire.next(), Pong):
            answers.append(answer)
        if kind in ("produce", "subscribe", "watch", "watch namespace") and not answers:
            answers.append(await wire.next())  # answered by a task of its own
    if kind == "watch namespace":
        # Refused as every namespace watch is: the watch ends, never an Error.
        [answer] = answers
        assert isinstance(answer, NamespaceUpdate) and answer.watch_id == 2, answer
        if answer.ended is not None:
            assert answer.ended.code is ErrorCode.NOT_AUTHORIZED, answer
            return REFUSED
        assert answer.snapshot == (("orders",), True), answer
        return ALLOWED
    refusals = [a for a in answers if isinstance(a, Error)]
    if refusals:
        [refusal] = refusals
        assert refusal.request_id == 2 and refusal.code is ErrorCode.NOT_AUTHORIZED, refusal
        return REFUSED
    expected = ANSWERS[kind]
    assert [type(a) for a in answers] == ([] if expected is None else [expected]), answers
    return ALLOWED


# -- the topic admin API --------------------------------------------------------------------


def topic_request(kind: str, namespace: str, who: str) -> tuple[str, str, Any, int]:
    """Method, path, body, and the status the request gets when allowed."""
    one = f"/admin/v1/topics/{namespace}/orders"
    mine = who.replace(" ", "-")
    match kind:
        case "list":
            return "GET", f"/admin/v1/topics?namespace={namespace}", None, 200
        case "describe":
            return "GET", one, None, 200
        case "stats":
            return "GET", one + "/stats", None, 200
        case "load":
            return "GET", one + "/load", None, 200
        case "list subscriptions":
            return "GET", one + "/subscriptions", None, 200
        case "create subscription":
            return "PUT", f"{one}/subscriptions/{mine}", {"type": "Queue"}, 201
        case "delete subscription":
            return "DELETE", f"{one}/subscriptions/{mine}", None, 204
        case "split":
            # No controller runs here: an allowed request waits for one and times out.
            return "POST", one + "/split", {"segment": 0, "timeoutSeconds": 0.1}, 504
        case "create topic":
            return "PUT", f"/admin/v1/topics/{namespace}/new-{mine}", {}, 201
        case "delete topic":
            return "DELETE", f"/admin/v1/topics/{namespace}/new-{mine}", None, 202
    raise AssertionError(kind)


async def http_outcome(response: aiohttp.ClientResponse, allowed_status: int) -> str:
    body: Any = await response.json() if response.content_type == "application/json" else None
    if response.status == 401:
        assert body["code"] == ErrorCode.AUTHENTICATION_FAILED.value, body
        return UNAUTHENTICATED
    if response.status == 403:
        assert body["code"] == ErrorCode.NOT_AUTHORIZED.value, body
        return REFUSED
    assert response.status == allowed_status, (response.status, body)
    return ALLOWED


async def ask_the_topic_api(url: str, token: str | None, kind: str, ns: str, who: str) -> str:
    method, path, body, allowed_status = topic_request(kind, ns, who)
    headers = {} if token is None else {"Authorization": f"Bearer {token}"}
    async with (
        aiohttp.ClientSession(headers=headers) as http,
        http.request(method, url + path, json=body) as response,
    ):
        return await http_outcome(response, allowed_status)


# -- the tests ------------------------------------------------------------------------------


@pytest.mark.parametrize("who", list(MAY))
async def test_each_role_on_the_wire_and_the_topic_api(cluster: Cluster, who: str) -> None:
    token = cluster.token(who)
    outcome: dict[tuple[str, str], str] = {}
    for namespace in NAMESPACES:
        for kind in WIRE:
            outcome[kind, namespace] = await ask_on_the_wire(cluster.url, token, kind, namespace)
        for kind in TOPIC_API:  # in order: each creation before its deletion
            outcome[kind, namespace] = await ask_the_topic_api(
                cluster.url, token, kind, namespace, who
            )
    expected = {
        (kind, namespace): ALLOWED if kind in MAY[who][namespace] else REFUSED
        for namespace in NAMESPACES
        for kind in (*WIRE, *TOPIC_API)
    }
    assert outcome == expected


@pytest.mark.parametrize("who", list(MAY))
async def test_listing_every_namespace_shows_what_the_token_may_read(
    cluster: Cluster, who: str
) -> None:
    async with (
        aiohttp.ClientSession(headers={"Authorization": f"Bearer {cluster.token(who)}"}) as http,
        http.get(cluster.url + "/admin/v1/topics") as response,
    ):
        assert response.status == 200
        listed = {(t["namespace"], t["name"]) for t in await response.json()}
    readable = {ns for ns in NAMESPACES if MAY[who][ns]}
    assert listed == {(ns, "orders") for ns in readable}


async def control_plane_surfaces(cluster: Cluster, token: str | None) -> dict[str, str]:
    headers = {} if token is None else {"Authorization": f"Bearer {token}"}
    outcome = {}
    async with aiohttp.ClientSession(headers=headers) as http:
        async with http.get(cluster.url + "/admin/v1/segments") as response:
            outcome["segment admin API"] = await http_outcome(response, 200)
        segment = f"/admin/v1/segments/team-a/orders/{descriptor(0, HashRange(0, 0xFFFF))}"
        async with http.post(cluster.url + segment + "/fence", json={"epoch": 7}) as response:
            outcome["segment admin API: fence"] = await http_outcome(response, 200)
        async with http.get(cluster.url + "/metrics") as response:
            outcome["broker metrics"] = await http_outcome(response, 200)
        async with http.get(cluster.controller_url + "/metrics") as response:
            outcome["controller metrics"] = await http_outcome(response, 200)
        async with http.ws_connect(cluster.controller_url + "/ws") as ws:
            wire = Wire(ws)
            await wire.send(Connect(1, (PROTOCOL_VERSION,), "broker-0", token))
            answer = await wire.next()
            if isinstance(answer, Connected):
                outcome["controller endpoint"] = ALLOWED
            else:
                assert isinstance(answer, Error), answer
                assert answer.code is ErrorCode.AUTHENTICATION_FAILED, answer
                closing = await ws.receive(timeout=WAIT)
                assert (closing.type, closing.data) == (aiohttp.WSMsgType.CLOSE, 1008)
                outcome["controller endpoint"] = UNAUTHENTICATED
    return outcome


@pytest.mark.parametrize("who", list(MAY))
async def test_the_control_plane_surfaces_and_metrics(cluster: Cluster, who: str) -> None:
    outcome = await control_plane_surfaces(cluster, cluster.token(who))
    control_plane = who == "the cluster token"
    # A client token is refused by the controller endpoint as a credential (it only knows
    # the cluster token), and by the segment admin API as a principal.
    expected = {
        "segment admin API": ALLOWED if control_plane else REFUSED,
        "segment admin API: fence": ALLOWED if control_plane else REFUSED,
        "broker metrics": ALLOWED if who in METRICS_READERS else REFUSED,
        "controller metrics": ALLOWED if who in METRICS_READERS else REFUSED,
        "controller endpoint": ALLOWED if control_plane else UNAUTHENTICATED,
    }
    assert outcome == expected


def foreign_token() -> str:
    """A well-formed token signed by a key the brokers do not know."""
    return tokens.issue(Ed25519PrivateKey.generate(), "intruder", ["admin:*"], 600)


@pytest.mark.parametrize("offered", ["none", "wrong secret", "expired", "foreign key"])
async def test_credentials_that_do_not_authenticate_are_refused_everywhere(
    cluster: Cluster, offered: str
) -> None:
    key = tokens.load_private_key(cluster.key_path)
    token = {
        "none": None,
        "wrong secret": "not-the-cluster-token",
        "expired": tokens.issue(key, "late", ["admin:*"], 60, now=time.time() - 3600),
        "foreign key": foreign_token(),
    }[offered]
    outcome = await control_plane_surfaces(cluster, token)
    for kind in TOPIC_API:
        outcome[kind] = await ask_the_topic_api(cluster.url, token, kind, "team-a", "nobody")
    assert set(outcome.values()) == {UNAUTHENTICATED}, outcome
    async with aiohttp.ClientSession() as http, http.ws_connect(cluster.url + "/ws") as ws:
        wire = Wire(ws)
        await wire.send(Connect(1, (PROTOCOL_VERSION,), "tests", token))
        refusal = await wire.next()
        closing = await ws.receive(timeout=WAIT)
    assert isinstance(refusal, Error) and refusal.code is ErrorCode.AUTHENTICATION_FAILED
    assert (closing.type, closing.data) == (aiohttp.WSMsgType.CLOSE, 1008)


async def test_a_connection_ends_when_its_token_expires(cluster: Cluster) -> None:
    key = tokens.load_private_key(cluster.key_path)
    # Valid for about a second more: servers accept tokens LEEWAY_SECONDS past their expiry.
    expiring = tokens.issue(
        key, "brief", ["admin:team-a"], 1, now=time.time() - tokens.LEEWAY_SECONDS
    )
    async with aiohttp.ClientSession() as http, http.ws_connect(cluster.url + "/ws") as ws:
        wire = Wire(ws)
        await wire.send(Connect(1, (PROTOCOL_VERSION,), "tests", expiring))
        assert isinstance(await wire.next(), Connected)
        await wire.send(wire_command("watch", "team-a", 2))
        assert isinstance(await wire.next(), TopicUpdate)
        async with asyncio.timeout(WAIT):
            ended = await wire.next()
            closing = await ws.receive()
    assert isinstance(ended, Error) and ended.code is ErrorCode.AUTHENTICATION_FAILED
    assert ended.message == "the token has expired"
    assert (closing.type, closing.data) == (aiohttp.WSMsgType.CLOSE, 1008)


async def test_the_client_hears_a_refusal_at_once_and_keeps_what_it_may_do(
    cluster: Cluster,
) -> None:
    """A producer token of team-a, through the client library: refused on team-b with
    NotAuthorized (not retried into a timeout), its producer on team-a unaffected."""
    url = cluster.url.replace("http://", "ws://")
    async with Client(url, cluster.token("producer of team-a"), operation_timeout=WAIT) as client:
        producer = await client.create_producer("team-a/orders")
        with pytest.raises(NotAuthorized) as refused:
            await client.create_producer("team-b/orders")
        with pytest.raises(NotAuthorized):
            await client.subscribe_queue("team-a/orders", "billing")
        receipt = await producer.send(b"still served")
        await producer.close()
    # The client watches the topic's layout first: reading team-b is what is refused.
    assert "producer of team-a may not read in namespace 'team-b'" in str(refused.value)
    assert receipt is not None
    async with Admin(url, cluster.token("consumer of team-a")) as admin:
        with pytest.raises(NotAuthorized) as refused:
            await admin.delete_topic("team-a/orders")
    assert "may not admin in namespace 'team-a'" in str(refused.value)
