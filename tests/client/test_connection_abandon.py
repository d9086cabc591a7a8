"""A request the client gave up on must not leave anything behind on the broker."""

from __future__ import annotations

import asyncio
from pathlib import Path

import aiohttp
import pytest

from scalable_topics.client.connection import BrokerConnection
from scalable_topics.client.errors import ConsumerBusy, Timeout
from scalable_topics.protocol import (
    ConsumerClose,
    InitialPosition,
    SegmentSubscriptionType,
    Subscribe,
)
from support.inprocess_service import running_service


def subscribe(consumer_id: int, name: str) -> Subscribe:
    return Subscribe(
        0,
        consumer_id,
        "default/orders",
        0,
        "s",
        SegmentSubscriptionType.EXCLUSIVE,
        name,
        0,
        InitialPosition.EARLIEST,
        10,
    )


async def test_an_abandoned_subscribe_does_not_keep_holding_the_subscription(
    tmp_path: Path,
) -> None:
    async with (
        running_service(tmp_path, brokers=1) as service,
        aiohttp.ClientSession() as http,
    ):
        await service.create_topic("orders", subscriptions=[("s", "Stream")])
        first, second = [
            await BrokerConnection.open(
                service.url, http, client_name=name, auth_token=None, wait_seconds=10
            )
            for name in ("first", "second")
        ]
        try:
            # Given up at once: the broker still takes the Subscribe after the client stopped
            # waiting for it, and would hold the Exclusive subscription for nobody.
            with pytest.raises(Timeout):
                await first.request(subscribe(1, "a"), wait_seconds=0, undo=ConsumerClose(0, 1))
            async with asyncio.timeout(10):
                while True:
                    try:
                        await second.request(subscribe(1, "b"))
                        break
                    except ConsumerBusy:
                        await asyncio.sleep(0.05)
            assert first.is_open
        finally:
            await first.close()
            await second.close()
