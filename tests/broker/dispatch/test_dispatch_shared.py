"""Shared: consumers with permits take turns; messages that came back are dispatched first."""

from scalable_topics.broker.dispatch import Consumer, Delivery, Message, SharedDispatcher
from scalable_topics.model.position import Position


def messages(*entry_ids: int) -> list[Message]:
    return [Message(Position(e), 0) for e in entry_ids]


def by_consumer(deliveries: list[Delivery]) -> dict[int, list[int]]:
    return {d.consumer_id: [m.position.entry_id for m in d.messages] for d in deliveries}


def with_consumers(
    count: int, permits: int = 10, round_robin_batch: int = 1, priorities: tuple[int, ...] = ()
) -> SharedDispatcher:
    dispatcher = SharedDispatcher(round_robin_batch=round_robin_batch)
    for consumer_id in range(count):
        priority = priorities[consumer_id] if priorities else 0
        dispatcher.add_consumer(Consumer(consumer_id, f"c{consumer_id}", priority))
        dispatcher.add_permits(consumer_id, permits)
    return dispatcher


def test_consumers_take_turns_one_message_each() -> None:
    dispatcher = with_consumers(3)
    dispatcher.accept(messages(*range(9)))
    assert by_consumer(dispatcher.take_deliveries()) == {
        0: [0, 3, 6],
        1: [1, 4, 7],
        2: [2, 5, 8],
    }


def test_turns_continue_across_calls() -> None:
    dispatcher = with_consumers(3)
    receivers = []
    for entry_id in range(6):
        dispatcher.accept(messages(entry_id))
        (delivery,) = dispatcher.take_deliveries()
        receivers.append(delivery.consumer_id)
    assert receivers == [0, 1, 2, 0, 1, 2]


def test_a_turn_hands_over_up_to_the_round_robin_batch() -> None:
    dispatcher = with_consumers(2, permits=100, round_robin_batch=20)
    dispatcher.accept(messages(*range(50)))
    assert by_consumer(dispatcher.take_deliveries()) == {
        0: [*range(0, 20), *range(40, 50)],
        1: list(range(20, 40)),
    }


def test_many_messages_spread_evenly() -> None:
    dispatcher = with_consumers(4, permits=1000, round_robin_batch=20)
    dispatcher.accept(messages(*range(400)))
    counts = {d.consumer_id: len(d.messages) for d in dispatcher.take_deliveries()}
    assert counts == {0: 100, 1: 100, 2: 100, 3: 100}


def test_permits_are_respected_exactly() -> None:
    dispatcher = with_consumers(2, permits=0)
    dispatcher.add_permits(0, 1)
    dispatcher.add_permits(1, 4)
    dispatcher.accept(messages(*range(8)))
    assert by_consumer(dispatcher.take_deliveries()) == {0: [0], 1: [1, 2, 3, 4]}
    assert dispatcher.take_deliveries() == []
    assert dispatcher.buffered == 3
    assert dispatcher.read_budget() == 0


def test_returned_messages_go_first_to_whoever_is_next() -> None:
    dispatcher = with_consumers(2, permits=2)
    dispatcher.accept(messages(0, 1, 2, 3))
    dispatcher.take_deliveries()  # 0 and 2 to consumer 0, 1 and 3 to consumer 1
    dispatcher.redeliver(0, [Position(2)])
    dispatcher.accept(messages(4))
    dispatcher.add_permits(1, 2)
    (delivery,) = dispatcher.take_deliveries()
    assert delivery.consumer_id == 1
    assert [m.position.entry_id for m in delivery.messages] == [2, 4]
    assert delivery.redelivery_counts == [1, 0]


def test_a_closed_consumers_messages_are_redelivered_to_the_others() -> None:
    dispatcher = with_consumers(3, permits=2)
    dispatcher.accept(messages(*range(6)))
    dispatcher.take_deliveries()
    dispatcher.remove_consumer(1)  # it held 1 and 4
    dispatcher.add_permits(2, 5)
    assert by_consumer(dispatcher.take_deliveries()) == {2: [1, 4]}


def test_lower_priority_values_are_served_first_while_they_have_permits() -> None:
    dispatcher = with_consumers(3, permits=2, priorities=(1, 0, 0))
    dispatcher.accept(messages(*range(6)))
    assert by_consumer(dispatcher.take_deliveries()) == {1: [0, 2], 2: [1, 3], 0: [4, 5]}
