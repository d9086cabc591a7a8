"""--max-connections and --max-connections-per-ip (broker/connection_limits.py): past either, a
WebSocket upgrade is answered 503 ServiceNotReady with Retry-After, before anything is upgraded;
the connections already open and the HTTP APIs carry on, and every connection that ends, however
it ends, gives its slot back."""

from __future__ import annotations

import base64
import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, Protocol

import aiohttp
import pytest

from scalable_topics.broker.config import BrokerConfig
from scalable_topics.broker.connection_limits import ConnectionLimits
from scalable_topics.broker.open_files import FileBudget
from scalable_topics.protocol import BatchMessage
from scalable_topics.protocol.upgrade import REFUSAL_HEADER
from support.eventually import eventually
from support.servers import broker_servers
from support.wire_client import WireClient, abandon_upgrade

TOPIC = "default/orders"


class Broker:
    def __init__(self, port: int) -> None:
        self.http_url = f"http://127.0.0.1:{port}"
        self.ws_url = f"ws://127.0.0.1:{port}"

    async def client(self) -> WireClient:
        return await WireClient.connect(self.ws_url)

    async def upgrade(self, source: str = "127.0.0.1") -> tuple[int, dict[str, str], Any]:
        """Ask for a WebSocket upgrade from ``source`` as plain HTTP: the status, the headers
        and the JSON body of a refusal (None for a 101)."""
        key = base64.b64encode(os.urandom(16)).decode()
        headers = {
            "Upgrade": "websocket",
            "Connection": "Upgrade",
            "Sec-WebSocket-Key": key,
            "Sec-WebSocket-Version": "13",
        }
        connector = aiohttp.TCPConnector(local_addr=(source, 0))
        async with (
            aiohttp.ClientSession(connector=connector) as http,
            http.get(self.http_url + "/ws", headers=headers) as response,
        ):
            body = None if response.status == 101 else await response.json()
            return response.status, dict(response.headers), body

    async def metrics(self) -> dict[str, float]:
        async with (
            aiohttp.ClientSession() as http,
            http.get(self.http_url + "/metrics") as response,
        ):
            assert response.status == 200
            text = await response.text()
        samples = (line.rsplit(" ", 1) for line in text.splitlines())
        return {name: float(value) for name, value in samples if name.startswith("st_broker_")}

    async def connections(self) -> float:
        return (await self.metrics())["st_broker_connections"]


class StartBroker(Protocol):
    async def __call__(self, **settings: int) -> Broker: ...


@pytest.fixture
async def start_broker(tmp_path: Path) -> AsyncIterator[StartBroker]:
    async with broker_servers(tmp_path) as start_server:

        async def start(**settings: int) -> Broker:
            server = await start_server(**settings)
            broker = Broker(server.port)
            async with (
                aiohttp.ClientSession() as http,
                http.put(
                    f"{broker.http_url}/admin/v1/segments/default/orders/0000-ffff-0", json={}
                ) as response,
            ):
                assert response.status == 201, await response.text()
            return broker

        yield start


async def test_past_the_limit_an_upgrade_is_refused_and_the_rest_carries_on(
    start_broker: StartBroker,
) -> None:
    broker = await start_broker(max_connections=2)
    first, second = await broker.client(), await broker.client()
    try:
        status, headers, body = await broker.upgrade()
        assert status == 503
        message = (
            f"broker 127.0.0.1:{broker.http_url.rsplit(':', 1)[1]} holds 2 connections, its "
            "--max-connections (2); connect to another broker, or again later"
        )
        assert body == {"code": "ServiceNotReady", "message": message}
        assert headers["Retry-After"] == "5"
        assert headers[REFUSAL_HEADER] == message
        assert headers["Connection"] == "close"  # the refused client holds no socket
        # The connections open carry on, and the HTTP APIs answer (they take no slot).
        await first.open_producer(1, TOPIC, 0)
        await first.send(1, 0, BatchMessage(b"sent"))
        await second.open_producer(1, TOPIC, 0)
        metrics = await broker.metrics()
        assert metrics["st_broker_connections"] == 2
        assert metrics['st_broker_connections_refused_total{limit="max-connections"}'] == 1
        assert metrics['st_broker_connections_refused_total{limit="max-connections-per-ip"}'] == 0
    finally:
        await first.close()
    # One left: there is room for one again.
    await eventually(lambda: _equals(broker.connections(), 1), "the first connection gone")
    third = await broker.client()
    await third.close()
    await second.close()


async def test_connections_give_back_their_slot_however_they_end(
    start_broker: StartBroker,
) -> None:
    broker = await start_broker(max_connections=2)
    for _ in range(3):  # three times the limit, each way of ending twice
        closed, dropped = await broker.client(), await broker.client()
        assert (await broker.upgrade())[0] == 503
        await closed.close()  # the WebSocket closing handshake
        await dropped.drop()  # the TCP connection cut
        await eventually(lambda: _equals(broker.connections(), 0), "both slots given back")
        broken = await broker.client()
        await broken.send_raw(b"\xc1")  # malformed: the broker closes it (1002)
        await abandon_upgrade(broker.http_url)  # gone before the 101 was written
        await eventually(lambda: _equals(broker.connections(), 0), "no slot kept")
        await broken.close()
    assert (await broker.metrics())[
        'st_broker_connections_refused_total{limit="max-connections"}'
    ] == 3
    # The whole limit is there to take.
    clients = [await broker.client(), await broker.client()]
    for client in clients:
        await client.close()


async def test_past_the_limit_per_address_only_that_address_is_refused(
    start_broker: StartBroker,
) -> None:
    broker = await start_broker(max_connections_per_ip=1)
    first = await broker.client()
    try:
        status, headers, body = await broker.upgrade()
        assert status == 503
        assert body["code"] == "ServiceNotReady"
        assert body["message"].endswith(
            "holds 1 connections from 127.0.0.1, its --max-connections-per-ip (1); close "
            "some, or connect again later"
        )
        assert headers["Retry-After"] == "5"
        # Another address (all of 127.0.0.0/8 is loopback) has its own room.
        assert (await broker.upgrade(source="127.0.0.2"))[0] == 101
    finally:
        await first.close()
    await eventually(lambda: _equals(broker.connections(), 0), "the connections gone")
    assert (await broker.upgrade())[0] == 101
    metrics = await broker.metrics()
    assert metrics['st_broker_connections_refused_total{limit="max-connections-per-ip"}'] == 1


def test_an_open_files_limit_that_lowers_the_connection_limit_is_named() -> None:
    config = BrokerConfig(data_dir=Path("d"), store_url="embedded:x.db", max_connections=10_000)
    limits = ConnectionLimits.of(config, FileBudget(limit=4_096, connections=2_048, segments=0))
    assert limits.max_connections == 2_048
    for _ in range(2_048):
        assert limits.admit(None) is None
    assert limits.admit(None) == (
        "broker 127.0.0.1:6650 holds 2048 connections, its --max-connections (10000, lowered "
        "to 2048 by the open-files limit of 4096); connect to another broker, or again later"
    )


async def _equals(value: Any, expected: float) -> bool:
    return bool(await value == expected)
