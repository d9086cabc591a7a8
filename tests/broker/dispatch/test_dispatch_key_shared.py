"""Key_Shared dispatch: hash ownership, draining hashes (PIP-379), batched unblocking."""

from scalable_topics.broker.dispatch import Consumer, Delivery, KeySharedDispatcher, Message
from scalable_topics.model.hash_range import HashRange
from scalable_topics.model.hashing import HASH_MAX, hash_key
from scalable_topics.model.key_shared import DrainingHashStats
from scalable_topics.model.position import Position

A, B = 1, 2
CANDIDATES = [hash_key(f"key-{i}") for i in range(64)]


class Harness:
    """A dispatcher plus the I/O layer's bookkeeping: positions, deliveries by consumer."""

    def __init__(self, *consumers: tuple[int, str], permits: int = 100) -> None:
        self.dispatcher = KeySharedDispatcher(unblocking_interval=0.25)
        self.next_entry = 0
        for consumer_id, name in consumers:
            self.join(consumer_id, name, permits)

    def join(self, consumer_id: int, name: str, permits: int = 100) -> None:
        self.dispatcher.add_consumer(Consumer(consumer_id, name))
        self.dispatcher.add_permits(consumer_id, permits)

    def send(self, *key_hashes: int) -> list[Message]:
        batch = [Message(Position(self.next_entry + i), h) for i, h in enumerate(key_hashes)]
        self.next_entry += len(batch)
        self.dispatcher.accept(batch)
        return batch

    def take(self) -> dict[int, Delivery]:
        return {d.consumer_id: d for d in self.dispatcher.take_deliveries()}

    def pending_hashes(self, consumer_id: int) -> list[int]:
        return [m.key_hash for m in self.dispatcher.pending(consumer_id)]


def hashes_of(delivery: Delivery | None) -> list[int]:
    return [] if delivery is None else [m.key_hash for m in delivery.messages]


def moved_by_join(held_by_a: list[int]) -> tuple[Harness, list[int], list[int], list[int]]:
    """A holds one message for each of ``held_by_a``; then B joins. Returns the harness and the
    hashes that moved to B with a message pending at A, moved without one, and stayed."""
    harness = Harness((A, "consumer-a"))
    harness.send(*held_by_a)
    harness.take()
    harness.join(B, "consumer-b")
    assert harness.take() == {}
    owner = harness.dispatcher.owner_of
    moved_pending = [h for h in held_by_a if owner(h) == B]
    moved_free = [h for h in CANDIDATES if owner(h) == B and h not in held_by_a]
    stayed = [h for h in CANDIDATES if owner(h) == A]
    assert moved_pending and moved_free and stayed
    return harness, moved_pending, moved_free, stayed


def test_keyless_messages_all_go_to_the_owner_of_hash_zero() -> None:
    harness = Harness((A, "consumer-a"), (B, "consumer-b"), (3, "consumer-c"))
    harness.send(0, 0, 0, 0)
    (delivery,) = harness.take().values()
    assert delivery.consumer_id == harness.dispatcher.owner_of(0)
    assert len(delivery.messages) == 4


def test_each_consumer_receives_the_hashes_it_owns_in_order() -> None:
    harness = Harness((A, "consumer-a"), (B, "consumer-b"))
    sent = harness.send(*CANDIDATES, *CANDIDATES)
    deliveries = harness.take()
    for consumer_id, delivery in deliveries.items():
        assert all(harness.dispatcher.owner_of(h) == consumer_id for h in hashes_of(delivery))
        positions = [m.position for m in delivery.messages]
        assert positions == sorted(positions)
    assert sum(len(d.messages) for d in deliveries.values()) == len(sent)


def test_permits_bound_each_consumer_and_the_rest_waits() -> None:
    harness = Harness((A, "consumer-a"), permits=3)
    harness.send(*CANDIDATES[:5])
    assert hashes_of(harness.take()[A]) == CANDIDATES[:3]
    assert harness.take() == {}
    harness.dispatcher.add_permits(A, 10)
    assert hashes_of(harness.take()[A]) == CANDIDATES[3:5]


def test_draining_blocks_only_the_hashes_still_pending_at_their_old_consumer() -> None:
    harness, moved_pending, moved_free, stayed = moved_by_join(CANDIDATES[::2])
    stats = harness.dispatcher.stats()
    assert stats.draining_hashes_count == len(moved_pending)
    assert stats.draining_hashes_pending_messages == len(moved_pending)
    by_consumer = {c.consumer_id: c for c in stats.consumers}
    assert [d.key_hash for d in by_consumer[A].draining_hashes] == sorted(moved_pending)
    assert by_consumer[B].draining_hashes == ()

    harness.send(moved_pending[0], moved_free[0], stayed[0])
    deliveries = harness.take()
    assert hashes_of(deliveries[B]) == [moved_free[0]]  # other keys keep flowing
    assert hashes_of(deliveries[A]) == [stayed[0]]
    assert harness.dispatcher.stats().replay_messages == 1  # the blocked one waits


def test_acks_release_blocked_hashes_in_one_batched_wakeup() -> None:
    harness, moved_pending, _, _ = moved_by_join(CANDIDATES[::2])
    first, second = moved_pending[:2]
    harness.send(first, second)
    assert harness.take() == {}
    held = {m.key_hash: m.position for m in harness.dispatcher.pending(A)}

    harness.dispatcher.ack(A, [held[first]])
    assert harness.dispatcher.unblock_wakeup(now=10.0) == 10.25
    harness.dispatcher.ack(A, [held[second]])
    assert harness.dispatcher.unblock_wakeup(now=10.1) is None  # same batch: one timer
    assert harness.dispatcher.unblocked_hashes == 2

    assert hashes_of(harness.take()[B]) == [first, second]
    assert harness.dispatcher.unblocked_hashes == 0
    assert harness.dispatcher.stats().draining_hashes_cleared_total == 2


def test_a_hash_nobody_waited_for_clears_without_a_wakeup() -> None:
    harness, moved_pending, _, _ = moved_by_join(CANDIDATES[::2])
    held = {m.key_hash: m.position for m in harness.dispatcher.pending(A)}
    harness.dispatcher.ack(A, [held[moved_pending[0]]])
    assert harness.dispatcher.unblock_wakeup(now=1.0) is None
    stats = harness.dispatcher.stats()
    assert stats.draining_hashes_cleared_total == 1
    assert stats.draining_hashes_count == len(moved_pending) - 1


def test_a_draining_hash_counts_every_pending_message_of_its_consumer() -> None:
    probe = Harness((A, "consumer-a"), (B, "consumer-b"))
    key = next(h for h in CANDIDATES if probe.dispatcher.owner_of(h) == B)
    harness = Harness((A, "consumer-a"))
    harness.send(key, key, key)
    harness.take()
    harness.join(B, "consumer-b")
    a_stats = harness.dispatcher.stats().consumers[0]
    assert a_stats.draining_hashes == (DrainingHashStats(key, 3, 0),)
    harness.send(key)
    pending = [m.position for m in harness.dispatcher.pending(A)]
    for acked, position in enumerate(pending[:2], start=1):
        harness.dispatcher.ack(A, [position])
        assert harness.take() == {}, f"released after {acked} of 3 acks"
        assert harness.dispatcher.stats().draining_hashes_pending_messages == 3 - acked
    harness.dispatcher.ack(A, [pending[2]])
    assert harness.dispatcher.unblock_wakeup(now=0.0) == 0.25
    assert hashes_of(harness.take()[B]) == [key]
    assert harness.dispatcher.stats().draining_hashes_count == 0


def test_a_hash_that_returns_to_its_draining_consumer_stops_draining_lazily() -> None:
    harness, moved_pending, _, _ = moved_by_join(CANDIDATES[::2])
    key = moved_pending[0]
    harness.dispatcher.remove_consumer(B)  # the ring gives everything back to A
    harness.take()
    stats = harness.dispatcher.stats()
    assert stats.draining_hashes_count == len(moved_pending)  # nothing scanned the tracker

    harness.send(key)
    assert hashes_of(harness.take()[A]) == [key]  # A still holds the key: no need to block
    stats = harness.dispatcher.stats()
    assert stats.draining_hashes_count == len(moved_pending) - 1
    assert stats.draining_hashes_cleared_total == 0
    assert harness.pending_hashes(A).count(key) == 2


def test_nacks_keep_the_key_at_one_consumer_and_go_before_newer_messages_of_it() -> None:
    harness = Harness((A, "consumer-a"), permits=1)
    key = CANDIDATES[0]
    harness.send(key)
    harness.take()
    harness.dispatcher.redeliver(A)
    harness.send(key)  # no permits left: waits behind the nacked one
    assert harness.take() == {}
    harness.dispatcher.add_permits(A, 1)
    (delivery,) = harness.take().values()
    assert [m.position.entry_id for m in delivery.messages] == [0]
    assert delivery.redelivery_counts == [1]
    harness.dispatcher.add_permits(A, 1)
    assert [m.position.entry_id for m in harness.take()[A].messages] == [1]


def test_a_closed_consumers_messages_are_redelivered_before_the_blocked_ones() -> None:
    harness, moved_pending, _, stayed = moved_by_join(CANDIDATES[::2])
    key = moved_pending[0]
    harness.send(key)
    assert harness.take() == {}
    harness.dispatcher.remove_consumer(A)
    assert harness.dispatcher.unblock_wakeup(now=0.0) is None  # closing triggers a dispatch anyway
    delivery = harness.take()[B]
    delivered = [(m.key_hash, m.position.entry_id) for m in delivery.messages]
    key_entries = [entry for h, entry in delivered if h == key]
    assert key_entries == sorted(key_entries) and len(key_entries) == 2
    assert len(delivery.messages) == len(CANDIDATES[::2]) + 1  # all of A's, then the blocked one
    assert delivery.redelivery_counts.count(1) == len(CANDIDATES[::2])
    stats = harness.dispatcher.stats()
    assert stats.draining_hashes_count == 0
    assert stats.draining_hashes_cleared_total == len(moved_pending)
    assert stayed  # A's other hashes now belong to B as well
    assert {c.consumer_id for c in stats.consumers} == {B}


def test_read_budget_keeps_reading_past_blocked_keys_but_bounded() -> None:
    dispatcher = KeySharedDispatcher(max_buffered=10)
    assert dispatcher.read_budget() == 0
    dispatcher.add_consumer(Consumer(A, "consumer-a"))
    dispatcher.add_consumer(Consumer(B, "consumer-b"))
    dispatcher.add_permits(A, 100)
    assert dispatcher.read_budget() == 10
    b_key = next(h for h in CANDIDATES if dispatcher.owner_of(h) == B)
    dispatcher.accept([Message(Position(i), b_key) for i in range(6)])  # B has no permits
    assert dispatcher.read_budget() == 4
    assert dispatcher.take_deliveries() == []
    assert dispatcher.buffered == 6
    assert dispatcher.read_budget() == 4
    dispatcher.accept([Message(Position(6 + i), b_key) for i in range(4)])
    dispatcher.take_deliveries()
    assert dispatcher.read_budget() == 0


def test_stats_show_each_consumers_ranges() -> None:
    harness = Harness((A, "consumer-a"), (B, "consumer-b"))
    stats = harness.dispatcher.stats()
    assert stats.mode == "Key_Shared"
    ranges = sorted(r for c in stats.consumers for r in c.assigned_ranges)
    assert ranges[0].start == 0 and ranges[-1].end == HASH_MAX
    assert sum(r.size for r in ranges) == HASH_MAX + 1
    assert harness.dispatcher.assignments()[A] == stats.consumers[0].assigned_ranges
    assert all(isinstance(r, HashRange) for r in ranges)
