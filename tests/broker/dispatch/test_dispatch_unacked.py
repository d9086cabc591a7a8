"""The unacknowledged-message limits (dispatch/unacked.py) in every mode: a consumer, and a
subscription, hold at most their limit of delivered, unacknowledged messages, and resume at
half of it; nothing is lost, duplicated or stuck, and Key_Shared keeps its contract."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.stateful import invariant
from test_dispatch_key_shared_machine import UNBLOCKING_INTERVAL, KeySharedMachine

from scalable_topics.broker.dispatch import (
    Consumer,
    ConsumerId,
    Delivery,
    Dispatcher,
    ExclusiveDispatcher,
    FailoverDispatcher,
    KeySharedDispatcher,
    Message,
    SharedDispatcher,
    UnackedLimits,
)
from scalable_topics.model.position import Position

Make = Callable[[UnackedLimits], Dispatcher]
FACTORIES: dict[str, Make] = {
    "exclusive": lambda limits: ExclusiveDispatcher(unacked=limits),
    "failover": lambda limits: FailoverDispatcher(unacked=limits),
    "shared": lambda limits: SharedDispatcher(unacked=limits),
    "key_shared": lambda limits: KeySharedDispatcher(unacked=limits),
}
every_mode = pytest.mark.parametrize("make", FACTORIES.values(), ids=FACTORIES.keys())


def read(dispatcher: Dispatcher, first: int, count: int, key_hash: int = 7) -> int:
    dispatcher.accept([Message(Position(e), key_hash) for e in range(first, first + count)])
    return first + count


def delivered(dispatcher: Dispatcher) -> dict[ConsumerId, list[Position]]:
    sent: dict[ConsumerId, list[Position]] = {}
    for delivery in dispatcher.take_deliveries():
        sent.setdefault(delivery.consumer_id, []).extend(m.position for m in delivery.messages)
    return sent


def test_limits_are_zero_or_positive() -> None:
    with pytest.raises(ValueError, match="per_consumer is 0 \\(none\\) or positive, not -1"):
        UnackedLimits(per_consumer=-1)


@every_mode
def test_a_consumer_that_never_acks_gets_exactly_its_limit_then_more_at_half(make: Make) -> None:
    dispatcher = make(UnackedLimits(per_consumer=10))
    dispatcher.add_consumer(Consumer(1, "one"))
    dispatcher.add_permits(1, 1000)
    read(dispatcher, 0, 100)
    assert len(delivered(dispatcher)[1]) == 10
    assert delivered(dispatcher) == {}  # permits left, messages waiting: still nothing
    assert dispatcher.stats().consumers[0].blocked_on_unacked
    assert dispatcher.stats().consumers[0].permits == 990  # permits are kept, not spent
    held = [m.position for m in dispatcher.pending(1)]
    dispatcher.ack(1, held[:4])  # 6 held: above half, still blocked
    assert delivered(dispatcher) == {}
    dispatcher.ack(1, held[4:5])  # 5 held: half, resumes up to the limit
    assert delivered(dispatcher)[1] == [Position(e) for e in range(10, 15)]
    assert len(dispatcher.pending(1)) == 10


@every_mode
def test_redeliveries_count_against_the_limit(make: Make) -> None:
    dispatcher = make(UnackedLimits(per_consumer=4))
    dispatcher.add_consumer(Consumer(1, "one"))
    dispatcher.add_permits(1, 1000)
    read(dispatcher, 0, 20)
    first = delivered(dispatcher)[1]
    assert len(first) == 4
    dispatcher.redeliver(1)  # all four come back, and are the next four delivered
    again = delivered(dispatcher)[1]
    assert sorted(again) == sorted(first)
    assert delivered(dispatcher) == {}


@pytest.mark.parametrize(
    "make",
    [FACTORIES["shared"], FACTORIES["key_shared"]],
    ids=["shared", "key_shared"],
)
def test_the_subscription_limit_spans_its_consumers(make: Make) -> None:
    dispatcher = make(UnackedLimits(per_consumer=8, per_subscription=10))
    for consumer_id in (1, 2):
        dispatcher.add_consumer(Consumer(consumer_id, f"c{consumer_id}"))
        dispatcher.add_permits(consumer_id, 1000)
    entry = 0
    for key_hash in range(0, 0x10000, 0x1000):  # keys all over the ring: both get some
        entry = read(dispatcher, entry, 2, key_hash)
    sent = delivered(dispatcher)
    assert sum(len(positions) for positions in sent.values()) == 10
    assert all(len(positions) <= 8 for positions in sent.values())
    assert dispatcher.stats().blocked_on_unacked
    assert delivered(dispatcher) == {}
    # Acks at either consumer count: down to half (5) of the subscription's, it resumes.
    held = [(c, m.position) for c in (1, 2) for m in dispatcher.pending(c)]
    for consumer_id, position in held[:4]:
        dispatcher.ack(consumer_id, [position])
    assert delivered(dispatcher) == {}  # 6 held
    consumer_id, position = held[4]
    dispatcher.ack(consumer_id, [position])
    resumed = delivered(dispatcher)
    assert sum(len(positions) for positions in resumed.values()) == 5
    assert dispatcher.unacked == 10


@every_mode
def test_without_limits_nothing_is_withheld(make: Make) -> None:
    dispatcher = make(UnackedLimits())
    dispatcher.add_consumer(Consumer(1, "one"))
    dispatcher.add_permits(1, 3000)
    read(dispatcher, 0, 3000)
    total = 0
    while sent := delivered(dispatcher):
        total += len(sent[1])
    assert total == 3000
    assert not dispatcher.stats().consumers[0].blocked_on_unacked


OPERATIONS = st.lists(
    st.one_of(
        st.tuples(st.just("join"), st.integers(0, 3)),
        st.tuples(st.just("leave"), st.integers(0, 3)),
        st.tuples(st.just("permits"), st.integers(0, 3), st.integers(0, 9)),
        st.tuples(st.just("read"), st.lists(st.integers(0, 3), max_size=6)),
        st.tuples(st.just("ack"), st.integers(0, 3), st.integers(0, 4)),
        st.tuples(st.just("nack"), st.integers(0, 3), st.integers(0, 4)),
    ),
    max_size=50,
)


class Model:
    """The limits as the contract states them: the blocked flags with their hysteresis."""

    def __init__(self, limits: UnackedLimits) -> None:
        self.limits = limits
        self.blocked: set[ConsumerId] = set()
        self.subscription_blocked = False

    def before_decision(self, held: dict[ConsumerId, int]) -> None:
        per, whole = self.limits.per_consumer, self.limits.per_subscription
        self.blocked = {c for c in self.blocked if c in held and held[c] > per // 2}
        if self.subscription_blocked and sum(held.values()) <= whole // 2:
            self.subscription_blocked = False

    def check(self, held: dict[ConsumerId, int], deliveries: list[Delivery]) -> None:
        per, whole = self.limits.per_consumer, self.limits.per_subscription
        got = {d.consumer_id: len(d.messages) for d in deliveries}
        for consumer_id, count in got.items():
            assert consumer_id not in self.blocked, f"{consumer_id} received while blocked"
            if per:
                assert held[consumer_id] + count <= per
        if whole and got:
            assert not self.subscription_blocked, "delivered while the subscription is blocked"
            assert sum(held.values()) + sum(got.values()) <= whole

    def after_decision(self, held: dict[ConsumerId, int]) -> None:
        per, whole = self.limits.per_consumer, self.limits.per_subscription
        self.blocked |= {c for c, n in held.items() if per and n >= per}
        if whole and sum(held.values()) >= whole:
            self.subscription_blocked = True


@every_mode
@settings(max_examples=80, deadline=None)
@given(
    operations=OPERATIONS,
    per_consumer=st.integers(0, 5),
    per_subscription=st.integers(0, 8),
)
def test_random_use_keeps_the_limits_and_loses_nothing(
    make: Make, operations: list[tuple[object, ...]], per_consumer: int, per_subscription: int
) -> None:
    limits = UnackedLimits(per_consumer, per_subscription)
    dispatcher = make(limits)
    model = Model(limits)
    exclusive = isinstance(dispatcher, ExclusiveDispatcher)
    ordered = exclusive or isinstance(dispatcher, FailoverDispatcher)
    accepted = 0
    acked: set[Position] = set()

    def held() -> dict[ConsumerId, int]:
        return {
            c.consumer_id: len(dispatcher.pending(c.consumer_id)) for c in dispatcher.consumers()
        }

    def decide() -> None:
        model.before_decision(held())
        before = held()
        deliveries = dispatcher.take_deliveries()
        model.check(before, deliveries)
        model.after_decision(held())
        assert dispatcher.outstanding == accepted - len(acked)
        if ordered and deliveries:
            (delivery,) = deliveries
            sent = [m.position for m in delivery.messages]
            pending = {
                m.position
                for c in dispatcher.consumers()
                for m in dispatcher.pending(c.consumer_id)
            }
            waiting = {Position(e) for e in range(accepted)} - acked - pending
            assert not waiting or sent[-1] < min(waiting)

    for operation in operations:
        attached = {c.consumer_id for c in dispatcher.consumers()}
        match operation:
            case ("join", int(cid)) if cid not in attached and not (exclusive and attached):
                dispatcher.add_consumer(Consumer(cid, f"c{cid}"))
            case ("leave", int(cid)) if cid in attached:
                dispatcher.remove_consumer(cid)
            case ("permits", int(cid), int(permits)) if cid in attached:
                dispatcher.add_permits(cid, permits)
            case ("read", list(key_hashes)):
                batch = [Message(Position(accepted + i), h) for i, h in enumerate(key_hashes)]
                dispatcher.accept(batch)
                accepted += len(batch)
            case ("ack", int(cid), int(count)) if cid in attached:
                chosen = [m.position for m in dispatcher.pending(cid)][:count]
                dispatcher.ack(cid, chosen)
                acked.update(chosen)
            case ("nack", int(cid), int(count)) if cid in attached:
                dispatcher.redeliver(cid, [m.position for m in dispatcher.pending(cid)][:count])
        decide()
    # Consumers that keep acknowledging get everything: the limits never stall them for good.
    if not dispatcher.consumers():
        dispatcher.add_consumer(Consumer(9, "finisher"))
    for consumer in dispatcher.consumers():
        dispatcher.add_permits(consumer.consumer_id, accepted + 1)
    for _ in range(accepted + 2):
        decide()
        for consumer in dispatcher.consumers():
            chosen = [m.position for m in dispatcher.pending(consumer.consumer_id)]
            dispatcher.ack(consumer.consumer_id, chosen)
            acked.update(chosen)
        if len(acked) == accepted:
            break
    assert len(acked) == accepted, f"stuck with {accepted - len(acked)} unacknowledged"


class KeySharedUnderLimits(KeySharedMachine):
    """The Key_Shared machine's contract (a key pending at one consumer at a time, per-key
    order, draining hashes, liveness) with small unacked limits in force."""

    LIMITS = UnackedLimits(per_consumer=3, per_subscription=5)

    def __init__(self) -> None:
        super().__init__()
        self.dispatcher = KeySharedDispatcher(
            points_per_consumer=3,
            max_buffered=30,
            unblocking_interval=UNBLOCKING_INTERVAL,
            unacked=self.LIMITS,
        )
        self.model = Model(self.LIMITS)

    def take(self) -> None:
        held = {c: len(messages) for c, messages in self.holding.items()}
        self.model.before_decision(held)
        self.unblock_batch_open = False
        deliveries = self.dispatcher.take_deliveries()
        self.model.check(held, deliveries)
        for delivery in deliveries:
            self.record(delivery)
        self.model.after_decision({c: len(messages) for c, messages in self.holding.items()})
        self.check_no_older_message_of_the_key_waits(deliveries)

    @invariant()
    def within_the_limits(self) -> None:
        assert all(len(held) <= 3 for held in self.holding.values())
        assert sum(len(held) for held in self.holding.values()) <= 5

    def teardown(self) -> None:
        """Consumers that keep acknowledging drain everything, whatever the limits held back:
        acks (as the I/O layer does after each) and the unblock timers drive delivery."""
        if not self.holding:
            self.join("finisher", 0)
        ample = len(self.accepted) + 1
        for consumer_id in self.live():
            self.dispatcher.add_permits(consumer_id, ample)
            self.granted[consumer_id] += ample
        for _ in range(2 * len(self.accepted) + 4):
            self.take()
            for consumer_id in self.live():
                held = list(self.holding[consumer_id])
                if held:
                    self.dispatcher.ack(consumer_id, held)
                    self.holding[consumer_id].clear()
                    self.acked.update(held)
                    self.note_wakeup()
            if self.wakeup_at is not None:
                self.unblock_timer_fires()
            self.contract_holds()
            if self.acked == self.accepted:
                break
        assert self.acked == self.accepted, f"stuck: {sorted(self.accepted - self.acked)}"


KeySharedUnderLimits.TestCase.settings = settings(
    max_examples=200, stateful_step_count=40, deadline=None
)
test_key_shared_contract_under_unacked_limits = KeySharedUnderLimits.TestCase
