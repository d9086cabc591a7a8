"""Split and merge against the embedded store and two real broker applications on loopback.

A leader that "dies" at a step boundary is simulated in-process by a failpoint that raises;
tests/controller/test_scaling_faults.py does the same with SIGKILL and real processes.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, cast

import aiohttp
import pytest
from aiohttp.test_utils import TestServer
from topic_cluster import controller_informers, until_cached

from scalable_topics.admin.broker_admin import BrokerAdmin
from scalable_topics.admin.scale_requests import OperationInProgress, request_scaling
from scalable_topics.controller import scaling
from scalable_topics.controller.brokers import registered_brokers
from scalable_topics.controller.lifecycle import LeaderIdentity, TopicLifecycle
from scalable_topics.controller.scaling import TopicScaler
from scalable_topics.model.clock import SystemClock
from scalable_topics.model.layout import ChangeKind, SegmentLayout
from scalable_topics.model.resources import (
    TOPIC_LABEL,
    LastOperation,
    OperationResult,
    ScalableTopic,
    Segment,
)
from scalable_topics.model.scale_request import (
    MERGE_ANNOTATION,
    REQUESTER_ANNOTATION,
    SPLIT_ANNOTATION,
    request_annotations,
)
from scalable_topics.protocol import BatchMessage, SegmentSubscriptionType
from scalable_topics.store import Conflict, EmbeddedStore, NotFound, Store
from scalable_topics.store.informers import Informers
from scalable_topics.store.kinds import EVENT
from scalable_topics.tasks import cancel_and_wait
from support.wire_client import WireClient

TOPIC = "default/orders"


class LeaderDied(Exception):
    pass


@dataclass
class Cluster:
    store: Store  # writes through the informers
    informers: Informers
    admin: BrokerAdmin
    http: aiohttp.ClientSession
    broker_urls: list[str]
    term: int = 0

    def leader(self) -> tuple[TopicLifecycle, TopicScaler]:
        """A new leader (a higher term), as after a failover."""
        self.term += 1
        clock = SystemClock()
        identity = LeaderIdentity(f"controller-{self.term}", None, self.term)
        lifecycle = TopicLifecycle(
            self.store, self.informers, self.admin, clock, identity, "scalable-topics"
        )
        scaler = TopicScaler(
            self.store, self.informers, self.admin, clock, lifecycle, lifecycle.events
        )
        return lifecycle, scaler

    async def caught_up(self) -> None:
        """Wait until the controller's informers show the topic and its segments as the store
        has them now (writes of brokers and of the test itself arrive through watches)."""
        try:
            await until_cached(
                self.informers, await self.store.get(ScalableTopic.KIND, "default", "orders")
            )
        except NotFound:
            async with asyncio.timeout(20):
                while self.informers.topics.get("default", "orders") is not None:
                    await asyncio.sleep(0.005)
        for segment in (await self.store.list(Segment.KIND, namespace="default")).items:
            await until_cached(self.informers, segment)

    async def settle(self) -> ScalableTopic:
        await self.caught_up()
        lifecycle, scaler = self.leader()
        assert await lifecycle.reconcile("default", "orders")
        await scaler.advance("default", "orders")
        return await self.topic()  # no second pass: its GC would prune drained parents

    async def topic(self) -> ScalableTopic:
        return ScalableTopic.model_validate(
            await self.store.get(ScalableTopic.KIND, "default", "orders")
        )

    async def segments(self) -> dict[int, Segment]:
        listing = await self.store.list(
            Segment.KIND, namespace="default", label_selector=f"{TOPIC_LABEL}=orders"
        )
        segments = [Segment.model_validate(item) for item in listing.items]
        return {s.spec.segment_id: s for s in segments}

    async def request(self, annotation: str, value: str) -> None:
        await self.store.patch(
            ScalableTopic.KIND,
            "default",
            "orders",
            {"metadata": {"annotations": {annotation: value}}},
        )
        await self.caught_up()

    async def events(self) -> list[tuple[str, str, str]]:
        listing = await self.store.list(EVENT.kind, namespace="default")
        return [(e["type"], e["reason"], e["message"]) for e in listing.items]


@pytest.fixture
async def cluster(tmp_path: Path, make_broker: Callable[..., TestServer]) -> AsyncIterator[Cluster]:
    async with (
        await EmbeddedStore.open(tmp_path / "store.db") as raw_store,
        aiohttp.ClientSession() as http,
        controller_informers(raw_store) as (store, informers),
    ):
        servers = []
        for index in range(2):
            server = make_broker(raw_store, f"b{index}")
            await server.start_server()
            servers.append(server)
        async with asyncio.timeout(20):
            while len(registered_brokers(informers)) < 2:
                await asyncio.sleep(0.01)
        try:
            yield Cluster(
                store,
                informers,
                BrokerAdmin(http),
                http,
                [f"ws://127.0.0.1:{s.port}" for s in servers],
            )
        finally:
            for server in servers:
                await server.close()


async def create_topic(cluster: Cluster, initial: int = 2) -> ScalableTopic:
    manifest = ScalableTopic.model_validate(
        {
            "metadata": {"name": "orders", "namespace": "default"},
            "spec": {
                "initialSegments": initial,
                "subscriptions": [{"name": "billing", "type": "Stream"}],
            },
        }
    ).to_wire()
    await cluster.store.create(manifest)
    return await cluster.settle()


async def produce(cluster: Cluster, segment: Segment, count: int) -> None:
    assert segment.status.broker is not None
    client = await WireClient.connect(segment.status.broker)
    try:
        await client.open_producer(1, TOPIC, segment.spec.segment_id, name="loader")
        for index in range(count):
            await client.send(1, index, BatchMessage(f"m{index}".encode(), key=f"k{index}"))
    finally:
        await client.close()


async def read_all(segment: Segment, subscription: str, count: int) -> list[bytes]:
    assert segment.status.broker is not None
    client = await WireClient.connect(segment.status.broker)
    try:
        await client.subscribe(
            1, TOPIC, segment.spec.segment_id, subscription, SegmentSubscriptionType.EXCLUSIVE
        )
        return [m.payload for m in await client.receive_n(1, count)]
    finally:
        await client.close()


def layout_of(topic: ScalableTopic) -> SegmentLayout:
    return SegmentLayout.from_status(topic.status.to_wire())


async def test_a_split_creates_children_with_the_parents_subscriptions_then_seals_the_parent(
    cluster: Cluster,
) -> None:
    await create_topic(cluster)
    parent = (await cluster.segments())[0]
    assert parent.status.broker is not None
    # A subscription made on the segment alone must reach the children too (seed: step 1).
    await cluster.admin.create_subscription(
        parent.status.broker, "default", "orders", "0000-7fff-0", "audit"
    )
    await produce(cluster, parent, 20)

    await cluster.request(SPLIT_ANNOTATION, "0")
    topic = await cluster.settle()

    layout = layout_of(topic)
    assert layout.epoch == 1
    assert [(s.segment_id, s.hash_range.start, s.hash_range.end) for s in layout.active] == [
        (2, 0x0000, 0x3FFF),
        (3, 0x4000, 0x7FFF),
        (1, 0x8000, 0xFFFF),
    ]
    assert layout.get(0).child_ids == (2, 3)
    assert topic.status.pending_operation is None
    assert SPLIT_ANNOTATION not in topic.metadata.annotations
    last = topic.status.last_operation
    assert last is not None and (last.kind, last.result, last.child_ids, last.epoch) == (
        "Split",
        "Succeeded",
        [2, 3],
        1,
    )
    scaling_condition = [c for c in topic.status.conditions if c.type == "Scaling"]
    assert [(c.status, c.reason) for c in scaling_condition] == [("False", "Succeeded")]
    assert topic.status.phase == "Ready" and topic.status.active_segments == 3

    segments = await cluster.segments()
    assert segments[0].status.state == "Terminated" and segments[0].status.last_entry_id == 19
    for child_id in (2, 3):
        child = segments[child_id]
        assert child.status.state == "Active" and child.spec.parents == [0]
        assert child.spec.subscriptions == ["audit", "billing"]
        assert child.status.broker is not None
        assert await cluster.admin.subscriptions(
            child.status.broker, "default", "orders", child.metadata.name.removeprefix("orders-")
        ) == ["audit", "billing"]
    # Every message acknowledged before the split is still there, in order.
    assert await read_all(segments[0], "billing", 20) == [f"m{i}".encode() for i in range(20)]
    reasons = [(kind, reason) for kind, reason, _ in await cluster.events()]
    assert ("Normal", "Split") in reasons
    # The split cooldown starts in the write that committed the layout (finding 6).
    topic = await cluster.topic()
    assert topic.status.auto_scale is not None and topic.status.last_operation is not None
    assert topic.status.auto_scale.last_split_time == topic.status.last_operation.finished_at
    assert topic.status.auto_scale.last_merge_time is None


async def test_a_merge_of_adjacent_segments_seals_both_and_unions_their_subscriptions(
    cluster: Cluster,
) -> None:
    await create_topic(cluster)
    segments = await cluster.segments()
    assert segments[1].status.broker is not None
    await cluster.admin.create_subscription(
        segments[1].status.broker, "default", "orders", "8000-ffff-1", "audit"
    )
    await cluster.request(MERGE_ANNOTATION, "1,0")
    topic = await cluster.settle()
    layout = layout_of(topic)
    assert [(s.segment_id, s.parent_ids) for s in layout.active] == [(2, (0, 1))]
    assert layout.active[0].hash_range.start == 0 and layout.active[0].hash_range.end == 0xFFFF
    segments = await cluster.segments()
    assert {segments[0].status.state, segments[1].status.state} == {"Terminated"}
    assert segments[2].spec.subscriptions == ["audit", "billing"]
    assert segments[2].spec.parents == [0, 1]
    last = topic.status.last_operation
    assert last is not None and (last.kind, last.result) == ("Merge", "Succeeded")
    auto_scale = topic.status.auto_scale
    assert auto_scale is not None and auto_scale.last_merge_time == last.finished_at
    assert auto_scale.last_split_time is None


async def test_a_merge_whose_child_would_hold_too_many_subscriptions_is_rolled_back(
    cluster: Cluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each parent holds what consumers created on it: the union may pass what a segment is
    created with (MAX_SEGMENT_SUBSCRIPTIONS, 3 here): refused before anything is sealed."""
    monkeypatch.setattr(scaling, "MAX_SEGMENT_SUBSCRIPTIONS", 3)
    await create_topic(cluster)  # billing
    segments = await cluster.segments()
    for segment_id, name in ((0, "audit"), (0, "replay"), (1, "trace")):
        broker = segments[segment_id].status.broker
        assert broker is not None
        descriptor = segments[segment_id].metadata.name.removeprefix("orders-")
        await cluster.admin.create_subscription(broker, "default", "orders", descriptor, name)
    await cluster.request(MERGE_ANNOTATION, "0,1")
    topic = await cluster.settle()
    last = topic.status.last_operation
    assert last is not None and (last.kind, last.result) == ("Merge", "RolledBack")
    assert last.message.endswith(
        "the parents hold 4 subscriptions between them, more than a segment takes (3): "
        "delete some first"
    )
    assert topic.status.epoch == 0 and sorted(await cluster.segments()) == [0, 1]
    assert {s.status.state for s in (await cluster.segments()).values()} == {"Active"}


async def test_the_next_request_written_as_the_answered_one_is_cleared_keeps_its_requester(
    cluster: Cluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The admin API asks again the moment it sees its answer, which can be just before the
    controller clears the answered request: the new requester must survive the clearing."""
    await create_topic(cluster)
    await cluster.store.patch(
        ScalableTopic.KIND,
        "default",
        "orders",
        {"metadata": {"annotations": {SPLIT_ANNOTATION: "0", REQUESTER_ANNOTATION: "first"}}},
    )
    patch = cluster.store.patch
    asked_again = False

    async def ask_again_just_before_clearing(*args: Any, **options: Any) -> Any:
        nonlocal asked_again
        annotations = args[3].get("metadata", {}).get("annotations", {})
        if not asked_again and SPLIT_ANNOTATION in annotations:
            asked_again = True
            # As the admin API writes it: the answered split's annotation goes too.
            await patch(
                ScalableTopic.KIND,
                "default",
                "orders",
                {
                    "metadata": {
                        "annotations": request_annotations(ChangeKind.MERGE, (2, 3), "second")
                    }
                },
            )
        return await patch(*args, **options)

    monkeypatch.setattr(cluster.store, "patch", ask_again_just_before_clearing)
    await cluster.settle()
    topic = await cluster.settle()
    assert asked_again
    last = topic.status.last_operation
    assert last is not None
    assert (last.kind, last.parent_ids, last.result) == ("Merge", [2, 3], "Succeeded")
    assert last.requested_by == "second"
    assert not topic.metadata.annotations


async def test_the_same_request_asked_again_as_the_answered_one_is_cleared_is_answered_too(
    cluster: Cluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The next requester asks for what was just answered (same annotation, same value): the
    clearing of the answered one must not take the new one's annotation and leave its
    requester waiting for an answer that never comes."""
    await create_topic(cluster)
    await cluster.store.patch(
        ScalableTopic.KIND,
        "default",
        "orders",
        {"metadata": {"annotations": request_annotations(ChangeKind.SPLIT, (0,), "first")}},
    )
    patch = cluster.store.patch
    asked_again = False

    async def ask_again_just_before_clearing(*args: Any, **options: Any) -> Any:
        nonlocal asked_again
        annotations = args[3].get("metadata", {}).get("annotations", {})
        if not asked_again and SPLIT_ANNOTATION in annotations:
            asked_again = True
            again = request_annotations(ChangeKind.SPLIT, (0,), "second")
            await patch(
                ScalableTopic.KIND, "default", "orders", {"metadata": {"annotations": again}}
            )
        return await patch(*args, **options)

    monkeypatch.setattr(cluster.store, "patch", ask_again_just_before_clearing)
    await cluster.settle()
    topic = await cluster.settle()
    assert asked_again
    last = topic.status.last_operation
    assert last is not None
    assert (last.requested_by, last.result) == ("second", "Rejected")
    assert last.message == "cannot split segment 0: it is sealed"
    assert not topic.metadata.annotations


@pytest.mark.parametrize(
    ("annotation", "value", "reason"),
    [
        (SPLIT_ANNOTATION, "7", "segment 7 does not exist"),
        (MERGE_ANNOTATION, "0,0", "cannot merge segment 0 with itself"),
        (MERGE_ANNOTATION, "0", "expected two segment ids"),
        (SPLIT_ANNOTATION, "zero", "expected one segment id"),
    ],
)
async def test_an_impossible_request_is_refused_with_its_reason_and_changes_nothing(
    cluster: Cluster, annotation: str, value: str, reason: str
) -> None:
    before = await create_topic(cluster)
    await cluster.request(annotation, value)
    topic = await cluster.settle()
    assert topic.status.segments == before.status.segments and topic.status.epoch == 0
    assert annotation not in topic.metadata.annotations
    last = topic.status.last_operation
    assert last is not None and last.result == "Rejected" and reason in last.message
    assert sorted(await cluster.segments()) == [0, 1]
    assert any(r == "ScalingRejected" and reason in m for _, r, m in await cluster.events())


async def test_a_sealed_segment_cannot_be_split_again(cluster: Cluster) -> None:
    await create_topic(cluster)
    await produce(cluster, (await cluster.segments())[0], 1)  # unconsumed: GC keeps it
    await cluster.request(SPLIT_ANNOTATION, "0")
    await cluster.settle()
    await cluster.request(SPLIT_ANNOTATION, "2")
    await cluster.settle()
    await cluster.request(MERGE_ANNOTATION, "0,1")
    topic = await cluster.settle()
    last = topic.status.last_operation
    assert last is not None and last.result == "Rejected"
    assert last.message == "cannot merge segment 0: it is sealed"
    assert topic.status.epoch == 2


async def test_an_operation_records_the_subscriptions_it_read_and_its_children_get_those(
    cluster: Cluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Step 1 of the seed is done once: the subscriptions read are written into the intent
    before any child exists, and a leader that takes over makes every child with exactly
    them, never with a list read again later."""
    await create_topic(cluster)
    parent = (await cluster.segments())[0]
    assert parent.status.broker is not None
    await cluster.admin.create_subscription(
        parent.status.broker, "default", "orders", "0000-7fff-0", "audit"
    )
    await cluster.request(SPLIT_ANNOTATION, "0")
    die_at(monkeypatch, "scale:child-created")
    _, scaler = cluster.leader()
    with pytest.raises(LeaderDied):
        await scaler.advance("default", "orders")
    pending = (await cluster.topic()).status.pending_operation
    assert pending is not None and pending.subscriptions == ["audit", "billing"]

    # Made on the parent after the operation read its subscriptions.
    await cluster.admin.create_subscription(
        parent.status.broker, "default", "orders", "0000-7fff-0", "late"
    )
    monkeypatch.setattr(scaling, "failpoint", lambda name: None)
    topic = await cluster.settle()
    assert layout_of(topic).epoch == 1
    segments = await cluster.segments()
    for child_id in (2, 3):
        child = segments[child_id]
        assert child.spec.subscriptions == ["audit", "billing"]
        assert child.status.broker is not None
        assert await cluster.admin.subscriptions(
            child.status.broker, "default", "orders", child.metadata.name.removeprefix("orders-")
        ) == ["audit", "billing"]


BOUNDARIES = [
    "scale:planned",
    "scale:subscriptions-recorded",
    "scale:child-created",
    "scale:children-created",
    "scale:parent-terminated",
    "scale:parents-terminated",
    "scale:committed",
]


def die_at(monkeypatch: pytest.MonkeyPatch, boundary: str) -> None:
    def failpoint(name: str) -> None:
        if name == boundary:
            raise LeaderDied(name)

    monkeypatch.setattr(scaling, "failpoint", failpoint)


@pytest.mark.parametrize("boundary", BOUNDARIES)
@pytest.mark.parametrize("kind", ["split", "merge"])
async def test_a_new_leader_finishes_an_operation_its_predecessor_died_in(
    cluster: Cluster, monkeypatch: pytest.MonkeyPatch, boundary: str, kind: str
) -> None:
    await create_topic(cluster)
    segments = await cluster.segments()
    await produce(cluster, segments[0], 10)
    await produce(cluster, segments[1], 10)
    if kind == "split":
        await cluster.request(SPLIT_ANNOTATION, "1")
    else:
        await cluster.request(MERGE_ANNOTATION, "0,1")

    die_at(monkeypatch, boundary)
    _, scaler = cluster.leader()
    with pytest.raises(LeaderDied):
        await scaler.advance("default", "orders")
    monkeypatch.setattr(scaling, "failpoint", lambda name: None)

    topic = await cluster.settle()
    layout = layout_of(topic)
    layout.check_invariants()
    assert layout.epoch == 1
    assert topic.status.pending_operation is None and not topic.metadata.annotations
    last = topic.status.last_operation
    assert last is not None and last.result == "Succeeded"
    segments = await cluster.segments()
    assert sorted(segments) == sorted(layout.segments)  # no orphaned child objects
    for segment_id, info in layout.segments.items():
        assert segments[segment_id].status.state == ("Active" if info.is_active else "Terminated")
    for parent_id in (0, 1):
        payloads = await read_all(segments[parent_id], "billing", 10)
        assert payloads == [f"m{i}".encode() for i in range(10)]


async def test_a_deposed_leaders_late_write_is_refused(cluster: Cluster) -> None:
    await create_topic(cluster)
    await cluster.request(SPLIT_ANNOTATION, "0")
    stale = await cluster.topic()  # what the old leader read
    await cluster.settle()  # a newer leader carried the request out
    _, old_scaler = cluster.leader()
    with pytest.raises(Conflict):
        await old_scaler._write_status(stale, pending_operation=None)
    assert (await cluster.topic()).status.epoch == 1


async def test_an_operation_that_cannot_proceed_is_rolled_back_before_any_parent_is_sealed(
    cluster: Cluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    await create_topic(cluster)
    await cluster.request(SPLIT_ANNOTATION, "0")
    die_at(monkeypatch, "scale:child-created")
    _, scaler = cluster.leader()
    with pytest.raises(LeaderDied):
        await scaler.advance("default", "orders")
    monkeypatch.setattr(scaling, "failpoint", lambda name: None)
    # The parent's broker lost its disk meanwhile: the split can no longer be carried out.
    parent = (await cluster.segments())[0]
    assert parent.status.broker is not None
    assert await cluster.admin.delete_segment(
        parent.status.broker, "default", "orders", "0000-7fff-0"
    )
    _, scaler = cluster.leader()
    await scaler.advance("default", "orders")
    topic = await cluster.topic()
    assert topic.status.pending_operation is None and topic.status.epoch == 0
    last = topic.status.last_operation
    assert last is not None and last.result == "RolledBack"
    assert "storage is gone" in last.message
    assert topic.status.auto_scale is None  # a failed split starts no cooldown (finding 6)
    assert sorted(await cluster.segments()) == [0, 1]  # the children's objects are gone
    for url in cluster.broker_urls:
        for descriptor in ("0000-3fff-2", "4000-7fff-3"):
            assert not await cluster.admin.delete_segment(url, "default", "orders", descriptor)


async def test_deleting_a_topic_in_the_middle_of_a_split_leaves_nothing_behind(
    cluster: Cluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    await create_topic(cluster)
    await cluster.request(SPLIT_ANNOTATION, "0")
    die_at(monkeypatch, "scale:children-created")
    lifecycle, scaler = cluster.leader()
    with pytest.raises(LeaderDied):
        await scaler.advance("default", "orders")
    assert sorted(await cluster.segments()) == [0, 1, 2, 3]  # children exist, layout unchanged
    await cluster.store.delete(ScalableTopic.KIND, "default", "orders")
    await cluster.caught_up()
    lifecycle, scaler = cluster.leader()
    assert await lifecycle.reconcile("default", "orders")
    await scaler.advance("default", "orders")  # nothing to do for a deleted topic
    assert (await cluster.store.list(ScalableTopic.KIND)).items == []
    assert (await cluster.store.list(Segment.KIND)).items == []
    for url in cluster.broker_urls:
        listing: Any = await (
            await cluster.http.get(url.replace("ws://", "http://") + "/admin/v1/segments")
        ).json()
        assert listing == []


class ReadsBeforeWriting:
    """The store as one requester sees it: its first read of the topic waits until the other
    requester has read too, so both check the topic before either asks."""

    def __init__(self, store: EmbeddedStore, both_read: asyncio.Barrier) -> None:
        self._store = store
        self._both_read = both_read
        self._first = True

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)

    async def get(self, kind: str, namespace: str, name: str) -> dict[str, Any]:
        raw = await self._store.get(kind, namespace, name)
        if self._first:
            self._first = False
            await self._both_read.wait()
        return raw


async def answer_requests(cluster: Cluster) -> None:
    """A leader that takes requests whenever the topic changes, as the manager does."""
    _, scaler = cluster.leader()
    async with cluster.store.watch(ScalableTopic.KIND, "default") as events:
        async for _ in events:
            with contextlib.suppress(Conflict):
                await scaler.advance("default", "orders")


async def test_of_two_concurrent_requests_one_runs_and_the_other_is_refused_naming_it(
    cluster: Cluster,
) -> None:
    """Both callers check the topic before either writes: the second write must not overwrite
    the first (both told OK, one run, a merge caller handed the split's outcome)."""
    await create_topic(cluster)
    both_read = asyncio.Barrier(2)
    asked = {ChangeKind.SPLIT: (0,), ChangeKind.MERGE: (0, 1)}
    leader = asyncio.create_task(answer_requests(cluster))
    try:
        answers = await asyncio.gather(
            *(
                request_scaling(
                    cast(Store, ReadsBeforeWriting(cluster.store, both_read)),
                    "default",
                    "orders",
                    kind,
                    ids,
                    wait_seconds=30,
                )
                for kind, ids in asked.items()
            ),
            return_exceptions=True,
        )
    finally:
        await cancel_and_wait(leader)
    outcomes = dict(zip(asked, answers, strict=True))
    ran = {kind: a for kind, a in outcomes.items() if isinstance(a, LastOperation)}
    refused = {kind: a for kind, a in outcomes.items() if not isinstance(a, LastOperation)}
    assert len(ran) == 1 and len(refused) == 1, outcomes
    [(kind, answer)] = ran.items()
    [refusal] = refused.values()
    # The caller that ran got its own operation's outcome, and the other a refusal naming it.
    assert (answer.kind, answer.parent_ids, answer.result) == (
        kind.value,
        list(asked[kind]),
        "Succeeded",
    )
    assert isinstance(refusal, OperationInProgress), refusal
    assert (refusal.occupant.kind, refusal.occupant.segment_ids) == (kind.value, asked[kind])
    assert refusal.occupant.requested_by == answer.requested_by
    assert str(refusal).startswith("an operation is in progress on topic default/orders: ")
    topic = await cluster.topic()
    assert layout_of(topic).epoch == 1  # one operation ran


async def test_a_requester_gets_its_answer_even_when_the_next_operation_replaced_it(
    cluster: Cluster,
) -> None:
    """lastOperation holds one answer: the next request's can replace it before the first
    requester looks. The requester follows every version of the topic, so it still gets its
    own (and never the other's)."""
    await create_topic(cluster)
    asking = asyncio.create_task(
        request_scaling(cluster.store, "default", "orders", ChangeKind.SPLIT, (0,), 30)
    )
    try:
        async with asyncio.timeout(30):
            while REQUESTER_ANNOTATION not in (topic := await cluster.topic()).metadata.annotations:
                await asyncio.sleep(0.01)
        token = topic.metadata.annotations[REQUESTER_ANNOTATION]
        # Answered, then at once the next request's answer, before the requester reads.
        for requester, message in ((token, "its own"), ("someone-else", "the next one's")):
            topic = await cluster.topic()
            raw = topic.to_wire()
            raw["status"]["lastOperation"] = LastOperation(
                kind="Split",
                parent_ids=[0],
                result=OperationResult.REJECTED,
                message=message,
                requested_by=requester,
                finished_at=datetime.now(UTC),
            ).to_wire()
            await cluster.store.replace_status(raw)
        answer = await asking
    finally:
        await cancel_and_wait(asking)
    assert (answer.requested_by, answer.message) == (token, "its own")
