"""Key_Shared (AUTO_SPLIT): each key hash belongs to one consumer on a consistent-hash ring,
and PIP-379's draining hashes keep every key at one consumer at a time.

The contract (seed: key-shared-draining-hashes): messages with the same key are delivered, and
may be unacknowledged, at ONE consumer at a time. When a join or leave moves hashes, the
pending messages of every consumer that lost hashes register those hashes as draining for it;
a message whose hash drains for another consumer waits in the replay set (only that hash is
held back, never the subscription) until the draining consumer acknowledges, nacks or leaves.

Ordering: within a key, messages go out in position order, except after a nack or a
redeliver request, which Key_Shared does not order (the invariant still holds). A new message
whose hash has messages waiting for replay joins them instead of overtaking them.

Unblocking is batched as in Pulsar's keySharedUnblockingIntervalMs: when an ack or nack
drains a hash on which delivery was refused, :meth:`KeySharedDispatcher.unblock_wakeup`
answers ``now + unblocking_interval`` once; the I/O layer calls ``take_deliveries`` then, which
serves every hash unblocked meanwhile. Pulsar's send-time recheck (its step 7) is not needed:
``take_deliveries`` decides and records pending messages in one synchronous step.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Iterable
from dataclasses import replace

from scalable_topics.model.hash_range import HashRange
from scalable_topics.model.key_shared import (
    DEFAULT_POINTS_PER_CONSUMER,
    ConsistentHashRing,
    DrainingHashesTracker,
    LostRanges,
)
from scalable_topics.model.position import Position

from .base import Consumer, ConsumerId, Delivery, DispatcherStats, DispatchMode, Message
from .core import ConsumerState, DispatcherCore
from .replay import ReplayByHash
from .unacked import UnackedLimits

# Pulsar's keySharedLookAheadMsgInReplayThresholdPerSubscription is 20000; half of it keeps a
# Python broker's look-ahead small while blocked hashes wait.
DEFAULT_KEY_SHARED_MAX_BUFFERED = 10_000
# Pulsar's keySharedUnblockingIntervalMs default, in seconds.
DEFAULT_UNBLOCKING_INTERVAL = 0.01


class KeySharedDispatcher(DispatcherCore):
    mode = DispatchMode.KEY_SHARED

    def __init__(
        self,
        *,
        max_buffered: int = DEFAULT_KEY_SHARED_MAX_BUFFERED,
        points_per_consumer: int = DEFAULT_POINTS_PER_CONSUMER,
        unblocking_interval: float = DEFAULT_UNBLOCKING_INTERVAL,
        unacked: UnackedLimits | None = None,
    ) -> None:
        super().__init__(max_buffered=max_buffered, unacked=unacked)
        if unblocking_interval < 0:
            raise ValueError(f"unblocking_interval cannot be negative: {unblocking_interval}")
        self._unblocking_interval = unblocking_interval
        self._ring = ConsistentHashRing(points_per_consumer)
        self._draining = DrainingHashesTracker()
        self._replay = ReplayByHash()
        # The ring's lookup table with owners resolved to their state: one bisect per message.
        self._points: tuple[int, ...] = ()
        self._owners: tuple[ConsumerState, ...] = ()
        self._unblocked_hashes = 0
        self._wakeup_requested = False

    # -- consumers and the ring ----------------------------------------------------------------

    def add_consumer(self, consumer: Consumer) -> None:
        self._register(consumer)
        lost = self._ring.add(consumer.consumer_id, consumer.name)
        self._refresh_lookup()
        self._register_draining_hashes(lost, skip=consumer.consumer_id)

    def _on_removed(self, state: ConsumerState) -> None:
        consumer_id = state.consumer.consumer_id
        lost = self._ring.remove(consumer_id)
        self._refresh_lookup()
        # The leaving consumer's own pending messages are released (closing) right after.
        self._register_draining_hashes(lost, skip=consumer_id)

    def _refresh_lookup(self) -> None:
        points, owners = self._ring.lookup_table()
        self._points = points
        self._owners = tuple(self._consumers[owner] for owner in owners)

    def _register_draining_hashes(self, lost: LostRanges, skip: ConsumerId) -> None:
        """The seed's registerDrainingHashes: pending messages in the ranges a consumer lost
        make their hashes drain for it."""
        for consumer_id, ranges in lost.items():
            if consumer_id == skip:
                continue
            pending = self._consumers[consumer_id].pending.key_hashes()
            for key_hash, count in _count_hashes_in(pending, ranges).items():
                entry = self._draining.get(key_hash)
                if entry is not None and entry.consumer_id == consumer_id:
                    # Still draining for this consumer since an earlier change (a hash that
                    # came back is only dropped lazily): while it drains the consumer gets no
                    # new message with it, so the count already covers these messages.
                    continue
                self._draining.add_entry(consumer_id, key_hash, count)

    # -- dispatch ------------------------------------------------------------------------------

    @property
    def _replay_size(self) -> int:
        return len(self._replay)

    def _requeue(self, messages: list[Message]) -> None:
        self._replay.add(messages)

    def _discard_replayed(self, positions: set[Position]) -> list[Message]:
        return self._replay.discard(positions)

    def _read_budget(self, cap: int) -> int:
        """Read while consumers have permits and the look-ahead has room: messages held back
        for blocked hashes must not stop other keys, but they bound how far we read ahead."""
        permits = min(sum(state.permits for state in self._consumers.values()), cap)
        if not permits:
            return 0
        return max(0, min(permits - len(self._incoming), self._max_buffered - self.buffered))

    def _deliver(self, cap: int) -> list[Delivery]:
        self._unblocked_hashes = 0
        self._wakeup_requested = False
        budget = min(sum(state.permits for state in self._consumers.values()), cap)
        if not budget or not self.buffered:
            return []
        sent: dict[ConsumerState, list[Message]] = {}
        if self._replay:
            budget = self._dispatch_replay(budget, sent)
        if budget and self._incoming:
            self._dispatch_incoming(budget, sent)
        return [self._record_sent(state, messages) for state, messages in sent.items()]

    def _dispatch_replay(self, budget: int, sent: dict[ConsumerState, list[Message]]) -> int:
        points, owners, replay = self._points, self._owners, self._replay
        draining = self._draining if self._draining else None  # None: a no-op, skip the calls
        for key_hash, _ in replay.groups():
            state = owners[bisect_left(points, key_hash)]
            if not state.permits:
                continue
            if draining is not None and draining.should_block(state.consumer.consumer_id, key_hash):
                continue
            messages = replay.take(key_hash, min(state.permits, budget))
            state.permits -= len(messages)
            budget -= len(messages)
            if state in sent:
                sent[state].extend(messages)
            else:
                sent[state] = messages
            if not budget:
                break
        return budget

    def _dispatch_incoming(self, budget: int, sent: dict[ConsumerState, list[Message]]) -> None:
        points, owners, replay = self._points, self._owners, self._replay
        draining = self._draining if self._draining else None  # None: a no-op, skip the calls
        waiting = replay.hashes
        incoming = self._incoming
        used = 0
        for message in incoming:
            if not budget:
                break
            used += 1
            key_hash = message.key_hash
            if waiting and key_hash in waiting:
                # Replay first: older messages of this hash wait, so this one waits behind them.
                replay.append_newest(message)
                continue
            state = owners[bisect_left(points, key_hash)]
            if not state.permits or (
                draining is not None and draining.should_block(state.consumer.consumer_id, key_hash)
            ):
                replay.append_newest(message)
                continue
            state.permits -= 1
            budget -= 1
            bucket = sent.get(state)
            if bucket is None:
                sent[state] = [message]
            else:
                bucket.append(message)
        del incoming[:used]

    def _released(self, state: ConsumerState, messages: list[Message], closing: bool) -> None:
        draining = self._draining
        if not draining:
            return
        consumer_id = state.consumer.consumer_id
        for message in messages:
            if draining.reduce_ref_count(consumer_id, message.key_hash, closing=closing):
                self._unblocked_hashes += 1

    # -- batched unblocking --------------------------------------------------------------------

    @property
    def unblocking_interval(self) -> float:
        return self._unblocking_interval

    @property
    def unblocked_hashes(self) -> int:
        """Hashes unblocked since the last take_deliveries."""
        return self._unblocked_hashes

    def unblock_wakeup(self, now: float) -> float | None:
        if not self._unblocked_hashes or self._wakeup_requested:
            return None
        self._wakeup_requested = True
        return now + self._unblocking_interval

    # -- observability -------------------------------------------------------------------------

    def owner_of(self, key_hash: int) -> ConsumerId | None:
        """The consumer that owns the hash on the ring (it may still be draining elsewhere)."""
        return self._ring.select(key_hash)

    def assignments(self) -> dict[ConsumerId, tuple[HashRange, ...]]:
        """Each consumer's hash ranges on the ring."""
        return self._ring.assignments()

    def stats(self) -> DispatcherStats:
        ranges = self._ring.assignments()
        draining = self._draining.consumer_stats()
        consumers = tuple(
            replace(
                self._consumer_stats(state),
                assigned_ranges=ranges.get(consumer_id, ()),
                draining_hashes=draining.get(consumer_id, ()),
            )
            for consumer_id, state in self._consumers.items()
        )
        return replace(
            super().stats(),
            consumers=consumers,
            draining_hashes_count=len(self._draining),
            draining_hashes_pending_messages=self._draining.pending_messages,
            draining_hashes_cleared_total=self._draining.cleared_total,
        )


def _count_hashes_in(key_hashes: Iterable[int], ranges: tuple[HashRange, ...]) -> dict[int, int]:
    """How many of the messages (their key hashes) have each hash that falls in the (sorted,
    disjoint) ranges."""
    starts = [r.start for r in ranges]
    counts: dict[int, int] = {}
    for key_hash in key_hashes:
        index = bisect_right(starts, key_hash) - 1
        if index >= 0 and key_hash <= ranges[index].end:
            counts[key_hash] = counts.get(key_hash, 0) + 1
    return counts
