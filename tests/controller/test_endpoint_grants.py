"""Exclusive producer requests at a controller endpoint that does not lead the topic: NotLeader
naming the leader, TopicNotFound, a malformed topic, an unknown grant; and an endpoint built
without grants refuses them."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from aiohttp.test_utils import TestServer

from scalable_topics.controller.consumers import ConsumerCoordinators
from scalable_topics.controller.endpoint import build_endpoint_app
from scalable_topics.controller.producer_grants import ProducerGrantCoordinators
from scalable_topics.model.clock import SystemClock
from scalable_topics.protocol import ErrorCode
from scalable_topics.store.informers import Informers
from support.leases import SYSTEM_NAMESPACE, lease_object
from support.memory_store import MemoryStore
from support.wire_client import RequestFailed, WireClient

LEADER = "http://controller-1:8080"


class NoBrokers:
    async def fence(
        self,
        broker_url: str,
        namespace: str,
        topic: str,
        descriptor: str,
        epoch: int,
        holder: str | None = None,
    ) -> int:
        raise AssertionError("a controller that leads nothing fences nothing")


@pytest.fixture
async def store() -> MemoryStore:
    memory = MemoryStore()
    await memory.create(
        {
            "apiVersion": "scalabletopics.dev/v1alpha1",
            "kind": "ScalableTopic",
            "metadata": {"name": "orders", "namespace": "default"},
            "spec": {},
        }
    )
    await memory.create(lease_object("controller-1", LEADER))  # another controller leads
    return memory


async def serve(store: MemoryStore, with_grants: bool) -> AsyncIterator[WireClient]:
    clock = SystemClock()
    informers = Informers(store, SYSTEM_NAMESPACE)  # type: ignore[arg-type]
    informers.start()
    await informers.wait_synced()
    grants = (
        ProducerGrantCoordinators(store, informers, NoBrokers(), clock)  # type: ignore[arg-type]
        if with_grants
        else None
    )
    app = build_endpoint_app(
        ConsumerCoordinators(store, informers, clock),  # type: ignore[arg-type]
        informers,
        "controller-0",
        grants=grants,
    )
    server = TestServer(app)
    await server.start_server()
    broker = await WireClient.connect(f"http://127.0.0.1:{server.port}")
    try:
        yield broker
    finally:
        await broker.close()
        await server.close()
        await informers.stop()


@pytest.fixture
async def broker(store: MemoryStore) -> AsyncIterator[WireClient]:
    async for client in serve(store, with_grants=True):
        yield client


async def code_of(broker: WireClient, topic: str) -> tuple[ErrorCode, str]:
    with pytest.raises(RequestFailed) as refused:
        await broker.acquire_exclusive(1, topic, "amy")
    return refused.value.code, str(refused.value)


async def test_requests_about_topics_led_elsewhere_name_the_leader(broker: WireClient) -> None:
    code, message = await code_of(broker, "default/orders")
    assert code is ErrorCode.NOT_LEADER and f"its leader is at {LEADER}" in message
    assert (await code_of(broker, "default/nothing"))[0] is ErrorCode.TOPIC_NOT_FOUND
    assert (await code_of(broker, "orders"))[0] is ErrorCode.INVALID_REQUEST
    with pytest.raises(RequestFailed) as unknown:
        await broker.release_exclusive(1)
    assert unknown.value.code is ErrorCode.UNKNOWN_GRANT


async def test_an_endpoint_without_grants_refuses_them(store: MemoryStore) -> None:
    async for broker in serve(store, with_grants=False):
        code, message = await code_of(broker, "default/orders")
        assert code is ErrorCode.INVALID_REQUEST and "serves no producer grants" in message
