"""Kill the broker with SIGKILL while producers send and a consumer acks; nothing acknowledged
may be lost: every message whose receipt arrived is in the log, and no message whose ack was
confirmed is delivered again."""

from __future__ import annotations

import asyncio
import contextlib

import pytest
from dag_objects import AT, create_topic, put_segment

from scalable_topics.model.layout import SegmentLayout
from scalable_topics.protocol import BatchMessage, MessageId, SegmentSubscriptionType, SendReceipt
from scalable_topics.store import EmbeddedStore
from support.broker_process import BrokerProcess
from support.wire_client import WireClient

TOPIC = "default/orders"
ROUNDS = 3
PRODUCERS = 3


async def keep_producing(
    client: WireClient, producer_id: int, tag: str, acknowledged: set[bytes], stop: asyncio.Event
) -> None:
    sequence = 0
    while not stop.is_set():
        batch = [
            BatchMessage(f"{tag}-{sequence + i}".encode(), f"k{(sequence + i) % 7}")
            for i in range(5)
        ]
        try:
            reply = await asyncio.wait_for(client.send_batch(producer_id, sequence, batch), 5)
        except (TimeoutError, ConnectionError):
            return
        if not isinstance(reply, SendReceipt):
            return
        acknowledged.update(m.payload for m in batch)
        sequence += len(batch)


async def keep_consuming(
    client: WireClient, confirmed: set[MessageId], stop: asyncio.Event
) -> None:
    while not stop.is_set():
        try:
            message = await client.receive(1, timeout=5)
            await client.ack(1, message.message_id)  # with a receipt: durable once it returns
        except Exception:
            return
        confirmed.add(message.message_id)
        with contextlib.suppress(Exception):
            await client.flow(1, 1)


@pytest.mark.slow
async def test_acknowledged_messages_and_positions_survive_sigkill(broker: BrokerProcess) -> None:
    # The segment exists in the store as a controller makes it: a broker that comes back
    # removes the storage of segments that do not.
    async with await EmbeddedStore.open(broker.store_url.removeprefix("embedded://")) as store:
        layout = SegmentLayout.initial(1, AT)
        await create_topic(store, "default", "orders", layout)
        await put_segment(store, "default", "orders", layout.get(0), broker.ws_url)
    status, body = await broker.admin(
        "PUT", "/default/orders/0000-ffff-0", {"subscriptions": ["sub", "audit"]}
    )
    assert status == 201, body
    acknowledged: set[bytes] = set()
    confirmed_acks: set[MessageId] = set()
    for round_ in range(ROUNDS):
        stop = asyncio.Event()
        producers = [await WireClient.connect(broker.ws_url) for _ in range(PRODUCERS)]
        consumer = await WireClient.connect(broker.ws_url)
        for index, client in enumerate(producers):
            await client.open_producer(1, TOPIC, 0, name=f"round{round_}-p{index}")
        await consumer.subscribe(1, TOPIC, 0, "sub", SegmentSubscriptionType.SHARED, permits=20)
        tasks = [
            asyncio.create_task(keep_producing(c, 1, f"r{round_}p{i}", acknowledged, stop))
            for i, c in enumerate(producers)
        ]
        tasks.append(asyncio.create_task(keep_consuming(consumer, confirmed_acks, stop)))
        await asyncio.sleep(1.5)
        broker.kill()  # mid-stream: sends and acks are in flight
        stop.set()
        async with asyncio.timeout(30):
            await asyncio.gather(*tasks, return_exceptions=True)
        for client in [*producers, consumer]:
            await client.close()
        await broker.start()
        assert acknowledged, "no message was acknowledged before the kill"

        # Every acknowledged message is in the log: the untouched subscription reads them all.
        reader = await WireClient.connect(broker.ws_url)
        try:
            await reader.subscribe(
                7, TOPIC, 0, "audit", SegmentSubscriptionType.EXCLUSIVE, permits=100_000
            )
            seen: set[bytes] = set()
            async with asyncio.timeout(60):
                while not acknowledged <= seen:
                    seen.add((await reader.receive(7)).payload)

            # No confirmed ack is undone: a fresh consumer on "sub" never gets those again.
            await reader.subscribe(
                8, TOPIC, 0, "sub", SegmentSubscriptionType.SHARED, permits=100_000
            )
            redelivered: set[MessageId] = set()
            with contextlib.suppress(TimeoutError):
                while True:
                    redelivered.add((await reader.receive(8, timeout=1.0)).message_id)
            assert not redelivered & confirmed_acks
        finally:
            await reader.close()
        print(
            f"round {round_}: {len(acknowledged)} acknowledged messages, {len(confirmed_acks)} confirmed acks"
        )
