"""Subscriptions a consumer created (not declared in the topic's spec): listed, described and
deleted through the admin API, from every segment's broker."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest

from scalable_topics.admin.broker_admin import BrokerAdmin
from scalable_topics.client import Client
from scalable_topics.client.admin import Admin
from scalable_topics.client.errors import ConsumerBusy, NotFound
from support.inprocess_service import Service, running_service


@pytest.fixture
async def service(tmp_path: Path) -> AsyncIterator[Service]:
    async with running_service(tmp_path, brokers=2) as running:
        yield running


async def on_brokers(service: Service, topic: str) -> dict[int, list[str]]:
    """Each segment's subscriptions, as its broker has them."""
    async with aiohttp.ClientSession() as http, Admin(service.url) as admin:
        brokers = BrokerAdmin(http)
        described = await admin.describe_topic(topic)
        return {
            segment["id"]: await brokers.subscriptions(
                segment["broker"], "default", topic, segment["descriptor"]
            )
            for segment in described["segments"]
        }


async def test_a_subscription_a_queue_consumer_made_is_listed_and_deleted(
    service: Service,
) -> None:
    await service.create_topic("orders", initial=2, subscriptions=[("billing", "Stream")])
    async with Client(service.url) as client, Admin(service.url) as admin:
        consumer = await client.subscribe_queue("orders", "adhoc")
        assert await on_brokers(service, "orders") == {
            0: ["adhoc", "billing"],
            1: ["adhoc", "billing"],
        }

        listed = {s["name"]: s for s in await admin.list_subscriptions("orders")}
        assert listed["adhoc"] == {
            "name": "adhoc",
            "type": "Queue",
            "declared": False,
            "state": None,
            "consumers": [],
            "segments": [0, 1],
            "attachedConsumers": 2,
        }
        assert listed["billing"]["declared"] is True
        assert listed["billing"]["segments"] == [0, 1]
        described = await admin.describe_topic("orders")
        assert [s["name"] for s in described["subscriptions"]] == ["adhoc", "billing"]

        with pytest.raises(ConsumerBusy, match=r"has consumers attached \(2, over segments 0, 1\)"):
            await admin.delete_subscription("orders", "adhoc")
        assert (await on_brokers(service, "orders"))[0] == ["adhoc", "billing"]

        await consumer.close()
        await admin.delete_subscription("orders", "adhoc")
        assert await on_brokers(service, "orders") == {0: ["billing"], 1: ["billing"]}
        assert [s["name"] for s in await admin.list_subscriptions("orders")] == ["billing"]
        with pytest.raises(NotFound, match="has no subscription 'adhoc'"):
            await admin.delete_subscription("orders", "adhoc")


async def test_a_deleted_runtime_subscription_starts_afresh(service: Service) -> None:
    """Deleted, its cursor is gone: a consumer subscribing again at Earliest reads every
    message again, acknowledged before or not."""
    await service.create_topic("orders", initial=1)
    async with Client(service.url) as client, Admin(service.url) as admin:
        producer = await client.create_producer("orders")
        for index in range(3):
            await producer.send(f"m{index}".encode())
        consumer = await client.subscribe_queue("orders", "adhoc")
        for _ in range(3):
            await consumer.acknowledge(await consumer.receive(wait_seconds=10), durable=True)
        await consumer.close()
        await admin.delete_subscription("orders", "adhoc")

        again = await client.subscribe_queue("orders", "adhoc")
        payloads = sorted([(await again.receive(wait_seconds=10)).payload for _ in range(3)])
        assert payloads == [b"m0", b"m1", b"m2"]
        await again.close()
