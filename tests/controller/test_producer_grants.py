"""A topic leader's exclusive producer grants, on fake loop time (looptime), an in-memory store
and brokers that keep each segment's producer epoch: persisted, then fenced, then reported;
busy, waiting and fencing requests; grace periods; new and deposed leaders; failures."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

import pytest
from led_topic_fixtures import GRACE, NAME, NS, T0, Running, add_segment_object, loop_clock

from scalable_topics.admin.broker_admin import BrokerAdminError, BrokerUnreachable, SegmentBusy
from scalable_topics.controller.producer_grants import GrantRefused, TopicProducerGrants
from scalable_topics.model.layout import SegmentLayout
from scalable_topics.model.resources import (
    TOPIC_LABEL,
    PendingOperation,
    ProducerAccessMode,
    ProducerStatus,
    ScalableTopic,
)
from scalable_topics.protocol import ErrorCode
from scalable_topics.protocol.limits import MAX_PRODUCER_EPOCH, MAX_REQUESTED_PRODUCER_EPOCH
from scalable_topics.store.informers import Informers
from support.memory_store import MemoryStore

pytestmark = pytest.mark.looptime

Mode = ProducerAccessMode


@dataclass
class Brokers:
    """Every segment's producer epoch, reservation and connected producers as its broker keeps
    them. Each fence records the epoch the topic's status held when it arrived, so tests can
    check the grant was persisted first."""

    store: MemoryStore
    epochs: dict[str, int] = field(default_factory=dict)
    holders: dict[str, str | None] = field(default_factory=dict)  # each segment's reservation
    fences: list[tuple[str, int, int]] = field(default_factory=list)  # descriptor, epoch, stored
    unreachable: set[str] = field(default_factory=set)
    not_created: set[str] = field(default_factory=set)
    connected: dict[str, set[str]] = field(default_factory=dict)  # producer names per segment
    unseen: set[str] = field(default_factory=set)  # segments whose probe answers "nobody"
    claiming_when_fenced: list[bool] = field(default_factory=list)  # status.producer.claiming
    probes: int = 0

    async def fence(
        self,
        broker_url: str,
        namespace: str,
        topic: str,
        segment: str,
        epoch: int,
        holder: str | None = None,
        *,
        if_free: bool = False,
    ) -> int:
        assert (namespace, topic) == (NS, NAME) and broker_url.startswith("ws://broker-")
        assert holder is not None  # a release is a release
        stored = await producer_status(self.store)
        self.fences.append((segment, epoch, stored.epoch if stored else 0))
        self.claiming_when_fenced.append(stored is not None and stored.claiming)
        self._check(broker_url, segment)
        current = self.epochs.get(segment, 0)
        if if_free:
            others = sorted(self.connected.get(segment, set()) - {holder})
            if epoch >= current and others:
                raise SegmentBusy(409, f"{others} are connected", others)
        if epoch >= current:
            self.holders[segment] = holder
            # Fenced: older epochs' producers and other names are closed.
            self.connected[segment] = self.connected.get(segment, set()) & {holder}
        self.epochs[segment] = max(current, epoch)
        return self.epochs[segment]

    async def release(
        self, broker_url: str, namespace: str, topic: str, segment: str, epoch: int
    ) -> int:
        self._check(broker_url, segment)
        if epoch >= self.epochs.get(segment, 0):
            self.holders[segment] = None
        return self.epochs.get(segment, 0)

    async def producers(
        self, broker_url: str, namespace: str, topic: str, segment: str
    ) -> list[str]:
        self.probes += 1
        self._check(broker_url, segment)
        if segment in self.unseen:  # a producer opens between the probe and the fence
            return []
        return sorted(self.connected.get(segment, set()))

    def _check(self, broker_url: str, segment: str) -> None:
        if segment in self.unreachable:
            raise BrokerUnreachable(f"{broker_url} does not answer")
        if segment in self.not_created:
            raise BrokerAdminError(404, "SegmentNotFound", f"no segment {segment}")


class Channel:
    """A requester as the coordinator sees it: what it was told, in order, and what every
    broker's segment epoch was at the moment it was told it holds the topic."""

    def __init__(self, brokers: Brokers) -> None:
        self.brokers = brokers
        self.told: list[tuple[Any, ...]] = []
        self.segments_when_granted: dict[str, int] = {}

    def queued(self) -> None:
        self.told.append(("queued",))

    def granted(self, epoch: int) -> None:
        self.told.append(("granted", epoch))
        self.segments_when_granted = dict(self.brokers.epochs)

    def revoked(self, code: ErrorCode, message: str) -> None:
        self.told.append(("revoked", code))

    @property
    def epoch(self) -> int | None:
        grants = [t[1] for t in self.told if t[0] == "granted"]
        return grants[-1] if grants else None


async def producer_status(store: MemoryStore) -> ProducerStatus | None:
    raw = await store.get(ScalableTopic.KIND, NS, NAME)
    return ScalableTopic.model_validate(raw).status.producer


@pytest.fixture
async def store() -> MemoryStore:
    memory = MemoryStore()
    layout = SegmentLayout.initial(4, T0)
    await memory.create(
        {
            "apiVersion": "scalabletopics.dev/v1alpha1",
            "kind": "ScalableTopic",
            "metadata": {"name": NAME, "namespace": NS},
            "spec": {"initialSegments": 4},
        }
    )
    await memory.patch_status(ScalableTopic.KIND, NS, NAME, {"status": layout.to_status()})
    for info in layout.active:
        await add_segment_object(
            memory, info.segment_id, info.hash_range.start, info.hash_range.end
        )
    return memory


@pytest.fixture
def brokers(store: MemoryStore) -> Brokers:
    return Brokers(store)


Leader = Callable[..., TopicProducerGrants]


@pytest.fixture
async def leader(store: MemoryStore, brokers: Brokers) -> AsyncIterator[Leader]:
    """Start the grants of one term; all of them stop at the end of the test."""
    running = Running()
    informers = Informers(store, "scalable-topics")  # type: ignore[arg-type]
    informers.start()
    await informers.wait_synced()
    cached = informers.writing_through(store)  # type: ignore[arg-type]

    def start(term: int, **options: Any) -> TopicProducerGrants:
        grants = TopicProducerGrants(
            cached, informers, brokers, NS, NAME, term, loop_clock(), GRACE, **options
        )  # type: ignore[arg-type]
        return running.start(grants)

    yield start
    await running.stop()
    await informers.stop()


async def until(check: Callable[[], Any], step: float = 0.1) -> None:
    """Wait (on fake time, bounded) until ``check()`` (awaited if a coroutine) is true."""
    async with asyncio.timeout(GRACE * 10):
        while True:
            result = check()
            if asyncio.iscoroutine(result):
                result = await result
            if result:
                return
            await asyncio.sleep(step)


async def holder(store: MemoryStore) -> str | None:
    status = await producer_status(store)
    return status.holder if status else None


async def refused(grants: TopicProducerGrants, *request: Any) -> ErrorCode:
    with pytest.raises(GrantRefused) as refusal:
        await grants.acquire(*request)
    return refusal.value.code


async def test_a_grant_is_persisted_then_every_segment_fenced_then_reported(
    store: MemoryStore, brokers: Brokers, leader: Leader
) -> None:
    grants = leader(3)
    amy = Channel(brokers)
    await grants.acquire("amy", Mode.EXCLUSIVE, None, amy)
    assert amy.told == [("granted", 1)]
    assert await producer_status(store) == ProducerStatus(
        epoch=1, holder="amy", access_mode=Mode.EXCLUSIVE, term=3
    )
    # Every fence arrived after the epoch was in the store, and all were done before amy heard.
    assert len(brokers.fences) == 4 and all(stored == 1 for _, _, stored in brokers.fences)
    assert sorted(amy.segments_when_granted.values()) == [1, 1, 1, 1]


async def test_busy_waiting_and_fencing_requests(
    store: MemoryStore, brokers: Brokers, leader: Leader
) -> None:
    grants = leader(1)
    amy, bob, cat, dan = (Channel(brokers) for _ in range(4))
    await grants.acquire("amy", Mode.EXCLUSIVE, None, amy)
    assert await refused(grants, "bob", Mode.EXCLUSIVE, None, bob) is ErrorCode.PRODUCER_BUSY
    await grants.acquire("cat", Mode.WAIT_FOR_EXCLUSIVE, None, cat)
    assert cat.told == [("queued",)]

    await grants.acquire("dan", Mode.EXCLUSIVE_WITH_FENCING, None, dan)
    assert dan.told == [("granted", 2)]
    assert amy.told == [("granted", 1), ("revoked", ErrorCode.PRODUCER_FENCED)]
    assert sorted(dan.segments_when_granted.values()) == [2, 2, 2, 2]
    # amy, fenced, may not come back with its epoch; cat still waits behind dan.
    assert await refused(grants, "amy", Mode.EXCLUSIVE, 1, Channel(brokers)) is (
        ErrorCode.PRODUCER_FENCED
    )
    assert grants.waiting == ("cat",)

    await grants.release(dan)
    await until(lambda: cat.epoch is not None)
    assert cat.told == [("queued",), ("granted", 3)]
    assert await producer_status(store) == ProducerStatus(
        epoch=3, holder="cat", access_mode=Mode.WAIT_FOR_EXCLUSIVE, term=1
    )
    with pytest.raises(GrantRefused) as unknown:
        await grants.release(dan)
    assert unknown.value.code is ErrorCode.UNKNOWN_GRANT


async def test_a_disconnected_holder_keeps_the_topic_for_its_grace_period(
    store: MemoryStore, brokers: Brokers, leader: Leader
) -> None:
    grants = leader(1)
    amy, bob = Channel(brokers), Channel(brokers)
    await grants.acquire("amy", Mode.EXCLUSIVE, None, amy)
    grants.detach(amy)
    await asyncio.sleep(GRACE - 1)
    assert await refused(grants, "bob", Mode.EXCLUSIVE, None, bob) is ErrorCode.PRODUCER_BUSY
    fences = len(brokers.fences)
    again = Channel(brokers)
    await grants.acquire("amy", Mode.EXCLUSIVE, 1, again)  # back with its epoch: same grant
    assert again.told == [("granted", 1)] and len(brokers.fences) == fences
    await asyncio.sleep(GRACE * 2)  # the cancelled deadline passes: nothing happens
    assert await holder(store) == "amy"

    # Gone for good: once the grace period is over the next in line gets the topic.
    waiter = Channel(brokers)
    await grants.acquire("bob", Mode.WAIT_FOR_EXCLUSIVE, None, waiter)
    loop = asyncio.get_running_loop()
    grants.detach(again)
    left_at = loop.time()
    await until(lambda: waiter.epoch is not None, step=0.5)
    assert loop.time() - left_at >= GRACE
    assert waiter.told == [("queued",), ("granted", 2)]
    assert await producer_status(store) == ProducerStatus(
        epoch=2, holder="bob", access_mode=Mode.WAIT_FOR_EXCLUSIVE, term=1
    )


async def test_an_expired_holder_is_cleared_and_its_epoch_stays(
    store: MemoryStore, brokers: Brokers, leader: Leader
) -> None:
    grants = leader(1)
    amy = Channel(brokers)
    await grants.acquire("amy", Mode.EXCLUSIVE, None, amy)
    grants.detach(amy)
    await until(lambda: _is_none(holder(store)), step=1)
    assert await producer_status(store) == ProducerStatus(epoch=1, term=1)
    # Nobody took over: amy, the last holder, may come back with its epoch after all.
    back = Channel(brokers)
    await grants.acquire("amy", Mode.EXCLUSIVE, 1, back)
    assert back.told == [("granted", 1)]
    assert await holder(store) == "amy"


async def test_an_ended_grant_releases_every_segment_and_a_new_leader_does_it_again(
    store: MemoryStore, brokers: Brokers, leader: Leader
) -> None:
    grants = leader(1)
    amy = Channel(brokers)
    await grants.acquire("amy", Mode.EXCLUSIVE, None, amy)
    segments = sorted(brokers.epochs)
    assert len(segments) == 4 and brokers.holders == dict.fromkeys(segments, "amy")
    await grants.release(amy)
    await until(lambda: brokers.holders == dict.fromkeys(segments, None))
    assert brokers.epochs == dict.fromkeys(segments, 1)  # released at the grant's own epoch

    # As if the leader died between clearing the holder and releasing the segments.
    brokers.holders = dict.fromkeys(segments, "amy")
    leader(2)
    await until(lambda: brokers.holders == dict.fromkeys(segments, None))
    assert brokers.epochs == dict.fromkeys(segments, 1)


async def test_a_new_leader_adopts_the_holder_and_the_deposed_one_is_refused(
    store: MemoryStore, brokers: Brokers, leader: Leader
) -> None:
    old = leader(1)
    amy = Channel(brokers)
    await old.acquire("amy", Mode.EXCLUSIVE, None, amy)
    fences = len(brokers.fences)
    await asyncio.sleep(GRACE - 5)  # amy's link is still up under the old leader
    new = leader(2)
    await until(lambda: _term_is(store, 2))
    assert await holder(store) == "amy"
    # The new leader finishes the fencing its predecessor may have left half done.
    await until(lambda: len(brokers.fences) >= fences + 4)
    assert {epoch for _, epoch, _ in brokers.fences[fences:]} == {1}

    # The old leader reads the newer term: it refuses, and tells its holder to go elsewhere.
    assert await refused(old, "bob", Mode.EXCLUSIVE, None, Channel(brokers)) is (
        ErrorCode.NOT_LEADER
    )
    assert amy.told[-1] == ("revoked", ErrorCode.NOT_LEADER)
    # amy comes back through the new leader with its epoch, well after the old grace period.
    await asyncio.sleep(10)
    back = Channel(brokers)
    await new.acquire("amy", Mode.EXCLUSIVE, 1, back)
    assert back.told == [("granted", 1)]


async def test_a_leader_that_reads_a_newer_term_refuses_and_writes_nothing(
    store: MemoryStore, brokers: Brokers, leader: Leader
) -> None:
    old = leader(1)
    amy = Channel(brokers)
    await old.acquire("amy", Mode.EXCLUSIVE, None, amy)
    await old.release(amy)
    # Another controller took the topic over (a higher term wrote it) without this one noticing.
    await store.patch_status(
        ScalableTopic.KIND, NS, NAME, {"status": {"controller": {"identity": "c2", "term": 2}}}
    )
    assert await refused(old, "bob", Mode.EXCLUSIVE, None, Channel(brokers)) is (
        ErrorCode.NOT_LEADER
    )
    assert await producer_status(store) == ProducerStatus(epoch=1, term=1)


async def test_an_unreachable_segment_abandons_the_grant_and_keeps_the_epoch(
    store: MemoryStore, brokers: Brokers, leader: Leader
) -> None:
    grants = leader(1)
    brokers.unreachable.add(next(iter(await segment_descriptors(store))))
    amy = Channel(brokers)
    assert await refused(grants, "amy", Mode.EXCLUSIVE, None, amy) is ErrorCode.SERVICE_NOT_READY
    assert amy.told == []
    assert await producer_status(store) == ProducerStatus(epoch=1, term=1)
    brokers.unreachable.clear()
    await grants.acquire("amy", Mode.EXCLUSIVE, None, amy)
    assert amy.told == [("granted", 2)]


async def test_a_segment_ahead_of_the_topic_raises_the_epoch_past_it(
    store: MemoryStore, brokers: Brokers, leader: Leader
) -> None:
    grants = leader(1)
    ahead = next(iter(await segment_descriptors(store)))
    brokers.epochs[ahead] = 5  # taken over on its own, outside any grant
    amy = Channel(brokers)
    await grants.acquire("amy", Mode.EXCLUSIVE, None, amy)
    assert amy.told == [("granted", 6)]
    assert sorted(amy.segments_when_granted.values()) == [6, 6, 6, 6]
    assert await producer_status(store) == ProducerStatus(
        epoch=6, holder="amy", access_mode=Mode.EXCLUSIVE, term=1
    )


async def test_a_segment_a_client_raised_to_its_largest_epoch_is_still_fenced_past(
    store: MemoryStore, brokers: Brokers, leader: Leader
) -> None:
    """The wire fuzzer's find: a client's largest epoch, then a takeover, left a segment
    where the controller's fence past it needed an epoch beyond int64, and every grant of the
    topic failed from then on. Clients may ask for 2**62 at most, so there is room above."""
    grants = leader(1)
    ahead = next(iter(await segment_descriptors(store)))
    brokers.epochs[ahead] = MAX_REQUESTED_PRODUCER_EPOCH + 1
    amy = Channel(brokers)
    await grants.acquire("amy", Mode.EXCLUSIVE, None, amy)
    assert amy.told == [("granted", MAX_REQUESTED_PRODUCER_EPOCH + 2)]
    assert set(amy.segments_when_granted.values()) == {MAX_REQUESTED_PRODUCER_EPOCH + 2}


async def test_a_fence_past_the_largest_epoch_is_refused_and_nothing_is_stored(
    store: MemoryStore, brokers: Brokers, leader: Leader
) -> None:
    """No broker lets a segment reach the largest epoch; were one there, the grant is refused
    and the topic keeps an epoch its CRD can hold."""
    grants = leader(1)
    ahead = next(iter(await segment_descriptors(store)))
    brokers.epochs[ahead] = MAX_PRODUCER_EPOCH
    amy = Channel(brokers)
    assert await refused(grants, "amy", Mode.EXCLUSIVE, None, amy) is ErrorCode.SERVICE_NOT_READY
    assert amy.told == []
    assert (await producer_status(store)).epoch <= MAX_PRODUCER_EPOCH


async def test_children_of_a_pending_split_are_fenced_when_their_storage_exists(
    store: MemoryStore, brokers: Brokers, leader: Leader
) -> None:
    raw = await store.get(ScalableTopic.KIND, NS, NAME)
    change = SegmentLayout.from_status(raw["status"]).plan_split(0)
    pending = PendingOperation.model_validate({**change.to_dict(), "step": "Planned"})
    await store.patch_status(
        ScalableTopic.KIND, NS, NAME, {"status": {"pendingOperation": pending.to_wire()}}
    )
    made, not_made = change.children
    made_descriptor = await add_segment_object(
        store, made.segment_id, made.hash_range.start, made.hash_range.end
    )
    not_made_descriptor = await add_segment_object(
        store, not_made.segment_id, not_made.hash_range.start, not_made.hash_range.end
    )
    brokers.not_created.add(not_made_descriptor)  # placed, its storage not created yet
    grants = leader(1)
    amy = Channel(brokers)
    await grants.acquire("amy", Mode.EXCLUSIVE, None, amy)
    assert amy.told == [("granted", 1)]
    assert amy.segments_when_granted[made_descriptor] == 1
    assert not_made_descriptor not in amy.segments_when_granted
    assert len(amy.segments_when_granted) == 5


async def segment_descriptors(store: MemoryStore) -> list[str]:
    listing = await store.list("Segment", NS, f"{TOPIC_LABEL}={NAME}")
    return [item["metadata"]["name"].removeprefix(f"{NAME}-") for item in listing.items]


async def _is_none(value: Any) -> bool:
    return await value is None


async def _term_is(store: MemoryStore, term: int) -> bool:
    status = await producer_status(store)
    return status is not None and status.term == term


async def test_children_recorded_as_created_must_all_be_fenced(
    store: MemoryStore, brokers: Brokers, leader: Leader
) -> None:
    raw = await store.get(ScalableTopic.KIND, NS, NAME)
    change = SegmentLayout.from_status(raw["status"]).plan_split(0)
    pending = PendingOperation.model_validate({**change.to_dict(), "step": "ChildrenCreated"})
    await store.patch_status(
        ScalableTopic.KIND, NS, NAME, {"status": {"pendingOperation": pending.to_wire()}}
    )
    children = [
        await add_segment_object(store, c.segment_id, c.hash_range.start, c.hash_range.end)
        for c in change.children
    ]
    # The split will commit this child as it is: a grant that cannot fence it is no grant.
    brokers.unreachable.add(children[1])
    grants = leader(1)
    amy = Channel(brokers)
    assert await refused(grants, "amy", Mode.EXCLUSIVE, None, amy) is ErrorCode.SERVICE_NOT_READY
    brokers.unreachable.clear()
    await grants.acquire("amy", Mode.EXCLUSIVE, None, amy)
    assert amy.told == [("granted", 2)]
    assert {amy.segments_when_granted[c] for c in children} == {2}


# -- Exclusive and WaitForExclusive take nothing from connected producers (exclusive-producer
# seed); only ExclusiveWithFencing takes over.


async def test_exclusive_is_busy_while_a_shared_producer_is_connected(
    store: MemoryStore, brokers: Brokers, leader: Leader
) -> None:
    grants = leader(1)
    first = (await segment_descriptors(store))[0]
    brokers.connected[first] = {"shared-1"}
    amy = Channel(brokers)
    with pytest.raises(GrantRefused) as busy:
        await grants.acquire("amy", Mode.EXCLUSIVE, None, amy)
    assert busy.value.code is ErrorCode.PRODUCER_BUSY
    assert "'shared-1'" in str(busy.value) and amy.told == []
    # Found by the probe: nothing was written, reserved or fenced, and it keeps producing.
    assert await producer_status(store) is None
    assert brokers.fences == [] and brokers.connected[first] == {"shared-1"}

    brokers.connected[first] = set()  # it closes: amy may have the topic now
    await grants.acquire("amy", Mode.EXCLUSIVE, None, amy)
    assert amy.told == [("granted", 1)]


async def test_a_claim_a_segment_refuses_is_undone_and_leaves_its_producer_alone(
    store: MemoryStore, brokers: Brokers, leader: Leader
) -> None:
    grants = leader(1)
    segments = sorted(await segment_descriptors(store))
    busy_one = segments[2]
    brokers.connected[busy_one] = {"shared-1"}
    brokers.unseen.add(busy_one)  # it opened after the probe: the fence is what finds it
    amy = Channel(brokers)
    assert await refused(grants, "amy", Mode.EXCLUSIVE, None, amy) is ErrorCode.PRODUCER_BUSY
    assert amy.told == []
    # The claim was written as claiming before any fence, and undone: nobody holds the topic,
    # its epoch stays, every segment it reserved is released, and the busy segment was never
    # touched (no epoch raised: its producer is not fenced).
    assert all(brokers.claiming_when_fenced)
    assert await producer_status(store) == ProducerStatus(epoch=1, term=1)
    await until(lambda: all(brokers.holders.get(s) is None for s in segments))
    # The other three were reserved at epoch 1, then released there.
    assert {s: brokers.epochs.get(s, 0) for s in segments} == {
        s: 0 if s == busy_one else 1 for s in segments
    }
    assert brokers.connected[busy_one] == {"shared-1"}

    brokers.connected[busy_one] = set()
    await grants.acquire("amy", Mode.EXCLUSIVE, None, amy)
    assert amy.told == [("granted", 2)]
    status = await producer_status(store)
    assert status is not None and (status.holder, status.claiming) == ("amy", False)
    assert brokers.holders == dict.fromkeys(segments, "amy")


async def test_a_wait_claim_a_segment_refuses_keeps_its_place_in_line(
    store: MemoryStore, brokers: Brokers, leader: Leader
) -> None:
    grants = leader(1)
    segments = sorted(await segment_descriptors(store))
    brokers.connected[segments[0]] = {"shared-1"}
    brokers.unseen.add(segments[0])  # the probes never see it: every claim is refused
    cat = Channel(brokers)
    await grants.acquire("cat", Mode.WAIT_FOR_EXCLUSIVE, None, cat)
    assert cat.told == [("queued",)] and grants.waiting == ("cat",)
    await asyncio.sleep(5)  # tried again and again, each claim undone
    assert cat.epoch is None and await holder(store) is None
    assert brokers.connected[segments[0]] == {"shared-1"}
    brokers.connected[segments[0]] = set()
    await until(lambda: cat.epoch is not None)
    status = await producer_status(store)
    assert status is not None and (status.holder, status.claiming) == ("cat", False)
    assert cat.epoch == status.epoch and brokers.holders == dict.fromkeys(segments, "cat")


async def test_wait_for_exclusive_waits_for_other_producers_in_arrival_order(
    store: MemoryStore, brokers: Brokers, leader: Leader
) -> None:
    grants = leader(1)
    segments = sorted(await segment_descriptors(store))
    brokers.connected[segments[1]] = {"shared-1"}
    cat, dan, eve = Channel(brokers), Channel(brokers), Channel(brokers)
    await grants.acquire("cat", Mode.WAIT_FOR_EXCLUSIVE, None, cat)
    await grants.acquire("dan", Mode.WAIT_FOR_EXCLUSIVE, None, dan)
    assert (cat.told, dan.told) == ([("queued",)], [("queued",)])
    await asyncio.sleep(30)  # the leader looks again and again: shared-1 is still there
    assert grants.waiting == ("cat", "dan") and brokers.probes > 10
    # Waiting holds nothing: no segment is reserved, so Shared producers keep opening.
    assert await producer_status(store) is None
    assert all(brokers.holders.get(s) is None for s in segments)
    brokers.connected[segments[3]] = {"shared-2"}
    # An Exclusive request does not overtake the line, even on a topic nobody holds.
    assert await refused(grants, "eve", Mode.EXCLUSIVE, None, eve) is ErrorCode.PRODUCER_BUSY

    brokers.connected[segments[1]] = set()
    await asyncio.sleep(30)
    assert cat.epoch is None  # shared-2 is still connected
    brokers.connected[segments[3]] = set()  # the last one leaves: cat, the first in line, gets it
    await until(lambda: cat.epoch is not None)
    assert cat.told == [("queued",), ("granted", 1)] and dan.told == [("queued",)]
    assert sorted(cat.segments_when_granted.values()) == [1, 1, 1, 1]
    assert grants.waiting == ("dan",)

    await grants.release(cat)
    await until(lambda: dan.epoch is not None)
    assert dan.told == [("queued",), ("granted", 2)]


async def test_the_first_in_line_leaving_lets_the_next_one_try(
    store: MemoryStore, brokers: Brokers, leader: Leader
) -> None:
    grants = leader(1)
    first = (await segment_descriptors(store))[0]
    brokers.connected[first] = {"cat"}  # cat's own producer does not keep cat waiting
    brokers.connected[first] |= {"shared-1"}
    cat, dan = Channel(brokers), Channel(brokers)
    await grants.acquire("cat", Mode.WAIT_FOR_EXCLUSIVE, None, cat)
    await grants.acquire("dan", Mode.WAIT_FOR_EXCLUSIVE, None, dan)
    grants.detach(cat)  # cat's connection drops: it leaves the line
    brokers.connected[first] = {"cat"}  # shared-1 closes; cat's producer is another for dan
    await asyncio.sleep(30)
    assert dan.epoch is None
    brokers.connected[first] = set()
    await until(lambda: dan.epoch is not None)
    assert dan.told == [("queued",), ("granted", 1)] and grants.waiting == ()


async def test_fencing_takes_over_from_connected_producers(
    store: MemoryStore, brokers: Brokers, leader: Leader
) -> None:
    grants = leader(1)
    first = (await segment_descriptors(store))[0]
    brokers.connected[first] = {"shared-1"}
    amy = Channel(brokers)
    await grants.acquire("amy", Mode.EXCLUSIVE_WITH_FENCING, None, amy)
    assert amy.told == [("granted", 1)]
    assert brokers.connected[first] == set()  # fenced
    assert not any(brokers.claiming_when_fenced)  # no claim: a take-over


async def test_a_new_leader_undoes_a_claim_its_predecessor_did_not_confirm(
    store: MemoryStore, brokers: Brokers, leader: Leader
) -> None:
    # The predecessor wrote amy's claim and reserved some segments, then died before the
    # others answered: one of them has a Shared producer connected.
    segments = sorted(await segment_descriptors(store))
    await store.patch_status(
        ScalableTopic.KIND,
        NS,
        NAME,
        {
            "status": {
                "producer": ProducerStatus(
                    epoch=1, holder="amy", access_mode=Mode.EXCLUSIVE, term=1, claiming=True
                ).to_wire()
            }
        },
    )
    for segment in segments[:2]:
        brokers.epochs[segment], brokers.holders[segment] = 1, "amy"
    brokers.connected[segments[3]] = {"shared-1"}
    leader(2)
    await until(lambda: _term_is(store, 2))
    assert await producer_status(store) == ProducerStatus(epoch=1, term=2)
    await until(lambda: all(brokers.holders.get(s) is None for s in segments))
    assert brokers.connected[segments[3]] == {"shared-1"}
    assert brokers.epochs.get(segments[3], 0) == 0
