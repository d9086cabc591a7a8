"""The unacknowledged-message limits on a broker application on loopback, over the wire: what
consumers receive, and what the broker reports (the segment's stats), never the clock. Also the
redelivery path, which reads a message again from the log (the broker keeps no payload of a
message once it is sent)."""

from __future__ import annotations

import asyncio
import itertools
from collections import defaultdict
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, Protocol

import aiohttp
import pytest

from scalable_topics.protocol import BatchMessage, DeliveredMessage, SegmentSubscriptionType
from support.eventually import eventually
from support.servers import broker_servers
from support.wire_client import WireClient

TOPIC = "default/orders"
SEGMENT = "/admin/v1/segments/default/orders/0000-ffff-0"


class Broker:
    def __init__(self, url: str) -> None:
        self.url = url

    async def admin(self, method: str, path: str = "", body: object | None = None) -> Any:
        async with (
            aiohttp.ClientSession() as http,
            http.request(method, f"http://{self.url}{SEGMENT}{path}", json=body) as response,
        ):
            assert response.status < 300, await response.text()
            return await response.json()

    async def dispatch(self) -> dict[str, Any]:
        """The subscription's dispatch stats (consumers, pending, blocked flags)."""
        stats = await self.admin("GET", "/stats")
        dispatch: dict[str, Any] = stats["subscriptions"]["sub"]["dispatch"]
        return dispatch

    async def metrics(self) -> str:
        async with (
            aiohttp.ClientSession() as http,
            http.get(f"http://{self.url}/metrics") as response,
        ):
            return await response.text()

    async def client(self) -> WireClient:
        return await WireClient.connect(f"ws://{self.url}")


class StartBroker(Protocol):
    async def __call__(self, **settings: int) -> Broker: ...


@pytest.fixture
async def start_broker(tmp_path: Path) -> AsyncIterator[StartBroker]:
    async with broker_servers(tmp_path) as start_server:

        async def start(**settings: int) -> Broker:
            server = await start_server(**settings)
            broker = Broker(f"127.0.0.1:{server.port}")
            await broker.admin("PUT", body={"subscriptions": ["sub"]})
            return broker

        yield start


KEYS = [f"key-{n}" for n in range(12)]


async def produce(broker: Broker, count: int, batch: int = 10) -> list[tuple[str, bytes]]:
    """``count`` keyed messages in batches of ``batch`` (several messages per log entry)."""
    client = await broker.client()
    sent: list[tuple[str, bytes]] = []
    try:
        await client.open_producer(1, TOPIC, 0)
        for sequence in range(0, count, batch):
            messages = []
            for n in range(sequence, min(sequence + batch, count)):
                key = KEYS[n % len(KEYS)]
                messages.append(BatchMessage(f"{key}:{n}".encode(), key))
                sent.append((key, f"{key}:{n}".encode()))
            await client.send(1, sequence, *messages)
    finally:
        await client.close()
    return sent


async def receive_available(client: WireClient, consumer_id: int) -> list[DeliveredMessage]:
    """What has arrived so far, without waiting for more."""
    queue = client.messages[consumer_id]
    return [message for _ in range(queue.qsize()) if (message := queue.get_nowait()) is not None]


async def test_a_consumer_that_never_acks_gets_exactly_its_limit_and_more_after_acks(
    start_broker: StartBroker,
) -> None:
    broker = await start_broker(max_unacked_messages_per_consumer=20)
    await produce(broker, 100)
    client = await broker.client()
    try:
        await client.subscribe(1, TOPIC, 0, "sub", SegmentSubscriptionType.EXCLUSIVE, permits=1000)
        first = await client.receive_n(1, 20)
        (consumer,) = (await broker.dispatch())["consumers"]
        assert consumer["pendingMessages"] == 20 and consumer["blockedOnUnacked"]
        assert consumer["permits"] == 980  # kept, not spent
        metrics = await broker.metrics()
        assert "st_subscription_unacked_messages{" in metrics
        assert _sample(metrics, "st_subscription_consumers_blocked_on_unacked") == 1
        assert _sample(metrics, "st_subscription_unacked_messages") == 20
        assert await receive_available(client, 1) == []
        await client.ack(1, *(m.message_id for m in first[:9]))  # 11 held: still blocked
        assert (await broker.dispatch())["consumers"][0]["pendingMessages"] == 11
        await client.ack(1, first[9].message_id)  # 10 held: half, resumes up to the limit
        more = await client.receive_n(1, 10)
        assert [m.payload for m in more] == [f"{KEYS[n % 12]}:{n}".encode() for n in range(20, 30)]
        await eventually(
            lambda: _blocked_with(broker, 20), "the consumer blocked again at 20 unacked"
        )
    finally:
        await client.close()


def _sample(metrics: str, name: str) -> float:
    """The value of the one sample of ``name`` (one subscription on the broker)."""
    (line,) = [line for line in metrics.splitlines() if line.startswith(name + "{")]
    return float(line.rsplit(" ", 1)[1])


async def _blocked_with(broker: Broker, pending: int) -> bool:
    (consumer,) = (await broker.dispatch())["consumers"]
    return bool(consumer["pendingMessages"] == pending and consumer["blockedOnUnacked"])


async def test_the_subscription_limit_holds_across_two_consumers(
    start_broker: StartBroker,
) -> None:
    broker = await start_broker(
        max_unacked_messages_per_consumer=25, max_unacked_messages_per_subscription=30
    )
    await produce(broker, 200)
    clients = [await broker.client() for _ in range(2)]
    try:
        for index, client in enumerate(clients):
            await client.subscribe(
                1, TOPIC, 0, "sub", SegmentSubscriptionType.SHARED, name=f"c{index}", permits=500
            )

        async def held_by_subscription() -> bool:
            dispatch = await broker.dispatch()
            return bool(dispatch["unackedMessages"] == 30 and dispatch["blockedOnUnacked"])

        await eventually(held_by_subscription, "30 messages unacked over both consumers")
        received = [await receive_available(client, 1) for client in clients]
        assert sum(len(messages) for messages in received) == 30
        assert all(len(messages) <= 25 for messages in received)
        # Acks through both consumers bring the subscription to half (15): it resumes.
        acked = 0
        for client, messages in zip(clients, received, strict=True):
            take = messages[: 15 - acked]
            if take:
                await client.ack(1, *(m.message_id for m in take))
                acked += len(take)
        await eventually(held_by_subscription, "30 unacked again after the acks")
        later = [await receive_available(client, 1) for client in clients]
        assert sum(len(messages) for messages in later) == 15
    finally:
        for client in clients:
            await client.close()


async def test_key_shared_keeps_per_key_order_under_the_limits(start_broker: StartBroker) -> None:
    broker = await start_broker(
        max_unacked_messages_per_consumer=4, max_unacked_messages_per_subscription=6
    )
    sent = await produce(broker, 240)
    clients = [await broker.client() for _ in range(3)]
    received: dict[int, list[DeliveredMessage]] = defaultdict(list)
    done = asyncio.Event()

    async def consume(index: int, client: WireClient) -> None:
        """Acks each message a while after it came (after the next one arrives, or at a
        quiet moment), so the limits keep biting."""
        await client.subscribe(
            1, TOPIC, 0, "sub", SegmentSubscriptionType.KEY_SHARED, name=f"c{index}", permits=500
        )
        held: list[DeliveredMessage] = []
        while not done.is_set():
            try:
                message = await client.receive(1, timeout=0.2)
            except TimeoutError:
                message = None
            if message is not None:
                received[index].append(message)
                held.append(message)
            if len(held) > 2 or (message is None and held):
                await client.ack(1, held.pop(0).message_id, receipt=False)
            if sum(len(messages) for messages in received.values()) >= len(sent):
                done.set()

    try:
        readers = [asyncio.create_task(consume(0, clients[0]))]
        await eventually(lambda: len(received[0]) >= 20, "the first consumer under way")
        # Two more join: hashes move, and drain from the first consumer before they go.
        readers += [asyncio.create_task(consume(i, clients[i])) for i in (1, 2)]
        async with asyncio.timeout(60):
            await done.wait()
        for reader in readers:
            reader.cancel()
        await asyncio.gather(*readers, return_exceptions=True)
        everything = [m for messages in received.values() for m in messages]
        assert sorted(m.payload for m in everything) == sorted(p for _, p in sent)
        order = {payload: n for n, (_, payload) in enumerate(sent)}
        for messages in received.values():
            by_key: dict[str | None, list[int]] = defaultdict(list)
            for message in messages:
                by_key[message.key].append(order[message.payload])
            for key, sequence in by_key.items():
                assert sequence == sorted(sequence), key
        # Along the order of sending, each key moved from one consumer to another at most
        # twice (two joins), and only once its earlier messages were acknowledged.
        owner = {m.payload: i for i, messages in received.items() for m in messages}
        for key in KEYS:
            owners = [owner[p] for k, p in sent if k == key]
            assert sum(1 for a, b in itertools.pairwise(owners) if a != b) <= 2, (key, owners)
    finally:
        for client in clients:
            await client.close()


async def test_redelivered_messages_are_read_again_from_the_log(start_broker: StartBroker) -> None:
    broker = await start_broker()
    sent = await produce(broker, 50, batch=7)
    first = await broker.client()
    second = await broker.client()
    try:
        # The second consumer stays attached (with no permits yet), so the subscription keeps
        # what it dispatched when the first one leaves.
        await second.subscribe(1, TOPIC, 0, "sub", SegmentSubscriptionType.SHARED, permits=0)
        await first.subscribe(1, TOPIC, 0, "sub", SegmentSubscriptionType.SHARED, permits=30)
        taken = await first.receive_n(1, 30)
        await first.ack(1, *(m.message_id for m in taken[::2]))  # every other one
        await first.close()  # the other 15 go back, to be read again from the log
        await second.flow(1, 100)
        rest = await second.receive_n(1, 35)
        again = [m for m in rest if m.redelivery_count == 1]
        assert sorted(m.payload for m in again) == sorted(m.payload for m in taken[1::2])
        assert all(m.key is not None and m.payload.startswith(m.key.encode()) for m in rest)
        assert sorted(m.payload for m in [*taken[::2], *rest]) == sorted(p for _, p in sent)
        await second.ack(1, *(m.message_id for m in rest))
        assert (await broker.admin("GET", "/stats"))["subscriptions"]["sub"]["backlog"] == 0
    finally:
        await second.close()
