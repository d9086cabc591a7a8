"""What every dispatcher shares: errors, ignored acks, accounting, and randomized safety checks."""

from collections.abc import Callable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scalable_topics.broker.dispatch import (
    Consumer,
    Dispatcher,
    DuplicateConsumer,
    ExclusiveDispatcher,
    FailoverDispatcher,
    KeySharedDispatcher,
    Message,
    SharedDispatcher,
    UnknownConsumer,
)
from scalable_topics.model.position import Position

FACTORIES: dict[str, Callable[[], Dispatcher]] = {
    "exclusive": ExclusiveDispatcher,
    "failover": FailoverDispatcher,
    "shared": SharedDispatcher,
    "key_shared": KeySharedDispatcher,
}
every_mode = pytest.mark.parametrize("make", FACTORIES.values(), ids=FACTORIES.keys())


def messages(*entry_ids: int, key_hash: int = 7) -> list[Message]:
    return [Message(Position(e), key_hash) for e in entry_ids]


def one_consumer(make: Callable[[], Dispatcher], permits: int = 10) -> Dispatcher:
    dispatcher = make()
    dispatcher.add_consumer(Consumer(1, "one"))
    dispatcher.add_permits(1, permits)
    return dispatcher


@every_mode
def test_unknown_consumers_are_refused_where_it_matters_and_ignored_elsewhere(
    make: Callable[[], Dispatcher],
) -> None:
    dispatcher = one_consumer(make)
    with pytest.raises(UnknownConsumer, match="consumer id 9"):
        dispatcher.add_permits(9, 1)
    with pytest.raises(UnknownConsumer):
        dispatcher.remove_consumer(9)
    with pytest.raises(UnknownConsumer):
        dispatcher.pending(9)
    with pytest.raises(DuplicateConsumer):
        dispatcher.add_consumer(Consumer(1, "again"))
    dispatcher.ack(9, [Position(0)])  # a closed consumer's late ack
    dispatcher.redeliver(9)


@every_mode
def test_acks_of_unknown_positions_are_ignored(make: Callable[[], Dispatcher]) -> None:
    dispatcher = one_consumer(make)
    dispatcher.accept(messages(0, 1))
    dispatcher.take_deliveries()
    dispatcher.ack(1, [Position(5), Position(1, 3)])
    dispatcher.redeliver(1, [Position(7)])
    assert [m.position for m in dispatcher.pending(1)] == [Position(0), Position(1)]
    assert dispatcher.outstanding == 2
    stats = dispatcher.stats()
    assert (stats.delivered_total, stats.acked_total, stats.redelivered_total) == (2, 0, 0)


@every_mode
def test_a_message_acked_through_another_consumer_is_never_delivered_again(
    make: Callable[[], Dispatcher],
) -> None:
    """A client reconnects: the broker took back what its old session had, and the client
    acks those messages through its new consumer (or they were pending at another one)."""
    dispatcher = make()
    exclusive = isinstance(dispatcher, ExclusiveDispatcher)
    dispatcher.add_consumer(Consumer(1, "old session"))
    dispatcher.add_permits(1, 10)
    dispatcher.accept(messages(0, 1, 2))
    dispatcher.take_deliveries()
    dispatcher.remove_consumer(1)  # 0, 1 and 2 wait for redelivery
    dispatcher.add_consumer(Consumer(2, "new session"))
    dispatcher.ack(2, [Position(0), Position(2)])
    dispatcher.add_permits(2, 10)
    delivered = [m.position for d in dispatcher.take_deliveries() for m in d.messages]
    assert delivered == [Position(1)]
    if not exclusive:  # one consumer at a time there
        dispatcher.add_consumer(Consumer(3, "another"))
    dispatcher.ack(2 if exclusive else 3, [Position(1)])  # pending at 2, acked through 3
    assert dispatcher.pending(2) == []
    assert dispatcher.outstanding == 0
    assert dispatcher.stats().acked_total == 3


@every_mode
def test_a_message_acked_while_read_ahead_is_never_delivered(
    make: Callable[[], Dispatcher],
) -> None:
    """After a reconnect the broker reads the log again; the client's ack of what its old
    session received can come while those messages wait in the read buffer, unsent."""
    dispatcher = make()
    dispatcher.add_consumer(Consumer(1, "new session"))
    dispatcher.accept(messages(0, 1, 2))  # no permits yet: nothing goes out
    dispatcher.ack(1, [Position(0), Position(2)])
    dispatcher.add_permits(1, 10)
    delivered = [m.position for d in dispatcher.take_deliveries() for m in d.messages]
    assert delivered == [Position(1)]
    assert dispatcher.stats().acked_total == 2
    assert dispatcher.outstanding == 1


@every_mode
def test_accept_insists_on_log_order(make: Callable[[], Dispatcher]) -> None:
    dispatcher = one_consumer(make)
    dispatcher.accept(messages(3, 4))
    with pytest.raises(ValueError, match="log order"):
        dispatcher.accept(messages(4))
    dispatcher.accept([Message(Position(4, 1), 7)])  # the next message of a batch entry is fine


@every_mode
def test_permits_are_never_negative(make: Callable[[], Dispatcher]) -> None:
    with pytest.raises(ValueError, match="non-negative"):
        one_consumer(make).add_permits(1, -1)


@every_mode
def test_only_key_shared_ever_asks_for_an_unblock_wakeup(make: Callable[[], Dispatcher]) -> None:
    dispatcher = one_consumer(make)
    dispatcher.accept(messages(0))
    dispatcher.take_deliveries()
    dispatcher.ack(1, [Position(0)])
    assert dispatcher.unblock_wakeup(1.0) is None
    assert dispatcher.outstanding == 0


OPERATIONS = st.lists(
    st.one_of(
        st.tuples(st.just("join"), st.integers(0, 3)),
        st.tuples(st.just("leave"), st.integers(0, 3)),
        st.tuples(st.just("permits"), st.integers(0, 3), st.integers(0, 5)),
        st.tuples(st.just("read"), st.lists(st.integers(0, 3), max_size=5)),
        st.tuples(st.just("ack"), st.integers(0, 3), st.integers(0, 3)),
        st.tuples(st.just("nack"), st.integers(0, 3), st.integers(0, 3)),
    ),
    max_size=40,
)


@every_mode
@settings(max_examples=60, deadline=None)
@given(operations=OPERATIONS)
def test_random_use_never_exceeds_permits_nor_duplicates_or_loses_a_message(
    make: Callable[[], Dispatcher], operations: list[tuple[object, ...]]
) -> None:
    """Every mode, any sequence: a consumer receives at most what it was granted, a message is
    pending at one consumer at most, accepted = acknowledged + outstanding, and the ordered
    modes never deliver a message while an older one waits."""
    dispatcher = make()
    ordered = isinstance(dispatcher, ExclusiveDispatcher | FailoverDispatcher)
    granted: dict[int, int] = {}
    received: dict[int, int] = {}
    accepted = 0
    acked: set[Position] = set()
    for operation in operations:
        attached = {c.consumer_id for c in dispatcher.consumers()}
        exclusive_taken = isinstance(dispatcher, ExclusiveDispatcher) and bool(attached)
        match operation:
            case ("join", int(cid)) if cid not in attached and not exclusive_taken:
                dispatcher.add_consumer(Consumer(cid, f"c{cid}"))
                granted[cid] = received[cid] = 0
            case ("leave", int(cid)) if cid in attached:
                dispatcher.remove_consumer(cid)
            case ("permits", int(cid), int(permits)) if cid in attached:
                dispatcher.add_permits(cid, permits)
                granted[cid] += permits
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
        deliveries = dispatcher.take_deliveries()
        for delivery in deliveries:
            received[delivery.consumer_id] += len(delivery.messages)
        holders: dict[Position, int] = {}
        for consumer in dispatcher.consumers():
            cid = consumer.consumer_id
            assert received[cid] <= granted[cid]
            for message in dispatcher.pending(cid):
                assert message.position not in holders
                holders[message.position] = cid
        assert dispatcher.outstanding == accepted - len(acked)
        if ordered and deliveries:
            (delivery,) = deliveries
            sent = [m.position for m in delivery.messages]
            waiting = {Position(e) for e in range(accepted)} - acked - holders.keys()
            assert sent == sorted(sent)
            assert not waiting or sent[-1] < min(waiting)
