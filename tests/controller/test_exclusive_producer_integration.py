"""Topic-wide exclusive producers through a real broker, with controllers serving their
endpoint on the embedded store (DESIGN guarantee 5): a holder writes to every segment; an
Exclusive rival is busy; a fencing rival takes over and the old holder's sends are refused and
absent from every log; WaitForExclusive is granted on release and on grace expiry; the children
of a later split carry the epoch; a Shared producer is refused while the topic is held, even
where the holder has no producer, until it is released; and a leader failover (cancelled, or
killed) keeps the holder. With real broker and controller processes: Exclusive and
WaitForExclusive take nothing from a connected Shared producer (busy; waiting, in arrival
order), and only ExclusiveWithFencing takes over."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp.test_utils import TestServer

from scalable_topics.admin.broker_admin import BrokerAdmin
from scalable_topics.controller.leader import ElectionTiming
from scalable_topics.controller.manager import ControllerManager
from scalable_topics.model.layout import SegmentLayout
from scalable_topics.model.resources import (
    TOPIC_LABEL,
    ProducerAccessMode,
    ProducerStatus,
    ScalableTopic,
    Segment,
)
from scalable_topics.model.scale_request import SPLIT_ANNOTATION
from scalable_topics.protocol import (
    BatchMessage,
    ErrorCode,
    ExclusiveGranted,
    ExclusiveRevoked,
    InitialPosition,
    ProducerClosed,
    SegmentSubscriptionType,
    Success,
)
from scalable_topics.store import EmbeddedStore
from support.broker_process import BrokerProcess
from support.controller_process import ControllerProcess
from support.eventually import eventually
from support.leases import topic_lease
from support.servers import controller_config
from support.wire_client import RequestFailed, WireClient

pytestmark = pytest.mark.slow

FAST = ElectionTiming(lease_duration=3, renew_deadline=2, retry_period=0.5)
TOPIC = "default/orders"
SEGMENTS = (0, 1, 2, 3)
Mode = ProducerAccessMode


@dataclass
class Cluster:
    store: EmbeddedStore
    broker_url: str
    admin: BrokerAdmin
    grace: float
    controllers: dict[str, asyncio.Task[None]] = field(default_factory=dict)

    def start_controller(self, identity: str) -> None:
        config = controller_config(identity, timing=FAST, consumer_grace_period=self.grace)
        self.controllers[identity] = asyncio.create_task(
            ControllerManager(self.store, config).run()
        )

    async def stop_controller(self, identity: str) -> None:
        task = self.controllers.pop(identity)
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)

    async def topic(self) -> ScalableTopic:
        raw = await self.store.get(ScalableTopic.KIND, "default", "orders")
        return ScalableTopic.model_validate(raw)

    async def producer(self) -> ProducerStatus | None:
        return (await self.topic()).status.producer

    async def segment_stats(self, ids: tuple[int, ...] | None = None) -> dict[int, dict[str, Any]]:
        """Every placed segment's stats (or those of ``ids``), from its broker."""
        listing = await self.store.list(Segment.KIND, "default", f"{TOPIC_LABEL}=orders")
        stats = {}
        for item in listing.items:
            segment = Segment.model_validate(item)
            wanted = ids is None or segment.spec.segment_id in ids
            if wanted and segment.status.broker is not None:
                stats[segment.spec.segment_id] = await self.admin.stats(
                    segment.status.broker,
                    "default",
                    "orders",
                    segment.metadata.name.removeprefix("orders-"),
                )
        return stats

    async def producer_epochs(self, ids: tuple[int, ...] = SEGMENTS) -> dict[int, int]:
        stats = await self.segment_stats(ids)
        return {i: stats[i]["producerEpoch"] for i in ids}


@contextlib.asynccontextmanager
async def running(
    tmp_path: Path, make_broker: Callable[..., TestServer], grace: float, controllers: int
) -> AsyncIterator[Cluster]:
    """A broker, ``controllers`` controllers serving their endpoint, and a Ready topic of four
    segments."""
    async with (
        await EmbeddedStore.open(tmp_path / "store.db") as store,
        aiohttp.ClientSession() as http,
    ):
        broker = make_broker(store, "b")
        await broker.start_server()
        cluster = Cluster(store, f"http://127.0.0.1:{broker.port}", BrokerAdmin(http), grace)
        try:
            for index in range(controllers):
                cluster.start_controller(f"controller-{index}")
            await store.create(
                ScalableTopic.model_validate(
                    {
                        "metadata": {"name": "orders", "namespace": "default"},
                        "spec": {"initialSegments": len(SEGMENTS)},
                    }
                ).to_wire()
            )

            async def ready() -> bool:
                return (await cluster.topic()).status.phase == "Ready"

            await eventually(ready)
            yield cluster
        finally:
            for identity in list(cluster.controllers):
                await cluster.stop_controller(identity)
            await broker.close()


async def refusal(request: Awaitable[Any]) -> RequestFailed:
    with pytest.raises(RequestFailed) as refused:
        await request
    return refused.value


async def log_payloads(
    cluster: Cluster, client: WireClient, consumer_id: int, segment_id: int
) -> list[bytes]:
    """Every message the segment's log holds (as many as its broker counts entries, each a
    batch of one here), read from the start through a new subscription."""
    stats = (await cluster.segment_stats())[segment_id]
    entries = stats["lastEntryId"] + 1 - stats["firstEntryId"]
    await client.subscribe(
        consumer_id,
        TOPIC,
        segment_id,
        f"audit-{consumer_id}",
        SegmentSubscriptionType.SHARED,
        initial=InitialPosition.EARLIEST,
    )
    return [message.payload for message in await client.receive_n(consumer_id, entries)]


async def take_events(client: WireClient, count: int) -> list[Any]:
    """The next ``count`` pushes, whatever their kind, in arrival order."""
    async with asyncio.timeout(30):
        return [await client.events.get() for _ in range(count)]


async def open_on_every_segment(
    client: WireClient, name: str, epoch: int, ids: tuple[int, ...] = SEGMENTS
) -> None:
    """The holder's side of the client sequence: one producer per segment, in the granted
    epoch (producer id = segment id + 1)."""
    for segment_id in ids:
        opened = await client.open_producer(
            segment_id + 1, TOPIC, segment_id, name, Mode.EXCLUSIVE_WITH_FENCING, epoch
        )
        assert opened.producer_epoch == epoch


async def test_exclusive_fencing_waiting_and_split_children(
    tmp_path: Path, make_broker: Callable[..., TestServer]
) -> None:
    async with running(tmp_path, make_broker, grace=30.0, controllers=1) as cluster:
        amy = await WireClient.connect(cluster.broker_url)
        bob = await WireClient.connect(cluster.broker_url)
        cat = await WireClient.connect(cluster.broker_url)
        try:
            # amy holds the topic: persisted, every segment fenced, then she is told.
            granted = await amy.acquire_exclusive(1, TOPIC, "amy")
            assert isinstance(granted, ExclusiveGranted) and granted.producer_epoch == 1
            producer = await cluster.producer()
            lease = await topic_lease(cluster.store, "default", "orders")
            assert producer == ProducerStatus(
                epoch=1,
                holder="amy",
                access_mode=Mode.EXCLUSIVE,
                term=lease["spec"].get("leaseTransitions", 0),  # the leader's term
            )
            assert await cluster.producer_epochs() == dict.fromkeys(SEGMENTS, 1)
            await open_on_every_segment(amy, "amy", 1)
            for segment_id in SEGMENTS:
                await amy.send(segment_id + 1, 0, BatchMessage(f"amy {segment_id}".encode()))

            # bob: Exclusive is busy, and so is a Shared producer on a segment amy writes.
            busy = await refusal(bob.acquire_exclusive(1, TOPIC, "bob"))
            assert busy.code is ErrorCode.PRODUCER_BUSY
            assert "'amy' holds the topic at epoch 1 (connected)" in str(busy)
            shared = await refusal(bob.open_producer(9, TOPIC, 0, "bob-shared"))
            assert shared.code is ErrorCode.PRODUCER_BUSY

            # bob takes over with fencing: epoch 2 is on every segment before he hears of it.
            taken = await bob.acquire_exclusive(2, TOPIC, "bob", Mode.EXCLUSIVE_WITH_FENCING)
            assert isinstance(taken, ExclusiveGranted) and taken.producer_epoch == 2
            assert await cluster.producer_epochs() == dict.fromkeys(SEGMENTS, 2)
            # She hears it from the controller (her grant) and from every segment (producers).
            pushes = await take_events(amy, 1 + len(SEGMENTS))
            revoked = [p for p in pushes if isinstance(p, ExclusiveRevoked)]
            assert [(p.grant_id, p.code) for p in revoked] == [(1, ErrorCode.PRODUCER_FENCED)]
            closed = [p for p in pushes if isinstance(p, ProducerClosed)]
            assert sorted(p.producer_id for p in closed) == [i + 1 for i in SEGMENTS]
            assert {p.code for p in closed} == {ErrorCode.PRODUCER_FENCED}
            for segment_id in SEGMENTS:  # amy's next send, on any segment, is refused
                late = await refusal(
                    amy.send(segment_id + 1, 1, BatchMessage(f"amy late {segment_id}".encode()))
                )
                assert late.code is ErrorCode.PRODUCER_FENCED
            reopen = await refusal(
                amy.open_producer(10, TOPIC, 0, "amy", Mode.EXCLUSIVE_WITH_FENCING, 1)
            )
            assert reopen.code is ErrorCode.PRODUCER_FENCED
            again = await refusal(amy.acquire_exclusive(3, TOPIC, "amy", Mode.EXCLUSIVE, 1))
            assert again.code is ErrorCode.PRODUCER_FENCED
            await open_on_every_segment(bob, "bob", 2)
            for segment_id in SEGMENTS:
                await bob.send(segment_id + 1, 0, BatchMessage(f"bob {segment_id}".encode()))
            for segment_id in SEGMENTS:
                assert await log_payloads(cluster, cat, 100 + segment_id, segment_id) == [
                    f"amy {segment_id}".encode(),
                    f"bob {segment_id}".encode(),
                ]

            # cat waits; bob closes his producers and releases: cat is granted epoch 3.
            waiting = await cat.acquire_exclusive(1, TOPIC, "cat", Mode.WAIT_FOR_EXCLUSIVE)
            assert isinstance(waiting, Success)
            for segment_id in SEGMENTS:
                await bob.close_producer(segment_id + 1)
            await bob.release_exclusive(2)
            pushed = await cat.next_event(ExclusiveGranted)
            assert (pushed.grant_id, pushed.request_id, pushed.producer_epoch) == (1, None, 3)
            assert await cluster.producer_epochs() == dict.fromkeys(SEGMENTS, 3)
            producer = await cluster.producer()
            assert producer is not None
            assert (producer.epoch, producer.holder) == (3, "cat")

            # A split after the grant: its children inherit epoch 3.
            await cluster.store.patch(
                ScalableTopic.KIND,
                "default",
                "orders",
                {"metadata": {"annotations": {SPLIT_ANNOTATION: "1"}}},
            )

            async def children_of_1() -> tuple[int, ...]:
                # By their parent: GC may prune segment 1 itself once it is drained.
                layout = SegmentLayout.from_status((await cluster.topic()).status.to_wire())
                return tuple(i for i, info in layout.segments.items() if 1 in info.parent_ids)

            async def split_done() -> bool:
                return len(await children_of_1()) == 2

            await eventually(split_done)
            children = await children_of_1()
            assert await cluster.producer_epochs(children) == dict.fromkeys(children, 3)
            for child in children:
                stale = await refusal(
                    bob.open_producer(20 + child, TOPIC, child, "bob", Mode.EXCLUSIVE, 2)
                )
                assert stale.code is ErrorCode.PRODUCER_FENCED
            await open_on_every_segment(cat, "cat", 3, (0, 2, 3, *children))
            for child in children:
                await cat.send(child + 1, 0, BatchMessage(b"cat on a child"))
        finally:
            for client in (amy, bob, cat):
                await client.close()


async def test_a_held_topic_refuses_shared_producers_until_it_is_released(
    tmp_path: Path, make_broker: Callable[..., TestServer]
) -> None:
    async with running(tmp_path, make_broker, grace=60.0, controllers=1) as cluster:
        amy = await WireClient.connect(cluster.broker_url)
        bob = await WireClient.connect(cluster.broker_url)
        producer_ids = iter(range(100, 1000))

        async def bob_is_refused_everywhere(ids: tuple[int, ...]) -> None:
            for segment_id in ids:
                refused = await refusal(bob.open_producer(next(producer_ids), TOPIC, segment_id))
                assert refused.code is ErrorCode.PRODUCER_BUSY
                assert "held exclusively by 'amy'" in str(refused)

        try:
            # Granted, and no producer of amy's anywhere yet: every segment is kept for her.
            await amy.acquire_exclusive(1, TOPIC, "amy")
            stats = await cluster.segment_stats()
            assert {i: stats[i]["reservedFor"] for i in SEGMENTS} == dict.fromkeys(SEGMENTS, "amy")
            await bob_is_refused_everywhere(SEGMENTS)

            # amy disconnects; within her grace period the segments stay hers.
            await amy.close()
            await bob_is_refused_everywhere(SEGMENTS)
            amy = await WireClient.connect(cluster.broker_url)
            back = await amy.acquire_exclusive(1, TOPIC, "amy", Mode.EXCLUSIVE, 1)
            assert isinstance(back, ExclusiveGranted) and back.producer_epoch == 1
            await open_on_every_segment(amy, "amy", 1, (0,))

            # A split while she holds the topic: its children are kept for her too.
            await cluster.store.patch(
                ScalableTopic.KIND,
                "default",
                "orders",
                {"metadata": {"annotations": {SPLIT_ANNOTATION: "1"}}},
            )

            async def children() -> tuple[int, ...]:
                layout = SegmentLayout.from_status((await cluster.topic()).status.to_wire())
                return tuple(i for i, info in layout.segments.items() if 1 in info.parent_ids)

            async def split_done() -> bool:
                return bool(await children())

            await eventually(split_done)  # committed: 1 may be collected already, no matter
            active = (0, 2, 3, *await children())
            stats = await cluster.segment_stats(active)
            assert {i: stats[i]["reservedFor"] for i in active} == dict.fromkeys(active, "amy")
            await bob_is_refused_everywhere(active)

            # amy releases: every segment is released (at the same epoch), and bob may produce.
            await amy.close_producer(1)
            await amy.release_exclusive(1)

            async def released() -> bool:
                stats = await cluster.segment_stats(active)
                return all(stats[i]["reservedFor"] is None for i in active)

            await eventually(released)
            assert await cluster.producer_epochs(active) == dict.fromkeys(active, 1)
            for segment_id in active:
                await bob.open_producer(next(producer_ids), TOPIC, segment_id, "bob")
        finally:
            await amy.close()
            await bob.close()


async def test_a_holder_that_does_not_come_back_is_released_to_the_next_in_line(
    tmp_path: Path, make_broker: Callable[..., TestServer]
) -> None:
    async with running(tmp_path, make_broker, grace=2.0, controllers=1) as cluster:
        amy = await WireClient.connect(cluster.broker_url)
        bob = await WireClient.connect(cluster.broker_url)
        try:
            await amy.acquire_exclusive(1, TOPIC, "amy")
            waiting = await bob.acquire_exclusive(1, TOPIC, "bob", Mode.WAIT_FOR_EXCLUSIVE)
            assert isinstance(waiting, Success)
            await amy.close()  # gone, and it stays away
            pushed = await bob.next_event(ExclusiveGranted, timeout=60)
            assert pushed.producer_epoch == 2
            producer = await cluster.producer()
            assert producer is not None and (producer.epoch, producer.holder) == (2, "bob")
            assert await cluster.producer_epochs() == dict.fromkeys(SEGMENTS, 2)
        finally:
            await amy.close()
            await bob.close()


async def test_a_leader_failover_keeps_the_holder(
    tmp_path: Path, make_broker: Callable[..., TestServer]
) -> None:
    async with running(tmp_path, make_broker, grace=60.0, controllers=2) as cluster:
        amy = await WireClient.connect(cluster.broker_url)
        bob = await WireClient.connect(cluster.broker_url)
        try:
            granted = await amy.acquire_exclusive(1, TOPIC, "amy")
            assert isinstance(granted, ExclusiveGranted) and granted.producer_epoch == 1
            await open_on_every_segment(amy, "amy", 1)
            before = await cluster.producer()
            assert before is not None

            lease = await topic_lease(cluster.store, "default", "orders")
            await cluster.stop_controller(lease["spec"]["holderIdentity"])

            async def adopted() -> bool:
                producer = await cluster.producer()
                return producer is not None and producer.term > before.term

            await eventually(adopted)
            after = await cluster.producer()
            assert after is not None
            assert (after.epoch, after.holder, after.access_mode) == (1, "amy", Mode.EXCLUSIVE)

            # The broker asked the new leader again for amy, with her epoch: she is connected
            # there (not merely within her grace period), and she was told nothing.
            async def amy_connected_at_the_new_leader() -> bool:
                busy = await refusal(bob.acquire_exclusive(1, TOPIC, "bob"))
                assert busy.code in (ErrorCode.PRODUCER_BUSY, ErrorCode.SERVICE_NOT_READY)
                return "(connected)" in str(busy)

            await eventually(amy_connected_at_the_new_leader)
            assert amy.events.empty()
            for segment_id in SEGMENTS:
                await amy.send(segment_id + 1, 0, BatchMessage(b"after the failover"))
            assert await cluster.producer_epochs() == dict.fromkeys(SEGMENTS, 1)
        finally:
            await amy.close()
            await bob.close()


async def test_a_killed_leader_is_replaced_and_the_holder_kept(
    tmp_path: Path, make_broker: Callable[..., TestServer]
) -> None:
    """The leading controller process dies (SIGKILL): the broker's link to it drops, and the
    broker asks the next leader for amy with her epoch, within the grace period."""
    store_path = tmp_path / "store.db"
    async with await EmbeddedStore.open(store_path) as store:
        broker = make_broker(store, "b")
        await broker.start_server()
        processes = {}
        for identity in ("controller-a", "controller-b"):
            processes[identity] = ControllerProcess(
                tmp_path,
                f"embedded://{store_path}",
                identity,
                listen=True,
                extra=("--consumer-grace-period", "60"),
            )
            processes[identity].start()
        broker_url = f"http://127.0.0.1:{broker.port}"
        amy = bob = None
        try:
            await store.create(
                ScalableTopic.model_validate(
                    {
                        "metadata": {"name": "orders", "namespace": "default"},
                        "spec": {"initialSegments": len(SEGMENTS)},
                    }
                ).to_wire()
            )

            async def topic() -> ScalableTopic:
                raw = await store.get(ScalableTopic.KIND, "default", "orders")
                return ScalableTopic.model_validate(raw)

            async def ready() -> bool:
                return (await topic()).status.phase == "Ready"

            await eventually(ready)
            amy = await WireClient.connect(broker_url)
            bob = await WireClient.connect(broker_url)
            granted = await amy.acquire_exclusive(1, TOPIC, "amy")
            assert isinstance(granted, ExclusiveGranted) and granted.producer_epoch == 1
            await open_on_every_segment(amy, "amy", 1)
            before = (await topic()).status.producer
            assert before is not None

            lease = await topic_lease(store, "default", "orders")
            processes[lease["spec"]["holderIdentity"]].kill()

            async def adopted() -> bool:
                producer = (await topic()).status.producer
                return producer is not None and producer.term > before.term

            await eventually(adopted)
            after = (await topic()).status.producer
            assert after is not None
            assert (after.epoch, after.holder) == (1, "amy")

            async def amy_connected_at_the_new_leader() -> bool:
                assert bob is not None
                busy = await refusal(bob.acquire_exclusive(1, TOPIC, "bob"))
                assert busy.code in (ErrorCode.PRODUCER_BUSY, ErrorCode.SERVICE_NOT_READY)
                return "(connected)" in str(busy)

            await eventually(amy_connected_at_the_new_leader)
            assert amy.events.empty()  # she was told nothing: her grant never changed
            for segment_id in SEGMENTS:
                await amy.send(segment_id + 1, 0, BatchMessage(b"after the failover"))
        finally:
            for client in (amy, bob):
                if client is not None:
                    await client.close()
            for process in processes.values():
                process.stop()
            await broker.close()


async def test_exclusive_and_wait_take_nothing_from_connected_producers_and_fencing_does(
    tmp_path: Path,
) -> None:
    """Real broker and controller processes. A Shared producer is connected: an Exclusive
    request is refused with ProducerBusy and the Shared producer keeps producing; two
    WaitForExclusive requests wait, without keeping Shared producers out, and are granted in
    arrival order once the Shared producer closes; ExclusiveWithFencing takes over from a
    connected Shared producer."""
    store_path = tmp_path / "store.db"
    store_url = f"embedded://{store_path}"
    broker = BrokerProcess(tmp_path, store_url)
    controller = ControllerProcess(
        tmp_path, store_url, "controller-a", listen=True, extra=("--consumer-grace-period", "60")
    )
    clients: list[WireClient] = []
    async with (
        await EmbeddedStore.open(store_path) as store,
        aiohttp.ClientSession() as http,
    ):
        try:
            await broker.start()
            cluster = Cluster(store, broker.url, BrokerAdmin(http), grace=60)
            controller.start()
            await store.create(
                ScalableTopic.model_validate(
                    {
                        "metadata": {"name": "orders", "namespace": "default"},
                        "spec": {"initialSegments": len(SEGMENTS)},
                    }
                ).to_wire()
            )

            async def ready() -> bool:
                return (await cluster.topic()).status.phase == "Ready"

            await eventually(ready)
            shared, amy, cat, dan, eve, fay = clients[:] = [
                await WireClient.connect(broker.url) for _ in range(6)
            ]
            await shared.open_producer(1, TOPIC, 2, "shared-1")
            await shared.send(1, 0, BatchMessage(b"shared 0"))

            # Exclusive: refused at once, naming who produces; nothing changed anywhere.
            busy = await refusal(amy.acquire_exclusive(1, TOPIC, "amy"))
            assert busy.code is ErrorCode.PRODUCER_BUSY and "'shared-1'" in str(busy)
            assert await cluster.producer() is None
            stats = await cluster.segment_stats()
            assert {i: stats[i]["reservedFor"] for i in SEGMENTS} == dict.fromkeys(SEGMENTS, None)
            assert await cluster.producer_epochs() == dict.fromkeys(SEGMENTS, 0)
            await shared.send(1, 1, BatchMessage(b"shared 1"))  # it keeps producing

            # WaitForExclusive: cat, then dan, wait; an Exclusive request does not overtake them.
            assert isinstance(
                await cat.acquire_exclusive(1, TOPIC, "cat", Mode.WAIT_FOR_EXCLUSIVE), Success
            )
            assert isinstance(
                await dan.acquire_exclusive(1, TOPIC, "dan", Mode.WAIT_FOR_EXCLUSIVE), Success
            )
            # Waiting holds nothing: another Shared producer opens, on any segment, and writes.
            for segment_id in SEGMENTS:
                await eve.open_producer(10 + segment_id, TOPIC, segment_id, "shared-2")
                await eve.send(10 + segment_id, 0, BatchMessage(b"shared-2"))
                await eve.close_producer(10 + segment_id)
            await shared.send(1, 2, BatchMessage(b"shared 2"))
            assert cat.events.empty() and dan.events.empty()
            overtaking = await refusal(eve.acquire_exclusive(1, TOPIC, "eve"))
            assert overtaking.code is ErrorCode.PRODUCER_BUSY

            # The Shared producer closes: cat, first in line, is granted; dan still waits.
            await shared.close_producer(1)
            granted = await cat.next_event(ExclusiveGranted)
            assert (granted.grant_id, granted.request_id, granted.producer_epoch) == (1, None, 1)
            assert await cluster.producer_epochs() == dict.fromkeys(SEGMENTS, 1)
            stats = await cluster.segment_stats()
            assert {i: stats[i]["reservedFor"] for i in SEGMENTS} == dict.fromkeys(SEGMENTS, "cat")
            producer = await cluster.producer()
            assert producer is not None
            assert (producer.holder, producer.claiming) == ("cat", False)
            assert dan.events.empty()
            await open_on_every_segment(cat, "cat", 1)
            for segment_id in SEGMENTS:
                await cat.send(segment_id + 1, 0, BatchMessage(b"cat"))
            for segment_id in SEGMENTS:
                await cat.close_producer(segment_id + 1)
            await cat.release_exclusive(1)
            granted = await dan.next_event(ExclusiveGranted)
            assert granted.producer_epoch == 2
            assert await log_payloads(cluster, fay, 100, 2) == [
                b"shared 0",
                b"shared 1",
                b"shared-2",
                b"shared 2",
                b"cat",
            ]
            await dan.release_exclusive(1)

            # ExclusiveWithFencing takes over from a connected Shared producer.
            async def released() -> bool:  # shortly after dan's release is answered
                stats = await cluster.segment_stats()
                return all(stats[i]["reservedFor"] is None for i in SEGMENTS)

            await eventually(released)
            await shared.open_producer(2, TOPIC, 0, "shared-1")
            taken = await fay.acquire_exclusive(1, TOPIC, "fay", Mode.EXCLUSIVE_WITH_FENCING)
            assert isinstance(taken, ExclusiveGranted) and taken.producer_epoch == 3
            closed = await shared.next_event(ProducerClosed)
            assert (closed.producer_id, closed.code) == (2, ErrorCode.PRODUCER_FENCED)
        finally:
            for client in clients:
                await client.close()
            controller.stop()
            broker.stop()


async def test_a_client_epoch_cannot_take_a_held_topic_and_its_release_frees_every_segment(
    tmp_path: Path, make_broker: Callable[..., TestServer]
) -> None:
    """Found by the wire fuzzer: while amy held the topic, another producer opened with
    ExclusiveWithFencing and an epoch of its own choosing above the grant's; it took the
    segment's reservation, the controller's release at amy's epoch was stale there, and no
    Shared producer could open on that segment again."""
    async with running(tmp_path, make_broker, grace=1.0, controllers=1) as cluster:
        amy = await WireClient.connect(cluster.broker_url)
        eve = await WireClient.connect(cluster.broker_url)
        bob = await WireClient.connect(cluster.broker_url)
        try:
            granted = await amy.acquire_exclusive(1, TOPIC, "amy")
            assert isinstance(granted, ExclusiveGranted)
            for name in ("eve", "amy"):  # another name, and the holder's own
                refused = await refusal(
                    eve.open_producer(
                        1, TOPIC, 0, name, Mode.EXCLUSIVE_WITH_FENCING, granted.producer_epoch + 1
                    )
                )
                assert refused.code in (ErrorCode.PRODUCER_BUSY, ErrorCode.INVALID_REQUEST)
            stats = await cluster.segment_stats()
            assert {i: stats[i]["reservedFor"] for i in SEGMENTS} == dict.fromkeys(SEGMENTS, "amy")
            await amy.close()  # gone: her grace period ends, the topic is released

            async def released() -> bool:
                stats = await cluster.segment_stats()
                return all(stats[i]["reservedFor"] is None for i in SEGMENTS)

            await eventually(released)
            for segment_id in SEGMENTS:
                await bob.open_producer(segment_id + 10, TOPIC, segment_id, "bob")
        finally:
            await amy.close()
            await eve.close()
            await bob.close()
