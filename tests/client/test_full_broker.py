"""The client at a broker's limits (broker/connection_limits.py). A broker at --max-connections
refuses the WebSocket upgrade with 503: the client takes it as a failed connection attempt,
naming the broker's reason, goes to another service URL, and reconnects with backoff to a
segment's broker until it has room. A request past --max-open-per-connection raises
TooManyOpen at once, never retried."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from scalable_topics.broker.metrics import CONNECTION_LIMITS_KEY
from scalable_topics.client import Client, ConnectionFailed, Timeout, TooManyOpen
from scalable_topics.model.layout import SegmentLayout
from scalable_topics.model.resources import (
    API_VERSION,
    TOPIC_LABEL,
    ScalableTopic,
    Segment,
    segment_object_name,
)
from scalable_topics.store import EmbeddedStore
from scalable_topics.tasks import cancel_and_wait
from support.eventually import eventually
from support.servers import broker_server
from support.wire_client import WireClient

NAMESPACE = "default"


@dataclass
class Brokers:
    store: EmbeddedStore
    full: TestServer  # --max-connections 1, which a raw client holds
    free: TestServer  # --max-open-per-connection 2
    occupant: WireClient

    def url(self, server: TestServer) -> str:
        return f"ws://127.0.0.1:{server.port}"

    def refused(self, server: TestServer) -> int:
        return server.app[CONNECTION_LIMITS_KEY].refused["--max-connections"]

    async def topic(self, name: str, broker: TestServer) -> None:
        """A one-segment topic whose segment ``broker`` serves, as a controller writes it."""
        layout = SegmentLayout.initial(1, datetime(2024, 5, 1, tzinfo=UTC))
        (segment,) = layout.active
        await _create_with_status(
            self.store,
            {
                "kind": ScalableTopic.KIND,
                "metadata": {"name": name, "namespace": NAMESPACE, "uid": f"uid-{name}"},
                "spec": {"initialSegments": 1},
            },
            layout.to_status(),
        )
        await _create_with_status(
            self.store,
            {
                "kind": Segment.KIND,
                "metadata": {
                    "name": segment_object_name(name, segment.descriptor),
                    "namespace": NAMESPACE,
                    "labels": {TOPIC_LABEL: name},
                },
                "spec": {
                    "topic": name,
                    "segmentId": segment.segment_id,
                    "hashRange": {"start": segment.hash_range.start, "end": segment.hash_range.end},
                    "parents": [],
                },
            },
            {"broker": self.url(broker)},
        )
        path = f"/admin/v1/segments/{NAMESPACE}/{name}/{segment.descriptor}"
        async with (
            aiohttp.ClientSession() as http,
            http.put(f"http://127.0.0.1:{broker.port}{path}", json={}) as response,
        ):
            assert response.status == 201, await response.text()


async def _create_with_status(store: EmbeddedStore, obj: dict[str, Any], status: Any) -> None:
    created = await store.create({"apiVersion": API_VERSION, **obj})
    meta = created["metadata"]
    await store.patch_status(obj["kind"], meta["namespace"], meta["name"], {"status": status})


@pytest.fixture
async def brokers(tmp_path: Path) -> AsyncIterator[Brokers]:
    async with await EmbeddedStore.open(tmp_path / "store.db") as store:
        full = broker_server(store, tmp_path / "full", max_connections=1)
        free = broker_server(store, tmp_path / "free", max_open_per_connection=2)
        await full.start_server()
        await free.start_server()
        occupant = await WireClient.connect(f"ws://127.0.0.1:{full.port}")
        try:
            yield Brokers(store, full, free, occupant)
        finally:
            await occupant.close()
            await full.close()
            await free.close()


async def test_a_full_broker_is_passed_over_for_the_next_url(brokers: Brokers) -> None:
    await brokers.topic("orders", brokers.free)
    service = f"{brokers.url(brokers.full)},{brokers.url(brokers.free)}"
    async with Client(service, operation_timeout=600) as client:
        watcher = await client.watch("orders")
        assert [s.segment_id for s in watcher.layout.active] == [0]
    assert brokers.refused(brokers.full) == 1  # asked first, it said no


async def test_when_every_broker_is_full_the_open_fails_at_once_saying_why(
    brokers: Brokers,
) -> None:
    await brokers.topic("orders", brokers.free)
    url = brokers.url(brokers.full)
    async with Client(url, operation_timeout=600) as client:
        with pytest.raises(ConnectionFailed) as refused:
            await client.create_producer("orders")
    assert not isinstance(refused.value, Timeout)
    assert refused.value.message == (
        f"cannot connect to {url}: broker 127.0.0.1:{brokers.full.port} holds 1 connections, "
        "its --max-connections (1); connect to another broker, or again later "
        "(HTTP 503, retry after 5 s)"
    )


async def test_a_503_without_a_brokers_reason_is_named_as_such() -> None:
    """A proxy with no broker behind it answers 503 too, without the broker's header."""

    async def unavailable(request: web.Request) -> web.Response:
        return web.Response(status=503, text="no upstream")

    app = web.Application()
    app.router.add_get("/ws", unavailable)
    async with TestServer(app, host="127.0.0.1") as proxy:
        url = f"ws://127.0.0.1:{proxy.port}"
        async with Client(url, operation_timeout=600) as client:
            with pytest.raises(ConnectionFailed) as refused:
                await client.watch("orders")
    assert refused.value.message == (
        f"cannot connect to {url}: the server is not taking connections (HTTP 503)"
    )


async def test_a_producer_waits_for_room_on_its_segments_broker(brokers: Brokers) -> None:
    await brokers.topic("orders", brokers.full)  # its segment is on the full broker
    async with Client(brokers.url(brokers.free), operation_timeout=600) as client:
        creating = asyncio.create_task(client.create_producer("orders"))
        try:
            await eventually(lambda: brokers.refused(brokers.full) >= 2, "a retried connect")
            assert not creating.done()
            await brokers.occupant.close()  # a connection slot frees up
            producer = await creating
        finally:
            await cancel_and_wait(creating)
        sent = await producer.send(b"waited", key="k")
        assert sent is not None and sent.segment_id == 0


async def test_past_the_open_limit_the_client_hears_too_many_open_at_once(
    brokers: Brokers,
) -> None:
    await brokers.topic("orders", brokers.free)
    await brokers.topic("refunds", brokers.free)
    # A broken client would retry until the operation timeout: it is there to end such a run.
    async with Client(brokers.url(brokers.free), operation_timeout=30) as client:
        await client.create_producer("orders")  # its watch and its producer: the limit
        with pytest.raises(TooManyOpen) as watch_refused:
            await client.watch("refunds")
        with pytest.raises(TooManyOpen) as producer_refused:
            await client.create_producer("orders")  # the watch is shared: one producer more
        with pytest.raises(TooManyOpen) as consumer_refused:
            await client.subscribe_queue("orders", "billing")
    held = (
        "refused: this connection holds 2 producers, consumers, watches, consumer "
        "registrations and exclusive grants open, the broker's --max-open-per-connection (2); "
        "close some first"
    )
    assert watch_refused.value.message == f"TooManyOpen: WatchTopic {held}"
    assert producer_refused.value.message == f"TooManyOpen: ProducerOpen {held}"
    assert consumer_refused.value.message == f"TooManyOpen: Subscribe {held}"
