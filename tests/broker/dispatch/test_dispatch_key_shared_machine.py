"""Random joins, leaves, permits, arrivals, acks and nacks against the Key_Shared contract:
a key hash is pending at one consumer at a time, permits are never exceeded, and once the
consumers keep acknowledging every accepted message is delivered and acknowledged."""

from __future__ import annotations

from collections import Counter

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from scalable_topics.broker.dispatch import (
    Consumer,
    ConsumerId,
    Delivery,
    DispatcherStats,
    KeySharedDispatcher,
    Message,
)
from scalable_topics.model.hashing import hash_key
from scalable_topics.model.position import Position

# Few hashes and few ring points: assignment changes move pending keys all the time.
KEY_HASHES = [0, *(hash_key(f"key-{i}") for i in range(7))]
NAMES = ["alpha", "beta", "gamma"]  # repeated names exercise the ring's name index
MAX_CONSUMERS = 5
UNBLOCKING_INTERVAL = 0.5
WHO = st.integers(0, MAX_CONSUMERS - 1)
WHICH = st.lists(st.integers(0, 15), min_size=1, max_size=4)
PERMITS = st.integers(0, 8)


class KeySharedMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.dispatcher = KeySharedDispatcher(
            points_per_consumer=3, max_buffered=30, unblocking_interval=UNBLOCKING_INTERVAL
        )
        self.next_consumer_id = 0
        self.next_entry_id = 0
        self.now = 0.0
        self.wakeup_at: float | None = None
        self.unblock_batch_open = False
        # The model: what the dispatcher must agree with.
        self.granted: dict[ConsumerId, int] = {}
        self.received: dict[ConsumerId, int] = {}
        self.holding: dict[ConsumerId, dict[Position, Message]] = {}
        self.returns: Counter[Position] = Counter()
        self.accepted: set[Position] = set()
        self.messages: dict[Position, Message] = {}
        self.acked: set[Position] = set()

    # -- the I/O layer's side of the contract -----------------------------------------------------

    def take(self) -> None:
        self.unblock_batch_open = False  # take_deliveries serves every hash unblocked so far
        deliveries = self.dispatcher.take_deliveries()
        for delivery in deliveries:
            self.record(delivery)
        self.check_no_older_message_of_the_key_waits(deliveries)

    def check_no_older_message_of_the_key_waits(self, deliveries: list[Delivery]) -> None:
        """Within a key, delivery follows position order: a message goes out only when no
        older message with its hash is still waiting (new reads wait behind replays)."""
        held = {p for messages in self.holding.values() for p in messages}
        oldest_waiting: dict[int, Position] = {}
        for position in sorted(self.accepted - self.acked - held):
            oldest_waiting.setdefault(self.messages[position].key_hash, position)
        for delivery in deliveries:
            for message in delivery.messages:
                waiting = oldest_waiting.get(message.key_hash)
                assert waiting is None or message.position < waiting, (
                    f"{message.position} overtook {waiting} of hash {message.key_hash:04x}"
                )

    def record(self, delivery: Delivery) -> None:
        consumer_id = delivery.consumer_id
        assert consumer_id in self.holding, "delivered to a consumer that is not attached"
        assert len(delivery.messages) == len(delivery.redelivery_counts)
        self.received[consumer_id] += len(delivery.messages)
        for message, count in zip(delivery.messages, delivery.redelivery_counts, strict=True):
            position = message.position
            assert position in self.accepted and position not in self.acked
            assert all(position not in held for held in self.holding.values()), (
                f"{position} delivered while pending elsewhere"
            )
            assert count == self.returns[position]
            self.holding[consumer_id][position] = message

    def note_wakeup(self) -> None:
        wakeup = self.dispatcher.unblock_wakeup(self.now)
        if wakeup is not None:
            assert not self.unblock_batch_open, "a second wake-up for one batch"
            assert wakeup == self.now + UNBLOCKING_INTERVAL
            self.unblock_batch_open = True
            # A timer from an earlier batch may still be scheduled; the earliest one wins.
            self.wakeup_at = wakeup if self.wakeup_at is None else min(self.wakeup_at, wakeup)

    def live(self) -> list[ConsumerId]:
        return sorted(self.holding)

    # -- rules: consumers and messages are picked by index, which shrinks well ----------------

    def pick(self, candidates: list[ConsumerId], index: int) -> ConsumerId:
        return candidates[index % len(candidates)]

    def pick_held(self, consumer_id: ConsumerId, indexes: list[int]) -> list[Position]:
        held = sorted(self.holding[consumer_id])
        return list(dict.fromkeys(held[i % len(held)] for i in indexes))

    def busy(self) -> list[ConsumerId]:
        return [c for c in self.live() if self.holding[c]]

    @initialize(names=st.lists(st.sampled_from(NAMES), min_size=1, max_size=2), permits=PERMITS)
    def start(self, names: list[str], permits: int) -> None:
        for name in names:
            self.join(name, permits)

    @precondition(lambda self: len(self.holding) < MAX_CONSUMERS)
    @rule(name=st.sampled_from(NAMES), permits=PERMITS)
    def join(self, name: str, permits: int) -> None:
        """Subscribe, then the first flow of permits, as a client does."""
        consumer_id = self.next_consumer_id
        self.next_consumer_id += 1
        self.dispatcher.add_consumer(Consumer(consumer_id, name))
        self.granted[consumer_id] = self.received[consumer_id] = 0
        self.holding[consumer_id] = {}
        self.take()
        self.grant_to(consumer_id, permits)

    @precondition(lambda self: self.holding)
    @rule(who=WHO)
    def leave(self, who: int) -> None:
        self.leave_one(self.pick(self.live(), who))

    def leave_one(self, consumer_id: ConsumerId) -> None:
        self.dispatcher.remove_consumer(consumer_id)
        self.returns.update(self.holding.pop(consumer_id).keys())
        self.take()

    @precondition(lambda self: self.holding)
    @rule(who=WHO, permits=PERMITS)
    def reconnect(self, who: int, permits: int) -> None:
        """Leave and come back under the same name: the ring gives the name its old ranges
        back, so hashes the others took over meanwhile start draining (Pulsar issue #21199)."""
        consumer_id = self.pick(self.live(), who)
        name = next(c.name for c in self.dispatcher.consumers() if c.consumer_id == consumer_id)
        self.leave_one(consumer_id)
        self.join(name, permits)

    @precondition(lambda self: self.holding)
    @rule(who=WHO, permits=PERMITS)
    def grant(self, who: int, permits: int) -> None:
        self.grant_to(self.pick(self.live(), who), permits)

    def grant_to(self, consumer_id: ConsumerId, permits: int) -> None:
        self.dispatcher.add_permits(consumer_id, permits)
        self.granted[consumer_id] += permits
        self.take()

    # The I/O layer may hold a read batch bigger than read_budget(); the budget is tested apart.
    @rule(keys=st.lists(st.sampled_from(KEY_HASHES), min_size=1, max_size=6), batched=st.booleans())
    def arrive(self, keys: list[int], batched: bool) -> None:
        messages = []
        for index, key_hash in enumerate(keys):
            if batched:
                position = Position(self.next_entry_id, index)
            else:
                position = Position(self.next_entry_id)
                self.next_entry_id += 1
            messages.append(Message(position, key_hash, len(keys) if batched else 1))
        if batched:
            self.next_entry_id += 1
        self.dispatcher.accept(messages)
        self.accepted.update(m.position for m in messages)
        self.messages.update((m.position, m) for m in messages)
        self.take()

    @rule()
    def take_without_cause(self) -> None:
        self.take()

    @precondition(lambda self: any(self.holding.values()))
    @rule(who=WHO, which=WHICH)
    def ack(self, who: int, which: list[int]) -> None:
        consumer_id = self.pick(self.busy(), who)
        chosen = self.pick_held(consumer_id, which)
        self.dispatcher.ack(consumer_id, chosen)
        for position in chosen:
            del self.holding[consumer_id][position]
        self.acked.update(chosen)
        self.note_wakeup()

    @precondition(lambda self: any(self.holding.values()))
    @rule(who=WHO, which=WHICH, everything=st.booleans())
    def nack(self, who: int, which: list[int], everything: bool) -> None:
        consumer_id = self.pick(self.busy(), who)
        chosen = (
            list(self.holding[consumer_id]) if everything else self.pick_held(consumer_id, which)
        )
        self.dispatcher.redeliver(consumer_id, None if everything else chosen)
        for position in chosen:
            del self.holding[consumer_id][position]
            self.returns[position] += 1
        self.note_wakeup()
        self.take()

    @precondition(lambda self: len(self.holding) >= 2 and any(self.holding.values()))
    @rule(who=WHO, other=WHO)
    def ack_someone_elses(self, who: int, other: int) -> None:
        holder = self.pick(self.busy(), who)
        stranger = self.pick([c for c in self.live() if c != holder], other)
        # Acked through another consumer (a client that reconnected): settled all the same,
        # and never delivered again.
        chosen = list(self.holding[holder])
        self.dispatcher.ack(stranger, chosen)
        self.holding[holder].clear()
        self.acked.update(chosen)
        self.note_wakeup()

    @precondition(lambda self: self.holding and self.waiting())
    @rule(who=WHO, which=WHICH)
    def ack_before_delivery(self, who: int, which: list[int]) -> None:
        """A reconnected client acks what its old session received while the dispatcher
        holds the message back (read ahead, or waiting for a draining hash): settled, and
        never delivered again."""
        waiting = self.waiting()
        chosen = list(dict.fromkeys(waiting[i % len(waiting)] for i in which))
        self.dispatcher.ack(self.pick(self.live(), who), chosen)
        self.acked.update(chosen)
        self.note_wakeup()
        self.take()

    def waiting(self) -> list[Position]:
        held = {p for messages in self.holding.values() for p in messages}
        return sorted(self.accepted - self.acked - held)

    @precondition(lambda self: self.wakeup_at is not None)
    @rule()
    def unblock_timer_fires(self) -> None:
        assert self.wakeup_at is not None
        self.now = self.wakeup_at
        self.wakeup_at = None
        self.take()

    # -- invariants, checked after every step ---------------------------------------------------

    @invariant()
    def contract_holds(self) -> None:
        stats = self.dispatcher.stats()
        self.pending_matches_what_was_delivered()
        self.each_key_hash_is_pending_at_one_consumer()
        self.permits_are_never_exceeded(stats)
        self.nothing_is_lost(stats)
        self.draining_hashes_count_pending_messages_of_their_consumer(stats)

    def pending_matches_what_was_delivered(self) -> None:
        for consumer_id, held in self.holding.items():
            pending = self.dispatcher.pending(consumer_id)
            assert {m.position: m for m in pending} == held

    def each_key_hash_is_pending_at_one_consumer(self) -> None:
        holders: dict[int, set[ConsumerId]] = {}
        for consumer_id, held in self.holding.items():
            for message in held.values():
                holders.setdefault(message.key_hash, set()).add(consumer_id)
        shared = {h: c for h, c in holders.items() if len(c) > 1}
        assert not shared, f"hashes pending at several consumers: {shared}"

    def permits_are_never_exceeded(self, stats: DispatcherStats) -> None:
        permits = {c.consumer_id: c.permits for c in stats.consumers}
        for consumer_id in self.holding:
            assert self.received[consumer_id] <= self.granted[consumer_id]
            assert permits[consumer_id] == self.granted[consumer_id] - self.received[consumer_id]

    def nothing_is_lost(self, stats: DispatcherStats) -> None:
        assert self.dispatcher.outstanding == len(self.accepted) - len(self.acked)
        assert stats.acked_total == len(self.acked)

    def draining_hashes_count_pending_messages_of_their_consumer(
        self, stats: DispatcherStats
    ) -> None:
        total = 0
        for consumer in stats.consumers:
            held = self.holding[consumer.consumer_id].values()
            for draining in consumer.draining_hashes:
                assert draining.pending_messages == sum(
                    m.key_hash == draining.key_hash for m in held
                )
                total += draining.pending_messages
        assert total == stats.draining_hashes_pending_messages
        assert len(stats.consumers) == len(self.holding)

    # -- liveness -------------------------------------------------------------------------------

    def teardown(self) -> None:
        """Consumers that keep acknowledging drain everything: grant ample permits once, then
        only acks and the unblock wake-ups the dispatcher asks for drive delivery."""
        if not self.holding:
            self.join("finisher", 0)
        ample = len(self.accepted) + 1
        for consumer_id in self.live():
            self.dispatcher.add_permits(consumer_id, ample)
            self.granted[consumer_id] += ample
        self.take()
        for _ in range(len(self.accepted) + 2):
            for consumer_id in self.live():
                held = list(self.holding[consumer_id])
                if held:
                    self.dispatcher.ack(consumer_id, held)
                    self.holding[consumer_id].clear()
                    self.acked.update(held)
                    self.note_wakeup()
            if self.wakeup_at is None:
                break
            self.unblock_timer_fires()
            self.contract_holds()
        self.pending_matches_what_was_delivered()
        assert self.acked == self.accepted, f"stuck: {sorted(self.accepted - self.acked)}"
        stats = self.dispatcher.stats()
        assert stats.buffered_messages == 0
        assert stats.draining_hashes_count == 0
        assert stats.draining_hashes_pending_messages == 0


KeySharedMachine.TestCase.settings = settings(
    max_examples=300, stateful_step_count=40, deadline=None
)
test_key_shared_contract = KeySharedMachine.TestCase
