"""The controller's endpoint on loopback: the cluster token, and requests about topics this
controller does not lead (NotLeader names the leader's endpoint)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator

import aiohttp
import pytest
from aiohttp.test_utils import TestServer

from scalable_topics.controller import endpoint as endpoint_module
from scalable_topics.controller.consumers import ConsumerCoordinators
from scalable_topics.controller.endpoint import build_endpoint_app, serving_endpoint
from scalable_topics.model.clock import SystemClock
from scalable_topics.protocol import (
    PROTOCOL_VERSION,
    Connect,
    Connected,
    Error,
    ErrorCode,
    NamespaceUpdate,
    NamespaceWatchClose,
    Ping,
    SegmentSubscriptionType,
    Subscribe,
    WatchEnded,
    WatchNamespace,
    decode_frame,
    encode_frame,
)
from scalable_topics.store.informers import Informers
from support.eventually import eventually
from support.leases import SYSTEM_NAMESPACE, lease_object
from support.memory_store import MemoryStore
from support.ports import loopback_socket, port_of
from support.wire_client import RequestFailed, WireClient, abandon_upgrade

TOKEN = "cluster-secret"
LEADER = "http://controller-1:8080"
ABANDONED = 20  # upgrades abandoned by their client


@pytest.fixture
async def endpoint() -> AsyncIterator[str]:
    store = MemoryStore()
    await store.create(
        {
            "apiVersion": "scalabletopics.dev/v1alpha1",
            "kind": "ScalableTopic",
            "metadata": {"name": "orders", "namespace": "default"},
            "spec": {"subscriptions": [{"name": "s", "type": "Stream"}]},
        }
    )
    await store.create(lease_object("controller-1", LEADER))  # another controller leads
    informers = Informers(store, SYSTEM_NAMESPACE)  # type: ignore[arg-type]
    informers.start()
    await informers.wait_synced()
    coordinators = ConsumerCoordinators(store, informers, SystemClock())  # type: ignore[arg-type]
    server = TestServer(build_endpoint_app(coordinators, informers, "controller-0", TOKEN))
    await server.start_server()
    try:
        yield f"http://127.0.0.1:{server.port}"
    finally:
        await server.close()
        await informers.stop()


async def test_brokers_without_the_cluster_token_are_refused(endpoint: str) -> None:
    for token in (None, "wrong"):
        with pytest.raises(RequestFailed) as refused:
            await WireClient.connect(endpoint, token)
        assert refused.value.code is ErrorCode.AUTHENTICATION_FAILED


async def test_requests_about_topics_led_elsewhere_name_the_leader(endpoint: str) -> None:
    broker = await WireClient.connect(endpoint, TOKEN)
    try:
        with pytest.raises(RequestFailed, match=f"its leader is at {LEADER}") as elsewhere:
            await broker.register_consumer(1, "default/orders", "s", "amy")
        assert elsewhere.value.code is ErrorCode.NOT_LEADER
        with pytest.raises(RequestFailed) as missing:
            await broker.register_consumer(2, "default/nothing", "s", "amy")
        assert missing.value.code is ErrorCode.TOPIC_NOT_FOUND
        with pytest.raises(RequestFailed) as malformed:
            await broker.register_consumer(3, "orders", "s", "amy")
        assert malformed.value.code is ErrorCode.INVALID_REQUEST
        with pytest.raises(RequestFailed) as unknown:
            await broker.unregister_consumer(1)
        assert unknown.value.code is ErrorCode.UNKNOWN_REGISTRATION
        with pytest.raises(RequestFailed) as not_served:
            await broker.request(
                Subscribe(
                    broker.next_id(),
                    1,
                    "default/orders",
                    0,
                    "s",
                    SegmentSubscriptionType.SHARED,
                    "a",
                )
            )
        assert not_served.value.code is ErrorCode.INVALID_REQUEST
    finally:
        await broker.close()


async def test_a_namespace_watch_is_refused_as_namespace_watches_are(endpoint: str) -> None:
    """Brokers serve namespace watches, not controllers: WatchNamespace ends at once (a
    WatchEnded, never an Error), NamespaceWatchClose is refused, and the link carries on."""
    broker = await WireClient.connect(endpoint, TOKEN)
    try:
        await broker.watch_namespace(4, "default")
        assert await broker.namespace_update(4) == NamespaceUpdate(
            4,
            ended=WatchEnded(
                ErrorCode.INVALID_REQUEST,
                "a controller endpoint does not serve WatchNamespace: watch at a broker",
            ),
        )
        with pytest.raises(RequestFailed) as not_served:
            await broker.request(NamespaceWatchClose(broker.next_id(), 4))
        assert not_served.value.code is ErrorCode.INVALID_REQUEST
        with pytest.raises(RequestFailed) as missing:
            await broker.register_consumer(2, "default/nothing", "s", "amy")
        assert missing.value.code is ErrorCode.TOPIC_NOT_FOUND
    finally:
        await broker.close()


async def test_a_link_on_version_1_is_closed_by_a_version_2_command(endpoint: str) -> None:
    async with aiohttp.ClientSession() as http, http.ws_connect(endpoint + "/ws") as ws:
        await ws.send_bytes(encode_frame(Connect(1, (1,), "old-broker", TOKEN)))
        connected = decode_frame((await ws.receive(timeout=20)).data, 1 << 20)
        assert isinstance(connected, Connected) and connected.protocol_version == 1
        await ws.send_bytes(encode_frame(WatchNamespace(1, "default", {})))
        error = decode_frame((await ws.receive(timeout=20)).data, 1 << 20)
        closing = await ws.receive(timeout=20)
    assert isinstance(error, Error) and error.code is ErrorCode.UNKNOWN_COMMAND
    assert (closing.type, closing.data) == (aiohttp.WSMsgType.CLOSE, 1002)


# What a broker sends first, the Error it hears, the close code (docs/protocol.md, section 4).
CLOSES: dict[str, tuple[bytes | str, ErrorCode, int]] = {
    "a text message": ("hello", ErrorCode.MALFORMED_FRAME, 1003),
    "not msgpack": (b"\xc1", ErrorCode.MALFORMED_FRAME, 1002),
    "a command before Connect": (encode_frame(Ping()), ErrorCode.NOT_CONNECTED, 1002),
    "a wrong token": (
        encode_frame(Connect(1, (PROTOCOL_VERSION,), "broker", "wrong")),
        ErrorCode.AUTHENTICATION_FAILED,
        1008,
    ),
}


@pytest.mark.parametrize("case", list(CLOSES))
async def test_the_endpoint_closes_with_the_code_of_the_reason(endpoint: str, case: str) -> None:
    frame, expected_error, expected_code = CLOSES[case]
    async with aiohttp.ClientSession() as http, http.ws_connect(endpoint + "/ws") as ws:
        if isinstance(frame, str):
            await ws.send_str(frame)
        else:
            await ws.send_bytes(frame)
        error = decode_frame((await ws.receive(timeout=20)).data, 1 << 20)
        closing = await ws.receive(timeout=20)
    assert isinstance(error, Error) and error.code is expected_error
    assert (closing.type, closing.data) == (aiohttp.WSMsgType.CLOSE, expected_code)


async def test_a_broker_leaving_during_the_upgrade_is_no_failure(
    endpoint: str, caplog: pytest.LogCaptureFixture
) -> None:
    """Found by the wire fuzzer: a broker that dropped its link while the WebSocket upgrade
    was being answered made aiohttp log a handler failure with a traceback."""
    caplog.set_level(logging.INFO, "aiohttp.access")
    for _ in range(ABANDONED):
        await abandon_upgrade(endpoint)

    def answered() -> list[str]:
        return [r.getMessage() for r in caplog.records if r.name == "aiohttp.access"]

    def failures() -> list[str]:
        return [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]

    await eventually(
        lambda: len(answered()) + len(failures()) >= ABANDONED, "every abandoned request handled"
    )
    assert failures() == []
    # Most of them leave before the answer is written (the others after): the case at stake.
    assert any('" 499 ' in line for line in answered()), answered()
    broker = await WireClient.connect(endpoint, TOKEN)  # still served
    await broker.close()


async def test_a_half_sent_request_head_is_cut_off(monkeypatch: pytest.MonkeyPatch) -> None:
    """A slow-loris on the controller's port: half a header, then nothing; the endpoint
    closes the connection without answering (within its handshake timeout, short here)."""
    monkeypatch.setattr(endpoint_module, "HANDSHAKE_SECONDS", 0.3)
    store = MemoryStore()
    informers = Informers(store, SYSTEM_NAMESPACE)  # type: ignore[arg-type]
    informers.start()
    coordinators = ConsumerCoordinators(store, informers, SystemClock())  # type: ignore[arg-type]
    sock = loopback_socket()
    try:
        async with serving_endpoint(
            coordinators, informers, "controller-0", TOKEN, "127.0.0.1", port_of(sock), sock=sock
        ):
            reader, writer = await asyncio.open_connection("127.0.0.1", port_of(sock))
            try:
                writer.write(b"GET /ws HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: webso")
                await writer.drain()
                async with asyncio.timeout(20):
                    assert await reader.read() == b""  # closed, nothing said
            finally:
                writer.close()
    finally:
        await informers.stop()
