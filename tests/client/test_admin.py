"""The client's Admin against broker applications and a controller in the test's event loop."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from aiohttp.test_utils import TestServer

from scalable_topics.broker.app import build_app
from scalable_topics.broker.config import BrokerConfig
from scalable_topics.client.admin import Admin, admin_urls, topic_path
from scalable_topics.client.errors import (
    AlreadyExists,
    ConnectionFailed,
    InvalidRequest,
    NotFound,
    OperationInProgress,
    Timeout,
)
from scalable_topics.model.layout import SegmentLayout
from scalable_topics.model.resources import ScalableTopic
from scalable_topics.model.scale_request import REQUESTER_ANNOTATION
from scalable_topics.protocol import ErrorCode
from scalable_topics.store import EmbeddedStore
from scalable_topics.tasks import cancel_and_wait
from support.inprocess_service import Service, running_service


@pytest.fixture
async def service(tmp_path: Path) -> AsyncIterator[Service]:
    async with running_service(tmp_path, brokers=2) as running:
        yield running


def closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_service_urls_map_to_http() -> None:
    assert admin_urls("ws://a:1, wss://b:2/,http://c:3,https://d:4") == (
        "http://a:1",
        "https://b:2",
        "http://c:3",
        "https://d:4",
    )
    with pytest.raises(ValueError, match="names no broker"):
        admin_urls(" , ")
    with pytest.raises(ValueError, match="ws://HOST:PORT"):
        admin_urls("tcp://a:1")


def test_topics_are_namespace_slash_name_or_a_bare_name() -> None:
    assert topic_path("orders") == "/admin/v1/topics/default/orders"
    assert topic_path("team-a/orders") == "/admin/v1/topics/team-a/orders"
    with pytest.raises(ValueError, match="NAMESPACE/NAME"):
        topic_path("a/b/c")


async def wait_for_layout(admin: Admin, topic: str) -> int:
    async with asyncio.timeout(30):
        while True:
            described = await admin.describe_topic(topic)
            if described["epoch"] is not None:
                return described["epoch"]
            await asyncio.sleep(0.05)


async def test_more_subscriptions_than_a_topic_takes_are_refused_before_anything_is_sent() -> None:
    async with Admin("http://127.0.0.1:1") as admin:  # nothing listens there
        with pytest.raises(ValueError, match="invalid topic") as refused:
            await admin.create_topic("orders", subscriptions=[f"s{i}" for i in range(1001)])
    assert str(refused.value) == (
        "invalid topic: spec.subscriptions: a topic has at most 1000 subscriptions "
        "(maxSubscriptionsPerTopic), not 1001"
    )


async def test_admin_manages_topics_end_to_end(service: Service) -> None:
    async with Admin(service.url) as admin:
        created = await admin.create_topic(
            "team-a/orders", 2, [("billing", "Stream"), "audit"], {"tier": "gold"}
        )
        assert created["spec"]["subscriptions"] == [
            {"name": "billing", "type": "Stream"},
            {"name": "audit", "type": "Queue"},
        ]
        with pytest.raises(AlreadyExists):
            await admin.create_topic("team-a/orders")
        with pytest.raises(InvalidRequest, match=r"spec\.initialSegments"):
            await admin.create_topic("team-a/other", 0)
        with pytest.raises(
            InvalidRequest, match=r"spec\.autoScale: minSegments must not exceed maxSegments"
        ):
            await admin.create_topic(
                "team-a/other", auto_scale={"minSegments": 3, "maxSegments": 2}
            )
        assert await wait_for_layout(admin, "team-a/orders") == 0

        [summary] = await admin.list_topics("team-a")
        assert (summary["name"], summary["activeSegments"]) == ("orders", 2)
        assert await admin.list_topics("nobody") == []
        assert [t["name"] for t in await admin.list_topics()] == ["orders"]

        operation = await admin.split("team-a/orders", 0, wait_seconds=30)
        assert (operation["result"], operation["childIds"]) == ("Succeeded", [2, 3])
        with pytest.raises(InvalidRequest, match="cannot merge segment 2 with itself") as refused:
            await admin.merge("team-a/orders", 2, 2)
        assert refused.value.code is ErrorCode.INVALID_REQUEST
        merged = await admin.merge("team-a/orders", 2, 3, wait_seconds=30)
        assert merged["childIds"] == [4]
        described = await admin.describe_topic("team-a/orders")
        assert {s["id"] for s in described["segments"] if s["state"] == "Active"} == {1, 4}

        await admin.create_subscription("team-a/orders", "late", "Checkpoint")
        with pytest.raises(AlreadyExists, match="already has a subscription 'late'"):
            await admin.create_subscription("team-a/orders", "late")
        names = [s["name"] for s in await admin.list_subscriptions("team-a/orders")]
        assert names == ["audit", "billing", "late"]
        await admin.delete_subscription("team-a/orders", "late")
        with pytest.raises(NotFound, match="has no subscription 'late'"):
            await admin.delete_subscription("team-a/orders", "late")

        stats = await admin.stats("team-a/orders")
        assert stats["segmentCounts"]["active"] == 2

        assert (await admin.delete_topic("team-a/orders"))["name"] == "orders"
        async with asyncio.timeout(30):
            while await admin.list_topics("team-a"):
                await asyncio.sleep(0.05)
        with pytest.raises(NotFound, match="topic team-a/orders not found") as missing:
            await admin.describe_topic("team-a/orders")
        assert missing.value.code is ErrorCode.TOPIC_NOT_FOUND


async def test_a_split_nobody_answers_times_out(tmp_path: Path) -> None:
    """A broker but no controller: the request is written and waited on in vain."""
    async with await EmbeddedStore.open(tmp_path / "store.db") as store:
        config = BrokerConfig(data_dir=tmp_path / "b", store_url="embedded:x.db")
        server = TestServer(build_app(config, store=store), host="127.0.0.1")
        await server.start_server()
        try:
            async with Admin(f"ws://127.0.0.1:{server.port}") as admin:
                await admin.create_topic("orders")
                with pytest.raises(InvalidRequest, match="no segments yet"):
                    await admin.split("orders", 0)
                raw = await store.get(ScalableTopic.KIND, "default", "orders")
                raw["status"] = SegmentLayout.initial(1, datetime.now(UTC)).to_status()
                await store.replace_status(raw)
                with pytest.raises(Timeout, match=r"no controller answered within 0\.3 s"):
                    await admin.split("orders", 0, wait_seconds=0.3)
        finally:
            await server.close()


async def test_a_request_while_another_holds_the_topic_is_refused_naming_it(
    tmp_path: Path,
) -> None:
    """A broker but no controller: the first split waits for an answer; a merge asked
    meanwhile is refused at once, naming the split, and writes nothing (it used to overwrite
    the split's request: both callers were told OK, and only one ran)."""
    async with await EmbeddedStore.open(tmp_path / "store.db") as store:
        config = BrokerConfig(data_dir=tmp_path / "b", store_url="embedded:x.db")
        server = TestServer(build_app(config, store=store), host="127.0.0.1")
        await server.start_server()
        try:
            async with Admin(f"ws://127.0.0.1:{server.port}") as admin:
                await admin.create_topic("orders")
                raw = await store.get(ScalableTopic.KIND, "default", "orders")
                raw["status"] = SegmentLayout.initial(2, datetime.now(UTC)).to_status()
                await store.replace_status(raw)
                first = asyncio.create_task(admin.split("orders", 0, wait_seconds=30))
                try:
                    async with asyncio.timeout(30):
                        while (
                            REQUESTER_ANNOTATION
                            not in (topic := await read_topic(store)).metadata.annotations
                        ):
                            await asyncio.sleep(0.01)
                    asked = topic.metadata.annotations
                    token = asked[REQUESTER_ANNOTATION]
                    with pytest.raises(OperationInProgress) as refused:
                        await admin.merge("orders", 0, 1)
                    assert refused.value.message == (
                        "an operation is in progress on topic default/orders: split of segment "
                        f"0 (requested by {token}) is waiting for the topic's controller; ask "
                        "again when it is over"
                    )
                    assert refused.value.operation == {
                        "kind": "Split",
                        "segmentIds": [0],
                        "requestedBy": token,
                        "state": "Requested",
                    }
                    assert (await read_topic(store)).metadata.annotations == asked

                    # A controller took it: running, the slot is still taken.
                    topic = await read_topic(store)
                    layout = SegmentLayout.from_status(topic.status.to_wire())
                    raw = topic.to_wire()
                    raw["status"]["pendingOperation"] = {
                        **layout.plan_split(0).to_dict(),
                        "step": "ChildrenCreated",
                        "requestedBy": token,
                    }
                    await store.replace_status(raw)
                    with pytest.raises(OperationInProgress, match="is running") as running:
                        await admin.split("orders", 1)
                    assert str(running.value).endswith(
                        f"split of segment 0 (requested by {token}) is running (step "
                        "ChildrenCreated); ask again when it is over"
                    )
                    assert running.value.operation["state"] == "Running"
                    assert running.value.operation["step"] == "ChildrenCreated"
                finally:
                    await cancel_and_wait(first)
        finally:
            await server.close()


async def read_topic(store: EmbeddedStore) -> ScalableTopic:
    return ScalableTopic.model_validate(await store.get(ScalableTopic.KIND, "default", "orders"))


async def test_an_unreachable_broker_is_skipped(service: Service) -> None:
    dead = f"ws://127.0.0.1:{closed_port()}"
    async with Admin(f"{dead},{service.url}") as admin:
        assert await admin.list_topics() == []
        assert admin.urls[0] == dead.replace("ws://", "http://")


async def test_no_reachable_broker_fails_with_a_hint() -> None:
    url = f"ws://127.0.0.1:{closed_port()}"
    async with Admin(url) as admin:
        with pytest.raises(ConnectionFailed, match="stctl standalone") as failed:
            await admin.list_topics()
    assert failed.value.message.startswith(f"cannot connect to {url}: connection refused")
