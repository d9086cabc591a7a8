"""Fault injection: the leading controller process is killed with SIGKILL at every step boundary
of split and of merge; another controller process takes the lease and finishes the operation.
Afterwards the layout invariant holds, every Segment object matches the layout, and every
message acknowledged before the operation can still be read."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

from scalable_topics.model.layout import SegmentLayout
from scalable_topics.model.resources import TOPIC_LABEL, ScalableTopic, Segment
from scalable_topics.model.scale_request import (
    MERGE_ANNOTATION,
    REQUESTER_ANNOTATION,
    SPLIT_ANNOTATION,
)
from scalable_topics.protocol import BatchMessage, SegmentSubscriptionType
from scalable_topics.store import EmbeddedStore, NotFound
from support.broker_process import BrokerProcess
from support.controller_process import ControllerProcess
from support.eventually import eventually
from support.leases import topic_lease
from support.wire_client import WireClient

pytestmark = pytest.mark.slow

TOPIC = "default/orders"
BOUNDARIES = [
    "scale:planned",
    "scale:subscriptions-recorded",
    "scale:child-created",
    "scale:children-created",
    "scale:parent-terminated",
    "scale:parents-terminated",
    "scale:committed",
]
ROUNDS = [(kind, boundary) for boundary in BOUNDARIES for kind in ("split", "merge")]


async def test_a_controller_killed_at_any_step_boundary_is_replaced_and_the_operation_completes(
    tmp_path: Path,
) -> None:
    store_url = f"embedded://{tmp_path / 'store.db'}"
    broker = BrokerProcess(tmp_path, store_url)
    await broker.start()
    controllers: list[ControllerProcess] = []
    expected: dict[int, list[bytes]] = {}
    try:
        async with await EmbeddedStore.open(tmp_path / "store.db") as store:
            await store.create(
                ScalableTopic.model_validate(
                    {
                        "metadata": {"name": "orders", "namespace": "default"},
                        "spec": {
                            "initialSegments": 2,
                            "subscriptions": [{"name": "billing", "type": "Stream"}],
                        },
                    }
                ).to_wire()
            )

            async def topic() -> ScalableTopic:
                return ScalableTopic.model_validate(
                    await store.get(ScalableTopic.KIND, "default", "orders")
                )

            for index, (kind, boundary) in enumerate(ROUNDS):
                faulty = ControllerProcess(
                    tmp_path, store_url, f"faulty-{index}", failpoints=boundary
                )
                faulty.start()
                controllers.append(faulty)

                async def faulty_leads_a_settled_topic(identity: str = faulty.identity) -> bool:
                    try:
                        lease = await topic_lease(store, "default", "orders")
                    except NotFound:
                        return False
                    current = await topic()
                    return (
                        lease["spec"].get("holderIdentity") == identity
                        and current.status.phase == "Ready"
                        and current.status.pending_operation is None
                    )

                await eventually(faulty_leads_a_settled_topic, f"{faulty.identity} to lead")
                layout = SegmentLayout.from_status((await topic()).status.to_wire())
                await produce_to_every_active_segment(store, layout, index, expected)

                request = f"round-{index}"
                annotation, value = choose_operation(kind, layout)
                await store.patch(
                    ScalableTopic.KIND,
                    "default",
                    "orders",
                    {
                        "metadata": {
                            "annotations": {annotation: value, REQUESTER_ANNOTATION: request}
                        }
                    },
                )

                async def faulty_died(process: ControllerProcess = faulty) -> bool:
                    return process.exit_code is not None

                await eventually(faulty_died, f"{faulty.identity} to reach {boundary}")
                assert faulty.exit_code == -signal.SIGKILL, faulty.log()
                # Started only now: a replica that joined earlier would take its share of the
                # shards at once, and the topic's shard with it, before the faulty one reached
                # its failpoint.
                rescuer = ControllerProcess(tmp_path, store_url, f"rescuer-{index}")
                rescuer.start()
                controllers.append(rescuer)

                async def finished(request: str = request) -> bool:
                    current = await topic()
                    last = current.status.last_operation
                    return (
                        current.status.pending_operation is None
                        and last is not None
                        and last.requested_by == request
                        and not current.metadata.annotations
                    )

                await eventually(finished, f"the rescuer to finish {kind} after {boundary}")
                current = await topic()
                assert current.status.last_operation is not None
                assert current.status.last_operation.result == "Succeeded", (
                    current.status.last_operation.message
                )
                after = SegmentLayout.from_status(current.status.to_wire())
                after.check_invariants()
                assert after.epoch == layout.epoch + 1
                # The objects' states are recorded after the commit (or by the next lifecycle
                # pass, when the leader died right after it).
                await eventually(
                    lambda after=after: segments_match(store, after), "Segment states to settle"
                )
                await check_nothing_lost(store, after, expected, f"verify-{index}")
                rescuer.stop()
    finally:
        for controller in controllers:
            controller.kill()
        broker.stop()


def choose_operation(kind: str, layout: SegmentLayout) -> tuple[str, str]:
    if kind == "split":
        widest = max(layout.active, key=lambda s: s.hash_range.size)
        return SPLIT_ANNOTATION, str(widest.segment_id)
    first, second = layout.active[0], layout.active[1]
    return MERGE_ANNOTATION, f"{first.segment_id},{second.segment_id}"


async def segment_objects(store: EmbeddedStore) -> dict[int, Segment]:
    listing = await store.list(
        Segment.KIND, namespace="default", label_selector=f"{TOPIC_LABEL}=orders"
    )
    return {s.spec.segment_id: s for s in (Segment.model_validate(i) for i in listing.items)}


async def segments_match(store: EmbeddedStore, layout: SegmentLayout) -> bool:
    """One Segment object per segment of the layout (none orphaned), each in its state."""
    objects = await segment_objects(store)
    return sorted(objects) == sorted(layout.segments) and all(
        objects[segment_id].status.state == ("Active" if info.is_active else "Terminated")
        for segment_id, info in layout.segments.items()
    )


async def produce_to_every_active_segment(
    store: EmbeddedStore, layout: SegmentLayout, round_index: int, expected: dict[int, list[bytes]]
) -> None:
    objects = await segment_objects(store)
    for info in layout.active:
        broker_url = objects[info.segment_id].status.broker
        assert broker_url is not None
        client = await WireClient.connect(broker_url)
        try:
            await client.open_producer(1, TOPIC, info.segment_id)
            for n in range(5):
                payload = f"r{round_index}-s{info.segment_id}-{n}".encode()
                await client.send(1, n, BatchMessage(payload, key=f"k{n}"))
                expected.setdefault(info.segment_id, []).append(payload)
        finally:
            await client.close()


async def check_nothing_lost(
    store: EmbeddedStore,
    layout: SegmentLayout,
    expected: dict[int, list[bytes]],
    subscription: str,
) -> None:
    """Every acknowledged message of every segment still in the layout is readable, in order
    (a Shared subscription is not held back by the parents' drain gate)."""
    objects = await segment_objects(store)
    for segment_id in layout.segments:
        wanted = expected.get(segment_id, [])
        if not wanted:
            continue
        broker_url = objects[segment_id].status.broker
        assert broker_url is not None
        client = await WireClient.connect(broker_url)
        try:
            await client.subscribe(
                1, TOPIC, segment_id, subscription, SegmentSubscriptionType.SHARED
            )
            got = [m.payload for m in await client.receive_n(1, len(wanted))]
        finally:
            await client.close()
        assert got == wanted, f"segment {segment_id}"
