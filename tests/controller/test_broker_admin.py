"""The controller's admin client against a real broker application on loopback."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest
from aiohttp.test_utils import TestServer

from scalable_topics.admin.broker_admin import (
    BrokerAdmin,
    BrokerAdminError,
    BrokerUnreachable,
    SegmentBusy,
    admin_base,
)
from scalable_topics.broker.app import build_app
from scalable_topics.broker.config import BrokerConfig
from scalable_topics.store import EmbeddedStore
from support.wire_client import WireClient


@pytest.fixture
async def broker_url(tmp_path: Path) -> AsyncIterator[str]:
    async with await EmbeddedStore.open(tmp_path / "store.db") as store:
        config = BrokerConfig(
            data_dir=tmp_path / "broker", store_url="embedded:unused.db", auth_token="t0ken"
        )
        server = TestServer(build_app(config, store=store), host="127.0.0.1")
        await server.start_server()
        try:
            yield f"ws://127.0.0.1:{server.port}"
        finally:
            await server.close()


@pytest.fixture
async def admin() -> AsyncIterator[BrokerAdmin]:
    async with aiohttp.ClientSession() as session:
        yield BrokerAdmin(session, token="t0ken")


async def test_segment_lifecycle_through_the_admin_client(
    broker_url: str, admin: BrokerAdmin
) -> None:
    stats = await admin.create_segment(
        broker_url,
        "default",
        "orders",
        "0000-7fff-1",
        parents=[0],
        subscriptions=["a", "b"],
        producer_epoch=4,
    )
    assert (stats["segmentId"], stats["producerEpoch"]) == (1, 4)
    again = await admin.create_segment(
        broker_url, "default", "orders", "0000-7fff-1", parents=[0], subscriptions=["c"]
    )
    assert set(again["subscriptions"]) == {"a", "b", "c"}  # idempotent; missing subscriptions added
    assert await admin.subscriptions(broker_url, "default", "orders", "0000-7fff-1") == [
        "a",
        "b",
        "c",
    ]
    await admin.create_subscription(broker_url, "default", "orders", "0000-7fff-1", "d")
    assert await admin.delete_subscription(broker_url, "default", "orders", "0000-7fff-1", "d")
    assert not await admin.delete_subscription(broker_url, "default", "orders", "0000-7fff-1", "d")
    assert await admin.fence(broker_url, "default", "orders", "0000-7fff-1", 9) == 9
    assert await admin.terminate_segment(broker_url, "default", "orders", "0000-7fff-1") == -1
    assert (
        await admin.terminate_segment(broker_url, "default", "orders", "0000-7fff-1") == -1
    )  # idempotent
    assert (await admin.stats(broker_url, "default", "orders", "0000-7fff-1"))[
        "state"
    ] == "Terminated"
    assert await admin.delete_segment(broker_url, "default", "orders", "0000-7fff-1")
    assert not await admin.delete_segment(
        broker_url, "default", "orders", "0000-7fff-1"
    )  # already gone


async def test_refusals_carry_the_broker_error_code(broker_url: str, admin: BrokerAdmin) -> None:
    await admin.create_segment(broker_url, "default", "orders", "0000-7fff-1")
    with pytest.raises(BrokerAdminError) as conflict:
        await admin.create_segment(broker_url, "default", "orders", "0000-ffff-1")
    assert conflict.value.code == "InvalidRequest"
    assert "exists as 0000-7fff-1" in conflict.value.message
    with pytest.raises(BrokerAdminError) as missing:
        await admin.stats(broker_url, "default", "orders", "8000-ffff-2")
    assert (missing.value.status, missing.value.code) == (404, "SegmentNotFound")
    async with aiohttp.ClientSession() as session:
        with pytest.raises(BrokerAdminError) as refused:
            await BrokerAdmin(session, token="wrong").stats(
                broker_url, "default", "orders", "0000-7fff-1"
            )
    assert refused.value.status == 401


async def test_a_conditional_fence_names_the_producers_that_keep_it_out(
    broker_url: str, admin: BrokerAdmin
) -> None:
    where = (broker_url, "default", "orders", "0000-7fff-1")
    await admin.create_segment(*where)
    client = await WireClient.connect(broker_url.replace("ws://", "http://"), token="t0ken")
    try:
        await client.open_producer(1, "default/orders", 1, name="shared-1")
        assert await admin.producers(*where) == ["shared-1"]
        with pytest.raises(SegmentBusy) as busy:
            await admin.fence(*where, 1, "amy", if_free=True)
        assert (busy.value.status, busy.value.producers) == (409, ("shared-1",))
        assert await admin.release(*where, 1) == 0  # no epoch raised by the undo either
        await client.close_producer(1)
        assert await admin.producers(*where) == []
        assert await admin.fence(*where, 1, "amy", if_free=True) == 1
    finally:
        await client.close()


async def test_an_unreachable_broker_is_reported_as_such(admin: BrokerAdmin) -> None:
    with pytest.raises(BrokerUnreachable, match=r"127\.0\.0\.1:9"):
        await admin.stats("ws://127.0.0.1:9", "default", "orders", "0000-ffff-0")


def test_admin_base_follows_the_advertised_scheme() -> None:
    assert admin_base("ws://b-0.brokers:6650") == "http://b-0.brokers:6650"
    assert admin_base("wss://b-0:443/") == "https://b-0:443"
    with pytest.raises(ValueError, match="not ws://"):
        admin_base("tcp://b-0:6650")
