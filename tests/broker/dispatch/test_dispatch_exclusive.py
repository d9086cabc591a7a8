"""Exclusive: one consumer, every message in log order, redeliveries before newer messages."""

import pytest

from scalable_topics.broker.dispatch import (
    Consumer,
    ConsumerBusy,
    Delivery,
    DuplicateConsumer,
    ExclusiveDispatcher,
    Message,
)
from scalable_topics.model.position import Position


def messages(*entry_ids: int) -> list[Message]:
    return [Message(Position(e), 0) for e in entry_ids]


def entries(delivery: Delivery) -> list[int]:
    return [m.position.entry_id for m in delivery.messages]


def attached(*consumers: Consumer, permits: int = 0) -> ExclusiveDispatcher:
    dispatcher = ExclusiveDispatcher()
    for consumer in consumers:
        dispatcher.add_consumer(consumer)
        dispatcher.add_permits(consumer.consumer_id, permits)
    return dispatcher


def test_delivers_in_log_order_and_exactly_within_permits() -> None:
    dispatcher = attached(Consumer(1, "only"), permits=3)
    dispatcher.accept(messages(0, 1, 2, 3, 4))
    (delivery,) = dispatcher.take_deliveries()
    assert delivery.consumer_id == 1
    assert entries(delivery) == [0, 1, 2]
    assert dispatcher.take_deliveries() == []
    dispatcher.add_permits(1, 5)
    (delivery,) = dispatcher.take_deliveries()
    assert entries(delivery) == [3, 4]
    assert dispatcher.stats().consumers[0].permits == 3


def test_a_second_consumer_is_refused_with_the_holder_named() -> None:
    dispatcher = attached(Consumer(1, "first"))
    with pytest.raises(ConsumerBusy, match="'first'") as refused:
        dispatcher.add_consumer(Consumer(2, "second"))
    assert refused.value.holder == Consumer(1, "first")
    with pytest.raises(DuplicateConsumer):
        dispatcher.add_consumer(Consumer(1, "first"))
    assert dispatcher.consumers() == [Consumer(1, "first")]


def test_the_subscription_is_free_again_once_its_consumer_leaves() -> None:
    dispatcher = attached(Consumer(1, "first"))
    dispatcher.remove_consumer(1)
    dispatcher.add_consumer(Consumer(2, "second"))
    assert dispatcher.active_consumer == Consumer(2, "second")


def test_nacked_messages_come_back_in_position_order_before_newer_ones() -> None:
    dispatcher = attached(Consumer(1, "only"), permits=5)
    dispatcher.accept(messages(0, 1, 2, 3, 4, 5, 6))
    dispatcher.take_deliveries()
    dispatcher.redeliver(1, [Position(3), Position(1)])
    dispatcher.add_permits(1, 3)
    (delivery,) = dispatcher.take_deliveries()
    assert entries(delivery) == [1, 3, 5]
    assert delivery.redelivery_counts == [1, 1, 0]
    assert [m.position.entry_id for m in dispatcher.pending(1)] == [0, 1, 2, 3, 4, 5]


def test_redeliver_all_returns_every_unacknowledged_message() -> None:
    dispatcher = attached(Consumer(1, "only"), permits=4)
    dispatcher.accept(messages(0, 1, 2, 3))
    dispatcher.take_deliveries()
    dispatcher.ack(1, [Position(2)])
    dispatcher.redeliver(1)
    assert dispatcher.pending(1) == []
    dispatcher.add_permits(1, 10)
    (delivery,) = dispatcher.take_deliveries()
    assert entries(delivery) == [0, 1, 3]
    assert delivery.redelivery_counts == [1, 1, 1]


def test_a_closed_consumers_pending_messages_go_to_the_next_one_first_in_order() -> None:
    dispatcher = attached(Consumer(1, "first"), permits=3)
    dispatcher.accept(messages(0, 1, 2, 3))
    dispatcher.take_deliveries()
    dispatcher.ack(1, [Position(1)])
    dispatcher.remove_consumer(1)
    dispatcher.ack(1, [Position(0)])  # too late: ignored
    dispatcher.add_consumer(Consumer(2, "second"))
    dispatcher.add_permits(2, 10)
    (delivery,) = dispatcher.take_deliveries()
    assert delivery.consumer_id == 2
    assert entries(delivery) == [0, 2, 3]
    assert delivery.redelivery_counts == [1, 1, 0]


def test_read_budget_follows_permits_and_stays_bounded() -> None:
    dispatcher = ExclusiveDispatcher(max_buffered=4)
    assert dispatcher.read_budget() == 0  # nobody to deliver to
    dispatcher.add_consumer(Consumer(1, "only"))
    assert dispatcher.read_budget() == 0
    dispatcher.add_permits(1, 10)
    assert dispatcher.read_budget() == 4
    dispatcher.accept(messages(0, 1, 2))
    assert dispatcher.read_budget() == 1
    dispatcher.take_deliveries()
    assert dispatcher.read_budget() == 4
    dispatcher.accept(messages(3, 4, 5, 6, 7, 8, 9))
    dispatcher.take_deliveries()
    assert dispatcher.read_budget() == 0  # all ten permits used
