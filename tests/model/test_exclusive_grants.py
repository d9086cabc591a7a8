"""The pure decisions of topic-wide exclusive producer grants: each mode against a free topic,
a connected holder, a holder within its grace period, other producers connected and requests
waiting ahead; returning holders and their epochs; and a randomized run of requests, releases,
disconnections and Shared producers coming and going that checks the guarantees."""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from datetime import UTC, datetime

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scalable_topics.model.exclusive_grants import (
    Claim,
    ProducerHold,
    Refusal,
    Refuse,
    Resume,
    TakeOver,
    Wait,
    decide,
    fence_targets,
)
from scalable_topics.model.layout import SegmentLayout
from scalable_topics.model.resources import ProducerAccessMode, ProducerStatus

Mode = ProducerAccessMode
HELD = ProducerHold(3, "a", Mode.EXCLUSIVE)


@pytest.mark.parametrize("mode", [Mode.EXCLUSIVE, Mode.WAIT_FOR_EXCLUSIVE])
def test_a_free_topic_is_claimed_at_the_next_epoch(mode: ProducerAccessMode) -> None:
    # A claim, not a take-over: it stands only if no segment has another producer connected.
    assert decide(ProducerHold(3), False, "b", mode, None) == Claim(4)
    assert decide(ProducerHold(), False, "b", mode, None) == Claim(1)


def test_only_fencing_takes_a_free_topic_outright() -> None:
    assert decide(ProducerHold(3), False, "b", Mode.EXCLUSIVE_WITH_FENCING, None) == TakeOver(4)
    assert decide(ProducerHold(), False, "b", Mode.EXCLUSIVE_WITH_FENCING, None) == TakeOver(1)


def test_other_producers_connected_make_exclusive_busy_and_wait_wait() -> None:
    free = ProducerHold(3)
    busy = decide(free, False, "b", Mode.EXCLUSIVE, None, others=("s2", "s1"))
    assert isinstance(busy, Refuse) and busy.reason is Refusal.BUSY
    assert "other producers are connected to the topic ('s1', 's2')" in busy.message
    assert decide(free, False, "b", Mode.WAIT_FOR_EXCLUSIVE, None, others=("s1",)) == Wait()
    # Fencing takes over from them: that is what it is for.
    assert decide(free, False, "b", Mode.EXCLUSIVE_WITH_FENCING, None, others=("s1",)) == TakeOver(
        4
    )
    # The requester's own name is not another producer (its producers of an earlier grant).
    assert decide(free, False, "b", Mode.EXCLUSIVE, None, others=("b",)) == Claim(4)


def test_requests_waiting_ahead_are_served_first() -> None:
    free = ProducerHold(3)
    busy = decide(free, False, "b", Mode.EXCLUSIVE, None, ahead=2)
    assert isinstance(busy, Refuse) and busy.reason is Refusal.BUSY
    assert "2 WaitForExclusive producer(s) wait for the topic before 'b'" in busy.message
    assert decide(free, False, "b", Mode.WAIT_FOR_EXCLUSIVE, None, ahead=1) == Wait()
    assert decide(free, False, "b", Mode.EXCLUSIVE_WITH_FENCING, None, ahead=1) == TakeOver(4)
    # The first in line (nobody ahead), with nobody else connected, claims.
    assert decide(free, False, "b", Mode.WAIT_FOR_EXCLUSIVE, None, ahead=0) == Claim(4)


@pytest.mark.parametrize("connected", [True, False])
def test_a_held_topic_by_mode(connected: bool) -> None:
    busy = decide(HELD, connected, "b", Mode.EXCLUSIVE, None)
    assert isinstance(busy, Refuse) and busy.reason is Refusal.BUSY
    assert "'a' holds the topic at epoch 3" in busy.message
    assert decide(HELD, connected, "b", Mode.WAIT_FOR_EXCLUSIVE, None) == Wait()
    assert decide(HELD, connected, "b", Mode.EXCLUSIVE_WITH_FENCING, None) == TakeOver(4, "a")


def test_shared_producers_and_nameless_ones_ask_for_no_grant() -> None:
    shared = decide(ProducerHold(), False, "b", Mode.SHARED, None)
    assert isinstance(shared, Refuse) and shared.reason is Refusal.INVALID
    assert "open on each segment" in shared.message
    nameless = decide(ProducerHold(), False, "", Mode.EXCLUSIVE, None)
    assert isinstance(nameless, Refuse) and nameless.reason is Refusal.INVALID


def test_the_holder_resumes_with_its_epoch_within_its_grace_period() -> None:
    for mode in (Mode.EXCLUSIVE, Mode.WAIT_FOR_EXCLUSIVE, Mode.EXCLUSIVE_WITH_FENCING):
        assert decide(HELD, False, "a", mode, 3) == Resume(3)
    # Still connected through its old request: the controller has not seen the drop yet.
    busy = decide(HELD, True, "a", Mode.EXCLUSIVE, 3)
    assert isinstance(busy, Refuse) and busy.reason is Refusal.BUSY


def test_the_last_holder_claims_its_epoch_again_if_nobody_took_over() -> None:
    # Released (or expired): it gets its epoch back, but takes nothing from anyone.
    assert decide(ProducerHold(3), False, "a", Mode.EXCLUSIVE, 3) == Claim(3)
    busy = decide(ProducerHold(3), False, "a", Mode.EXCLUSIVE, 3, others=("s",))
    assert isinstance(busy, Refuse) and busy.reason is Refusal.BUSY
    assert decide(ProducerHold(3), False, "a", Mode.WAIT_FOR_EXCLUSIVE, 3, ahead=1) == Wait()
    assert decide(
        ProducerHold(3), False, "a", Mode.EXCLUSIVE_WITH_FENCING, 3, others=("s",)
    ) == Resume(3)


def test_an_older_epoch_is_fenced_for_good() -> None:
    for hold in (HELD, ProducerHold(3)):
        fenced = decide(hold, False, "a", Mode.EXCLUSIVE_WITH_FENCING, 2)
        assert isinstance(fenced, Refuse) and fenced.reason is Refusal.FENCED
        assert "held epoch 2, but the topic was taken over at epoch 3" in fenced.message
    # Another holder's current epoch is not the requester's to use.
    stolen = decide(HELD, False, "b", Mode.EXCLUSIVE, 3)
    assert isinstance(stolen, Refuse) and stolen.reason is Refusal.FENCED


@pytest.mark.parametrize(
    "mode", [Mode.EXCLUSIVE, Mode.WAIT_FOR_EXCLUSIVE, Mode.EXCLUSIVE_WITH_FENCING]
)
def test_a_name_longer_than_any_holder_may_have_is_refused(mode: ProducerAccessMode) -> None:
    """The holder is fenced onto every segment: a name their admin API would refuse (more than
    PRODUCER_NAME_MAX characters) is refused here, before anything is granted."""
    refused = decide(ProducerHold(3), False, "p" * 1025, mode, None)
    assert refused == Refuse(
        Refusal.INVALID,
        "producer_name: a producer name has at most 1024 characters, not 1025",
    )
    assert decide(ProducerHold(3), False, "p" * 1024, Mode.EXCLUSIVE_WITH_FENCING, None) == (
        TakeOver(4)
    )


def test_an_epoch_never_granted_is_refused() -> None:
    for epoch in (0, 4):
        invalid = decide(HELD, False, "a", Mode.EXCLUSIVE, epoch)
        assert isinstance(invalid, Refuse) and invalid.reason is Refusal.INVALID
        assert f"no grant was made at epoch {epoch}" in invalid.message


def test_hold_round_trips_the_status_and_never_goes_back() -> None:
    status = ProducerStatus(epoch=5, holder="a", access_mode=Mode.EXCLUSIVE, term=2)
    hold = ProducerHold.from_status(status)
    assert hold == ProducerHold(5, "a", Mode.EXCLUSIVE)
    assert hold.to_status(3) == status.model_copy(update={"term": 3})
    assert hold.released() == ProducerHold(5)
    assert ProducerHold.from_status(None) == ProducerHold()
    claiming = hold.granted("b", Mode.WAIT_FOR_EXCLUSIVE, 6, claiming=True)
    assert claiming.to_status(3).claiming
    assert ProducerHold.from_status(claiming.to_status(3)) == claiming
    assert claiming.confirmed() == ProducerHold(6, "b", Mode.WAIT_FOR_EXCLUSIVE)
    assert claiming.released() == ProducerHold(6)
    with pytest.raises(ValueError, match="never goes back"):
        hold.granted("b", Mode.EXCLUSIVE, 4)


def test_fence_targets_are_the_active_segments_and_pending_children() -> None:
    layout = SegmentLayout.initial(2, datetime(2026, 1, 1, tzinfo=UTC))
    planned = fence_targets(layout, [2, 3], children_created=False)
    assert (planned.required, planned.if_present) == ({0, 1}, {2, 3})
    # Once recorded as created, the children are committed as they are: they must be fenced.
    created = fence_targets(layout, [2, 3], children_created=True)
    assert (created.required, created.if_present) == ({0, 1, 2, 3}, frozenset())
    assert fence_targets(None, (), children_created=False).required == frozenset()


# -- randomized -----------------------------------------------------------------------------------


@dataclass
class Producer:
    epoch: int | None = None  # the epoch it was told it holds
    fenced: bool = False


@dataclass
class Topic:
    """The topic as a controller and its brokers would keep it, driven by ``decide`` alone:
    ``shared`` are the Shared producers connected (what a probe or a refused claim reports),
    ``waiting`` the line of WaitForExclusive requests in arrival order."""

    hold: ProducerHold = field(default_factory=ProducerHold)
    connected: bool = False
    producers: dict[str, Producer] = field(default_factory=dict)
    shared: set[str] = field(default_factory=set)
    waiting: list[tuple[int, str]] = field(default_factory=list)  # (request number, name)
    arrivals: list[int] = field(default_factory=list)  # every request queued, in order
    granted_from_line: list[int] = field(default_factory=list)
    granted_epochs: list[int] = field(default_factory=list)

    def grant(self, name: str, mode: ProducerAccessMode, epoch: int) -> None:
        assert epoch >= self.hold.epoch
        for other, producer in self.producers.items():
            if other != name and producer.epoch is not None and producer.epoch < epoch:
                producer.fenced = True  # every segment is fenced before the grant is reported
        self.shared.clear()  # fencing closes them; a claim is only made when there are none
        self.hold = self.hold.granted(name, mode, epoch)
        self.connected = True
        self.producers[name] = Producer(epoch)
        self.granted_epochs.append(epoch)

    def serve_the_line(self) -> None:
        """What the keeper does whenever it looks: try the first in line, in order."""
        while self.waiting and self.hold.holder is None:
            number, name = self.waiting[0]
            decision = decide(
                self.hold, False, name, Mode.WAIT_FOR_EXCLUSIVE, None, others=self.shared
            )
            if isinstance(decision, Wait):
                assert self.shared  # only another producer keeps the first in line waiting
                return
            assert decision == Claim(self.hold.epoch + 1) and not self.shared
            self.waiting.pop(0)
            self.granted_from_line.append(number)
            self.grant(name, Mode.WAIT_FOR_EXCLUSIVE, decision.epoch)


names = st.sampled_from(["a", "b", "c"])
modes = st.sampled_from([Mode.EXCLUSIVE, Mode.WAIT_FOR_EXCLUSIVE, Mode.EXCLUSIVE_WITH_FENCING])
shared_names = st.sampled_from(["s1", "s2"])
steps = st.lists(
    st.one_of(
        st.tuples(st.just("ask"), names, modes, st.booleans()),
        st.tuples(st.just("release")),
        st.tuples(st.just("drop")),
        st.tuples(st.just("shared opens"), shared_names),
        st.tuples(st.just("shared closes"), shared_names),
    ),
    max_size=40,
)


@settings(max_examples=300, deadline=None)
@given(steps)
def test_one_holder_epochs_only_grow_and_the_fenced_never_come_back(
    steps: list[tuple[object, ...]],
) -> None:
    topic = Topic()
    for step in steps:
        before = topic.hold
        if step[0] == "ask":
            _, name, mode, with_epoch = step
            assert isinstance(name, str) and isinstance(mode, ProducerAccessMode)
            if name in (waiter for _, waiter in topic.waiting):
                continue  # one request per producer at a time
            mine = topic.producers.get(name)
            epoch = mine.epoch if with_epoch and mine is not None else None
            holder_connected = topic.connected and topic.hold.holder is not None
            ahead = len(topic.waiting)
            decision = decide(
                topic.hold, holder_connected, name, mode, epoch, ahead=ahead, others=topic.shared
            )
            if mine is not None and mine.fenced and epoch is not None:
                # A producer taken over with fencing never writes again under its epoch.
                assert isinstance(decision, Refuse) and decision.reason is Refusal.FENCED
            match decision:
                case TakeOver(new_epoch, displaced):
                    # Only fencing takes a topic over: from a holder or from Shared producers.
                    assert mode is Mode.EXCLUSIVE_WITH_FENCING
                    assert epoch is None and new_epoch == before.epoch + 1
                    assert displaced == before.holder
                    topic.grant(name, mode, new_epoch)
                case Claim(new_epoch):
                    # Exclusive and Wait take a free topic only: nobody holds it, nobody is
                    # connected, nobody waits ahead.
                    assert mode is not Mode.EXCLUSIVE_WITH_FENCING
                    assert before.holder is None and not topic.shared and not ahead
                    if epoch is None:
                        assert new_epoch == before.epoch + 1
                        topic.grant(name, mode, new_epoch)
                    else:  # the last holder, nobody after it: its own epoch back
                        assert new_epoch == epoch == before.epoch == topic.granted_epochs[-1]
                        topic.hold = before.granted(name, mode, new_epoch)
                        topic.connected = True
                case Resume(same):
                    # The same epoch goes back only to the producer that held it last.
                    assert same == epoch == before.epoch and topic.granted_epochs[-1] == same
                    assert before.holder in (None, name) and not holder_connected
                    if before.holder is None:
                        assert mode is Mode.EXCLUSIVE_WITH_FENCING
                        topic.shared.clear()
                    topic.hold = before.granted(name, mode, same)
                    topic.connected = True
                case Wait():
                    assert mode is Mode.WAIT_FOR_EXCLUSIVE
                    assert before.holder is not None or topic.shared or ahead
                    if epoch is None:
                        topic.waiting.append((len(topic.arrivals), name))
                        topic.arrivals.append(len(topic.arrivals))
                case Refuse(reason, _):
                    assert topic.hold == before
                    if reason is Refusal.BUSY and mode is Mode.EXCLUSIVE and epoch is None:
                        assert before.holder is not None or topic.shared or ahead
        elif step[0] == "release" and topic.hold.holder is not None:
            topic.hold = topic.hold.released()
            topic.connected = False
        elif step[0] == "drop":
            topic.connected = False
        elif step[0] == "shared opens":
            if topic.hold.holder is None:  # a waiting request holds nothing: Shared opens
                assert isinstance(step[1], str)
                topic.shared.add(step[1])
        elif step[0] == "shared closes":
            topic.shared.discard(str(step[1]))
        topic.serve_the_line()
        assert topic.hold.epoch >= before.epoch
        # Every new grant has an epoch of its own, above all earlier ones.
        granted = topic.granted_epochs
        assert all(earlier < later for earlier, later in itertools.pairwise(granted))
        # At most one producer holds the current epoch unfenced.
        current = [n for n, p in topic.producers.items() if p.epoch == topic.hold.epoch]
        assert len(current) <= 1
        # Nobody holds the topic while another producer is connected to it.
        assert topic.hold.holder is None or not topic.shared
        # The line is served in arrival order.
        assert topic.granted_from_line == topic.arrivals[: len(topic.granted_from_line)]
