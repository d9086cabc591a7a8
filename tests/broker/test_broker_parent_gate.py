"""DESIGN guarantee 3 on the broker: an ordered subscription on a child segment dispatches
nothing until its parent is drained for that subscription, and the parent's broker records
the drained marker on the parent's Segment object."""

from __future__ import annotations

import asyncio
from pathlib import Path

from scalable_topics.model.resources import Segment, segment_object_name
from scalable_topics.protocol import BatchMessage, EndOfSegment, SegmentSubscriptionType
from scalable_topics.store import EmbeddedStore
from support.broker_process import BrokerProcess
from support.wire_client import WireClient

TOPIC = "default/orders"
PARENT, CHILD = "0000-ffff-0", "0000-7fff-1"


def segment_object(
    descriptor: str, segment_id: int, start: int, end: int, parents: list[int]
) -> dict[str, object]:
    return Segment.model_validate(
        {
            "metadata": {"name": segment_object_name("orders", descriptor), "namespace": "default"},
            "spec": {
                "topic": "orders",
                "segmentId": segment_id,
                "hashRange": {"start": start, "end": end},
                "parents": parents,
                "subscriptions": ["sub"],
            },
        }
    ).to_wire()


async def test_child_waits_for_the_parent_to_drain(broker: BrokerProcess, tmp_path: Path) -> None:
    async with await EmbeddedStore.open(tmp_path / "store.db") as store:
        await store.create(segment_object(PARENT, 0, 0, 0xFFFF, []))
        await store.create(segment_object(CHILD, 1, 0, 0x7FFF, [0]))
        assert (
            await broker.admin(
                "PUT", f"/default/orders/{PARENT}", {"subscriptions": ["sub", "queue"]}
            )
        )[0] == 201
        status, body = await broker.admin(
            "PUT", f"/default/orders/{CHILD}", {"subscriptions": ["sub", "queue"], "parents": [0]}
        )
        assert status == 201, body
        client = await WireClient.connect(broker.ws_url)
        try:
            await client.open_producer(1, TOPIC, 0)
            await client.send(1, 0, BatchMessage(b"parent-1", "k"), BatchMessage(b"parent-2", "k"))
            assert (await broker.admin("POST", f"/default/orders/{PARENT}/terminate"))[0] == 200
            await client.open_producer(2, TOPIC, 1)
            await client.send(2, 0, BatchMessage(b"child-1", "k"))

            await client.subscribe(1, TOPIC, 1, "sub", SegmentSubscriptionType.EXCLUSIVE)
            await client.subscribe(2, TOPIC, 1, "queue", SegmentSubscriptionType.SHARED)
            # Unordered subscriptions read every segment at once; ordered ones wait.
            assert (await client.receive(2)).payload == b"child-1"
            await asyncio.sleep(0.5)
            assert client.messages[1].empty()

            await client.subscribe(3, TOPIC, 0, "sub", SegmentSubscriptionType.EXCLUSIVE)
            parent_messages = await client.receive_n(3, 2)
            assert [m.payload for m in parent_messages] == [b"parent-1", b"parent-2"]
            await asyncio.sleep(0.3)
            assert client.messages[1].empty()  # one of two acked: still not drained
            await client.ack(3, parent_messages[1].message_id, cumulative=True)
            assert (await client.next_event(EndOfSegment)).consumer_id == 3
            assert (await client.receive(1)).payload == b"child-1"

            parent = await store.get(Segment.KIND, "default", segment_object_name("orders", PARENT))
            assert set(parent["status"]["drained"]) == {"sub"}
        finally:
            await client.close()
