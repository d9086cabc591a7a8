"""The pure decisions of topic-wide exclusive producer grants: each mode against a free topic,
a connected holder and a holder within its grace period; returning holders and their epochs;
and a randomized run of requests, releases and disconnections that checks the guarantees."""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from datetime import UTC, datetime

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scalable_topics.model.exclusive_grants import (
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


@pytest.mark.parametrize(
    "mode", [Mode.EXCLUSIVE, Mode.WAIT_FOR_EXCLUSIVE, Mode.EXCLUSIVE_WITH_FENCING]
)
def test_a_free_topic_is_taken_at_the_next_epoch(mode: ProducerAccessMode) -> None:
    assert decide(ProducerHold(3), False, "b", mode, None) == TakeOver(4)
    assert decide(ProducerHold(), False, "b", mode, None) == TakeOver(1)


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


def test_the_last_holder_resumes_after_its_release_if_nobody_took_over() -> None:
    assert decide(ProducerHold(3), False, "a", Mode.EXCLUSIVE, 3) == Resume(3)


def test_an_older_epoch_is_fenced_for_good() -> None:
    for hold in (HELD, ProducerHold(3)):
        fenced = decide(hold, False, "a", Mode.EXCLUSIVE_WITH_FENCING, 2)
        assert isinstance(fenced, Refuse) and fenced.reason is Refusal.FENCED
        assert "held epoch 2, but the topic was taken over at epoch 3" in fenced.message
    # Another holder's current epoch is not the requester's to use.
    stolen = decide(HELD, False, "b", Mode.EXCLUSIVE, 3)
    assert isinstance(stolen, Refuse) and stolen.reason is Refusal.FENCED


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
    """The topic as a controller would keep it, driven by ``decide`` alone."""

    hold: ProducerHold = field(default_factory=ProducerHold)
    connected: bool = False
    producers: dict[str, Producer] = field(default_factory=dict)
    waiting: list[tuple[str, ProducerAccessMode]] = field(default_factory=list)
    granted_epochs: list[int] = field(default_factory=list)

    def grant(self, name: str, mode: ProducerAccessMode, epoch: int) -> None:
        assert epoch >= self.hold.epoch
        for other, producer in self.producers.items():
            if other != name and producer.epoch is not None and producer.epoch < epoch:
                producer.fenced = True  # every segment is fenced before the grant is reported
        self.hold = self.hold.granted(name, mode, epoch)
        self.connected = True
        self.producers[name] = Producer(epoch)
        self.granted_epochs.append(epoch)

    def release(self) -> None:
        self.hold = self.hold.released()
        self.connected = False
        while self.waiting and self.hold.holder is None:
            name, mode = self.waiting.pop(0)
            decision = decide(self.hold, False, name, mode, None)
            assert isinstance(decision, TakeOver)
            self.grant(name, mode, decision.epoch)


names = st.sampled_from(["a", "b", "c"])
modes = st.sampled_from([Mode.EXCLUSIVE, Mode.WAIT_FOR_EXCLUSIVE, Mode.EXCLUSIVE_WITH_FENCING])
steps = st.lists(
    st.one_of(
        st.tuples(st.just("ask"), names, modes, st.booleans()),
        st.tuples(st.just("release")),
        st.tuples(st.just("drop")),
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
            mine = topic.producers.get(name)
            epoch = mine.epoch if with_epoch and mine is not None else None
            holder_connected = topic.connected and topic.hold.holder is not None
            decision = decide(topic.hold, holder_connected, name, mode, epoch)
            if mine is not None and mine.fenced and epoch is not None:
                # A producer taken over with fencing never writes again under its epoch.
                assert isinstance(decision, Refuse) and decision.reason is Refusal.FENCED
            match decision:
                case TakeOver(new_epoch, displaced):
                    assert epoch is None and new_epoch == before.epoch + 1
                    assert displaced == before.holder
                    # Only fencing displaces a holder; Exclusive and Wait never do.
                    assert displaced is None or mode is Mode.EXCLUSIVE_WITH_FENCING
                    topic.grant(name, mode, new_epoch)
                case Resume(same):
                    # The same epoch goes back only to the producer that held it last.
                    assert same == epoch == before.epoch and topic.granted_epochs[-1] == same
                    assert before.holder in (None, name) and not holder_connected
                    topic.hold = before.granted(name, mode, same)
                    topic.connected = True
                case Wait():
                    assert mode is Mode.WAIT_FOR_EXCLUSIVE and before.holder is not None
                    topic.waiting.append((name, mode))
                case Refuse():
                    assert topic.hold == before
        elif step[0] == "release" and topic.hold.holder is not None:
            topic.release()
        elif step[0] == "drop":
            topic.connected = False
        assert topic.hold.epoch >= before.epoch
        # Every new grant has an epoch of its own, above all earlier ones.
        granted = topic.granted_epochs
        assert all(earlier < later for earlier, later in itertools.pairwise(granted))
        # At most one producer holds the current epoch unfenced.
        current = [n for n, p in topic.producers.items() if p.epoch == topic.hold.epoch]
        assert len(current) <= 1
