"""Failover: only the preferred consumer receives; a switch hands its unacked messages over."""

from scalable_topics.broker.dispatch import Consumer, Delivery, FailoverDispatcher, Message
from scalable_topics.model.position import Position


def messages(*entry_ids: int) -> list[Message]:
    return [Message(Position(e), 0) for e in entry_ids]


def entries(delivery: Delivery) -> list[int]:
    return [m.position.entry_id for m in delivery.messages]


def with_consumers(*consumers: Consumer, permits: int = 10) -> FailoverDispatcher:
    dispatcher = FailoverDispatcher()
    for consumer in consumers:
        dispatcher.add_consumer(consumer)
        dispatcher.add_permits(consumer.consumer_id, permits)
    return dispatcher


def test_the_active_consumer_has_the_lowest_priority_then_name() -> None:
    dispatcher = with_consumers(Consumer(1, "b"), Consumer(2, "a", priority=1))
    assert dispatcher.active_consumer == Consumer(1, "b")
    dispatcher.add_consumer(Consumer(3, "a"))
    assert dispatcher.active_consumer == Consumer(3, "a")
    dispatcher.add_consumer(Consumer(4, "a"))  # same name: the lower id stays preferred
    assert dispatcher.active_consumer == Consumer(3, "a")
    assert [c.active for c in dispatcher.stats().consumers] == [False, False, True, False]


def test_only_the_active_consumer_receives_in_log_order() -> None:
    dispatcher = with_consumers(Consumer(1, "a"), Consumer(2, "b"))
    dispatcher.accept(messages(0, 1, 2))
    (delivery,) = dispatcher.take_deliveries()
    assert delivery.consumer_id == 1
    assert entries(delivery) == [0, 1, 2]
    assert dispatcher.pending(2) == []


def test_a_preferred_joiner_gets_the_old_active_consumers_unacked_messages_first() -> None:
    dispatcher = with_consumers(Consumer(1, "b"), permits=3)
    dispatcher.accept(messages(0, 1, 2, 3, 4))
    dispatcher.take_deliveries()
    dispatcher.ack(1, [Position(1)])
    dispatcher.add_consumer(Consumer(2, "a"))
    assert dispatcher.pending(1) == []
    # The old active consumer acks a message it no longer holds: settled, not redelivered.
    dispatcher.ack(1, [Position(0)])
    dispatcher.add_permits(2, 3)
    (delivery,) = dispatcher.take_deliveries()
    assert delivery.consumer_id == 2
    assert entries(delivery) == [2, 3, 4]
    assert delivery.redelivery_counts == [1, 0, 0]
    assert dispatcher.stats().acked_total == 2


def test_when_the_active_consumer_leaves_the_next_one_takes_over_in_order() -> None:
    dispatcher = with_consumers(Consumer(1, "a", priority=0), Consumer(2, "b", priority=1))
    dispatcher.accept(messages(0, 1, 2))
    dispatcher.take_deliveries()
    dispatcher.redeliver(1, [Position(2)])  # waits for redelivery when the consumer leaves
    dispatcher.accept(messages(3))
    dispatcher.remove_consumer(1)
    assert dispatcher.active_consumer == Consumer(2, "b", priority=1)
    (delivery,) = dispatcher.take_deliveries()
    assert entries(delivery) == [0, 1, 2, 3]
    assert delivery.redelivery_counts == [1, 1, 1, 0]


def test_a_standby_leaving_changes_nothing() -> None:
    dispatcher = with_consumers(Consumer(1, "a"), Consumer(2, "b"))
    dispatcher.accept(messages(0, 1))
    dispatcher.take_deliveries()
    dispatcher.remove_consumer(2)
    assert [m.position.entry_id for m in dispatcher.pending(1)] == [0, 1]
    assert dispatcher.stats().redelivered_total == 0


def test_permits_of_the_new_active_consumer_are_respected_exactly() -> None:
    dispatcher = with_consumers(Consumer(1, "b"), permits=5)
    dispatcher.accept(messages(0, 1, 2, 3, 4))
    dispatcher.take_deliveries()
    dispatcher.add_consumer(Consumer(2, "a"))
    dispatcher.add_permits(2, 2)
    (delivery,) = dispatcher.take_deliveries()
    assert entries(delivery) == [0, 1]
    assert dispatcher.take_deliveries() == []
    assert dispatcher.read_budget() == 0
