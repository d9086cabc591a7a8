"""Key_Shared on a real broker: a consumer that disconnects holding unacknowledged messages.

Its messages go to the survivors, nothing is lost, every message is acknowledged exactly once,
and each key's acknowledged messages stay in send order at the consumer that acked them."""

from __future__ import annotations

import asyncio
from collections import defaultdict

from test_broker_integration import KEYS, TOPIC, make_segment, produce

from scalable_topics.protocol import DeliveredMessage, SegmentSubscriptionType
from support.broker_process import BrokerProcess
from support.wire_client import WireClient

KEY_SHARED = SegmentSubscriptionType.KEY_SHARED


async def test_departing_consumer_hands_its_keys_over_in_order(broker: BrokerProcess) -> None:
    await make_segment(broker, subscriptions=["sub"])
    producer = await WireClient.connect(broker.ws_url)
    survivors = [await WireClient.connect(broker.ws_url) for _ in range(2)]
    leaver = await WireClient.connect(broker.ws_url)
    try:
        await producer.open_producer(1, TOPIC, 0)
        sent = await produce(producer, 900)
        # The leaver subscribes alone and takes 40 messages it never acknowledges. When the
        # survivors join, the hashes they take over are draining behind those messages; then
        # the leaver drops its connection, which must hand everything over.
        await leaver.subscribe(1, TOPIC, 0, "sub", KEY_SHARED, name="leaver", permits=40)
        held = await leaver.receive_n(1, 40)
        for index, client in enumerate(survivors):
            await client.subscribe(1, TOPIC, 0, "sub", KEY_SHARED, name=f"c{index}", permits=40)
        _, stats = await broker.admin("GET", "/default/orders/0000-ffff-0/stats")
        assert stats["subscriptions"]["sub"]["dispatch"]["drainingHashesCount"] > 0  # type: ignore[index]
        await leaver.close()

        acked: dict[int, list[DeliveredMessage]] = {0: [], 1: []}

        async def consume(index: int, client: WireClient) -> None:
            while sum(len(a) for a in acked.values()) < len(sent):
                try:
                    message = await client.receive(1, timeout=0.5)
                except TimeoutError:
                    continue
                acked[index].append(message)
                await client.ack(1, message.message_id, receipt=False)
                await client.flow(1, 1)

        async with asyncio.timeout(60):
            await asyncio.gather(*(consume(i, c) for i, c in enumerate(survivors)))
        everything = [m.payload for messages in acked.values() for m in messages]
        assert len(everything) == len(set(everything)) == len(sent)  # all, each acked once
        assert {m.payload for m in held} <= set(everything)  # the leaver's messages came back
        redelivered = [m for messages in acked.values() for m in messages if m.redelivery_count]
        assert {m.payload for m in redelivered} == {m.payload for m in held}
        order = {payload: i for i, (_, payload) in enumerate(sent)}
        for messages in acked.values():
            by_key: dict[str, list[int]] = defaultdict(list)
            for message in messages:
                assert message.key in KEYS
                by_key[message.key].append(order[message.payload])
            for positions in by_key.values():
                assert positions == sorted(positions)
    finally:
        for client in [producer, *survivors]:
            await client.close()


async def test_admin_metrics_and_stats_report_the_subscription(broker: BrokerProcess) -> None:
    await make_segment(broker, subscriptions=["sub"])
    status, names = await broker.admin("GET", "/default/orders/0000-ffff-0/subscriptions")
    assert (status, names) == (200, ["sub"])
    assert (await broker.admin("PUT", "/default/orders/0000-ffff-0/subscriptions/extra", {}))[
        0
    ] == 201
    assert (await broker.admin("PUT", "/default/orders/0000-ffff-0/subscriptions/extra", {}))[
        0
    ] == 200
    assert (await broker.admin("DELETE", "/default/orders/0000-ffff-0/subscriptions/extra"))[
        0
    ] == 204
    assert (await broker.admin("DELETE", "/default/orders/0000-ffff-0/subscriptions/extra"))[
        0
    ] == 404
    client = await WireClient.connect(broker.ws_url)
    try:
        await client.open_producer(1, TOPIC, 0)
        await produce(client, 30)
        await client.subscribe(1, TOPIC, 0, "sub", KEY_SHARED, permits=10)
        await client.receive_n(1, 10)
        _, stats = await broker.admin("GET", "/default/orders/0000-ffff-0/stats")
        subscription = stats["subscriptions"]["sub"]  # type: ignore[index]
        assert subscription["type"] == "Key_Shared"
        assert subscription["consumers"] == 1
        dispatch = subscription["dispatch"]
        assert dispatch["consumers"][0]["pendingMessages"] == 10
        assert "drainingHashesCount" in dispatch
        import aiohttp

        async with aiohttp.ClientSession() as http, http.get(broker.url + "/metrics") as response:
            text = await response.text()
        assert (
            'st_segment_messages_in_total{namespace="default",segment="0",topic="orders"} 30.0'
            in text
        )
        assert (
            'st_subscription_draining_hashes_count{namespace="default",segment="0",subscription="sub"'
            in text
        )
    finally:
        await client.close()
    status, body = await broker.admin("DELETE", "/default/orders/0000-ffff-0")
    assert status == 204
    status, body = await broker.admin("DELETE", "/default/orders/0000-ffff-0")
    assert status == 404
    assert body["code"] == "SegmentNotFound"  # type: ignore[index]
