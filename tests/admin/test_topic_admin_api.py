"""The topic admin API of a broker application, with a controller in the same event loop."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp.test_utils import TestServer

from scalable_topics.broker.app import build_app
from scalable_topics.broker.config import BrokerConfig
from scalable_topics.store import EmbeddedStore
from support.inprocess_service import Service, running_service

TOPIC = "/admin/v1/topics/default/orders"


@pytest.fixture
async def service(tmp_path: Path) -> AsyncIterator[Service]:
    async with running_service(tmp_path, brokers=2) as running:
        yield running


@pytest.fixture
async def http() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession() as session:
        yield session


async def call(
    http: aiohttp.ClientSession, service: Service, method: str, path: str, body: Any = None
) -> tuple[int, Any]:
    url = f"http://127.0.0.1:{service.brokers[1].port}{path}"
    async with http.request(method, url, json=body) as response:
        payload = await response.json() if response.content_type == "application/json" else None
        return response.status, payload


async def until_created(http: aiohttp.ClientSession, service: Service) -> dict[str, Any]:
    async with asyncio.timeout(30):
        while True:
            status, described = await call(http, service, "GET", TOPIC)
            assert status == 200
            if described["phase"] == "Ready":
                return described
            await asyncio.sleep(0.05)


async def test_topic_lifecycle_over_http(service: Service, http: aiohttp.ClientSession) -> None:
    body = {
        "initialSegments": 2,
        "subscriptions": [{"name": "billing", "type": "Stream"}],
        "properties": {"tier": "gold"},
        "retention": {"maxAgeSeconds": 60},
        "autoScale": {"maxSegments": 8, "splitThresholds": {"msgRateIn": 500}},
    }
    status, created = await call(http, service, "PUT", TOPIC, body)
    assert status == 201
    assert created["spec"]["autoScale"] == body["autoScale"]
    assert (created["name"], created["namespace"], created["epoch"]) == ("orders", "default", None)
    assert created["spec"]["properties"] == {"tier": "gold"}

    status, again = await call(http, service, "PUT", TOPIC, body)
    assert (status, again["code"]) == (409, "AlreadyExists")

    described = await until_created(http, service)
    assert described["epoch"] == 0
    assert [(s["id"], s["range"], s["state"]) for s in described["segments"]] == [
        (0, "0000-7fff", "Active"),
        (1, "8000-ffff", "Active"),
    ]
    assert all(s["broker"] in service.url.split(",") for s in described["segments"])
    assert described["controller"]["identity"] == "controller-0"

    status, listed = await call(http, service, "GET", "/admin/v1/topics?namespace=default")
    assert status == 200
    assert [(t["name"], t["activeSegments"], t["subscriptions"]) for t in listed] == [
        ("orders", 2, ["billing"])
    ]
    assert (await call(http, service, "GET", "/admin/v1/topics?namespace=other"))[1] == []

    status, split = await call(http, service, "POST", TOPIC + "/split", {"segment": 0})
    assert status == 200, split
    assert (split["kind"], split["result"], split["parentIds"]) == ("Split", "Succeeded", [0])
    assert split["childIds"] == [2, 3]

    status, refused = await call(http, service, "POST", TOPIC + "/merge", {"segments": [1, 1]})
    assert (status, refused["code"]) == (409, "InvalidRequest")
    assert refused["message"] == "cannot merge segment 1 with itself"

    status, merged = await call(http, service, "POST", TOPIC + "/merge", {"segments": [2, 3]})
    assert (status, merged["result"], merged["childIds"]) == (200, "Succeeded", [4])

    status, stats = await call(http, service, "GET", TOPIC + "/stats")
    assert status == 200
    assert stats["segmentCounts"]["unavailable"] == 0
    assert stats["segmentCounts"]["active"] == 2
    assert [s["name"] for s in stats["subscriptions"]] == ["billing"]

    status, deleted = await call(http, service, "DELETE", TOPIC)
    assert (status, deleted["name"]) == (202, "orders")
    async with asyncio.timeout(30):
        while (await call(http, service, "GET", TOPIC))[0] != 404:
            await asyncio.sleep(0.05)
    status, gone = await call(http, service, "DELETE", TOPIC)
    assert (status, gone["code"], gone["message"]) == (
        404,
        "TopicNotFound",
        "topic default/orders not found",
    )


async def test_subscriptions_over_http(service: Service, http: aiohttp.ClientSession) -> None:
    assert (await call(http, service, "PUT", TOPIC, {}))[0] == 201
    path = TOPIC + "/subscriptions"
    status, created = await call(http, service, "PUT", path + "/audit", {"type": "Checkpoint"})
    assert (status, created) == (201, {"name": "audit", "type": "Checkpoint"})
    status, duplicate = await call(http, service, "PUT", path + "/audit", {"type": "Queue"})
    assert (status, duplicate["code"]) == (409, "AlreadyExists")
    status, invalid = await call(http, service, "PUT", path + "/x", {"type": "Fanout"})
    assert (status, invalid["code"]) == (400, "InvalidRequest")
    assert "subscription: type" in invalid["message"]

    async with asyncio.timeout(30):  # the controller carries it to the segments
        while True:
            status, listed = await call(http, service, "GET", path)
            assert status == 200
            if listed and listed[0]["state"] == "Ready":
                break
            await asyncio.sleep(0.05)
    assert [(s["name"], s["type"], s["declared"]) for s in listed] == [
        ("audit", "Checkpoint", True)
    ]
    assert (await call(http, service, "DELETE", path + "/audit"))[0] == 204
    status, missing = await call(http, service, "DELETE", path + "/audit")
    assert (status, missing["code"]) == (404, "SubscriptionNotFound")


@pytest.mark.parametrize(
    ("method", "path", "body", "named"),
    [
        ("PUT", TOPIC, {"initialSegments": 0}, "spec.initialSegments"),
        ("PUT", TOPIC, {"initialSegment": 2}, "request body: initialSegment"),
        (
            "PUT",
            TOPIC,
            {"autoScale": {"splitThresholds": {"msgRateIn": 0}}},
            "invalid topic: spec.autoScale: splitThresholds.msgRateIn must be greater than 0",
        ),
        (
            "PUT",
            TOPIC,
            {"autoScale": {"mergeCooldownSeconds": -1}},
            "spec.autoScale.mergeCooldownSeconds: Input should be greater than or equal to 0",
        ),
        ("PUT", "/admin/v1/topics/default/Bad_Name", {}, "not a DNS label"),
        ("POST", TOPIC + "/split", {"segment": -1}, "request body: segment"),
        ("POST", TOPIC + "/merge", {"segments": [1]}, "request body: segments"),
        # Strict: a value of another type is refused, never coerced.
        (
            "POST",
            TOPIC + "/split",
            {"segment": "0"},
            "invalid request body: segment: Input should be a valid integer",
        ),
        ("POST", TOPIC + "/split", {"segment": True}, "request body: segment"),
        ("POST", TOPIC + "/split", {"segment": 0.0}, "request body: segment"),
        ("POST", TOPIC + "/split", {"segment": 0, "timeoutSeconds": "5"}, "timeoutSeconds"),
        ("POST", TOPIC + "/merge", {"segments": ["1", "2"]}, "request body: segments.0"),
        ("PUT", TOPIC, {"initialSegments": "2"}, "request body: initialSegments"),
        ("PUT", TOPIC, {"subscriptions": [{"name": 7}]}, "request body: subscriptions.0.name"),
        ("PUT", TOPIC, {"retention": {"maxAgeSeconds": "60"}}, "retention.maxAgeSeconds"),
        ("PUT", TOPIC, {"autoScale": {"minSegments": "2"}}, "spec.autoScale.minSegments"),
        ("PUT", TOPIC + "/subscriptions/audit", {"type": 1}, "request body: type"),
        (
            "PUT",
            TOPIC,
            {"subscriptions": [{"name": f"s{i}"} for i in range(1001)]},
            "invalid request body: subscriptions: a topic has at most 1000 subscriptions "
            "(maxSubscriptionsPerTopic), not 1001",
        ),
    ],
)
async def test_invalid_requests_name_the_field(
    service: Service,
    http: aiohttp.ClientSession,
    method: str,
    path: str,
    body: Any,
    named: str,
) -> None:
    status, refused = await call(http, service, method, path, body)
    assert (status, refused["code"]) == (400, "InvalidRequest"), refused
    assert named in refused["message"]
    assert (await call(http, service, "GET", TOPIC))[0] == 404  # nothing was written


async def test_a_body_past_its_bound_is_refused_before_it_is_parsed(
    service: Service, http: aiohttp.ClientSession
) -> None:
    """20,000 subscriptions (the issue's body) cannot reach the topic: past 256 KiB a topic's
    body is refused, unparsed; past 512 KiB aiohttp stops reading it."""
    for entry, bound in (("s{}", 262_144), ("subscription-{}", 524_288)):
        body = {"subscriptions": [{"name": entry.format(i)} for i in range(20_000)]}
        status, refused = await call(http, service, "PUT", TOPIC, body)
        assert (status, refused["code"]) == (413, "InvalidRequest"), refused
        assert refused["message"].startswith("invalid request body: ")
        assert str(bound) in refused["message"]
    assert (await call(http, service, "GET", TOPIC))[0] == 404
    assert (await call(http, service, "GET", "/healthz"))[0] == 200


async def test_scaling_an_absent_topic_is_not_found(
    service: Service, http: aiohttp.ClientSession
) -> None:
    status, refused = await call(http, service, "POST", TOPIC + "/split", {"segment": 0})
    assert (status, refused["code"]) == (404, "TopicNotFound")


async def test_the_admin_token_guards_topic_routes(tmp_path: Path) -> None:
    async with await EmbeddedStore.open(tmp_path / "store.db") as store:
        config = BrokerConfig(data_dir=tmp_path / "b", store_url="embedded:x.db", auth_token="s3")
        server = TestServer(build_app(config, store=store), host="127.0.0.1")
        await server.start_server()
        try:
            url = f"http://127.0.0.1:{server.port}/admin/v1/topics"
            async with aiohttp.ClientSession() as http:
                async with http.get(url) as response:
                    assert response.status == 401
                    assert (await response.json())["code"] == "AuthenticationFailed"
                headers = {"Authorization": "Bearer s3"}
                async with http.get(url, headers=headers) as response:
                    assert (response.status, await response.json()) == (200, [])
        finally:
            await server.close()
