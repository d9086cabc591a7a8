"""What every subscription dispatcher offers the broker's I/O layer, and what it returns.

A dispatcher is pure decision logic for one subscription on one segment: it never reads the
log, sends a frame or looks at a clock. The I/O layer drives it:

- reads messages from the segment log in order and hands them to :meth:`Dispatcher.accept`,
  reading at most :meth:`Dispatcher.read_budget` more each time (bounded look-ahead);
- calls :meth:`Dispatcher.take_deliveries` after anything that may allow a delivery
  (messages accepted, permits granted, a consumer added or removed, messages redelivered, an
  unblock wake-up) and sends each :class:`Delivery` to its consumer;
- reports acks, nacks (:meth:`Dispatcher.redeliver`) and consumer changes as they arrive;
- after acks and nacks asks :meth:`Dispatcher.unblock_wakeup` whether to schedule one more
  ``take_deliveries`` (Key_Shared batches the hashes that became deliverable again).

Permits are counted in :class:`Message` records: a consumer never receives more records than
it was granted. Each record keeps its redelivery count: how many times it was delivered before
and came back (nack, redeliver-all, its consumer closing, a failover switch).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import NamedTuple, Protocol

from scalable_topics.model.hash_range import HashRange
from scalable_topics.model.key_shared import DrainingHashStats
from scalable_topics.model.position import Position

ConsumerId = int
"""Unique among one subscription's consumers; assigned by the broker."""


class DispatchMode(StrEnum):
    EXCLUSIVE = "Exclusive"
    FAILOVER = "Failover"
    SHARED = "Shared"
    KEY_SHARED = "Key_Shared"


@dataclass(frozen=True, slots=True)
class Consumer:
    consumer_id: ConsumerId
    name: str
    priority: int = 0
    """Lower is preferred: Failover activates, and Shared fills, lower values first."""


class Message(NamedTuple):
    """What a dispatcher knows of a message: where it is and the hash of its key."""

    position: Position
    key_hash: int
    """The 16-bit hash of the key; keyless messages carry the empty key's hash, 0."""
    batch_size: int = 1
    """Messages in the log entry; informational, permits count records."""


@dataclass(slots=True)
class Delivery:
    """Messages to send to one consumer now, in this order, each with its redelivery count."""

    consumer_id: ConsumerId
    messages: list[Message]
    redelivery_counts: list[int]


@dataclass(frozen=True, slots=True)
class ConsumerStats:
    consumer_id: ConsumerId
    name: str
    priority: int
    permits: int
    pending_messages: int
    active: bool
    """Whether it can receive messages: false for Failover standbys."""
    blocked_on_unacked: bool = False
    """It holds its unacked limit's worth (or did, and acks have not brought it to half)."""
    assigned_ranges: tuple[HashRange, ...] = ()
    """Key_Shared: the hash ranges this consumer owns on the ring."""
    draining_hashes: tuple[DrainingHashStats, ...] = ()
    """Key_Shared: hashes still pending here that now belong to another consumer."""


@dataclass(frozen=True, slots=True)
class DispatcherStats:
    mode: DispatchMode
    consumers: tuple[ConsumerStats, ...]
    buffered_messages: int
    """Read and not delivered: new messages plus those waiting for redelivery."""
    replay_messages: int
    """Of the buffered messages, those waiting for (re)delivery out of log order."""
    unacked_messages: int
    """Delivered and not acknowledged, at every consumer."""
    blocked_on_unacked: bool
    """The subscription is at its unacked limit (until acks bring it to half)."""
    delivered_total: int
    acked_total: int
    redelivered_total: int
    """Messages that came back to be dispatched again."""
    draining_hashes_count: int = 0
    draining_hashes_pending_messages: int = 0
    draining_hashes_cleared_total: int = 0


class DispatchError(Exception):
    """A request the subscription cannot accept."""


class ConsumerBusy(DispatchError):
    """An Exclusive subscription already has its one consumer."""

    def __init__(self, holder: Consumer) -> None:
        super().__init__(
            f"the exclusive subscription is held by consumer {holder.name!r} "
            f"(id {holder.consumer_id})"
        )
        self.holder = holder


class DuplicateConsumer(DispatchError):
    def __init__(self, consumer_id: ConsumerId) -> None:
        super().__init__(f"consumer id {consumer_id} is already attached to the subscription")
        self.consumer_id = consumer_id


class UnknownConsumer(DispatchError):
    def __init__(self, consumer_id: ConsumerId) -> None:
        super().__init__(f"consumer id {consumer_id} is not attached to the subscription")
        self.consumer_id = consumer_id


class Dispatcher(Protocol):
    """One subscription's dispatch decisions. Deterministic: the same calls give the same
    deliveries. Implemented by Exclusive, Failover, Shared and KeySharedDispatcher."""

    mode: DispatchMode

    def add_consumer(self, consumer: Consumer) -> None:
        """Attach a consumer with no permits. Raises DuplicateConsumer for a known id, and
        ConsumerBusy on an Exclusive subscription that has a consumer."""

    def remove_consumer(self, consumer_id: ConsumerId) -> None:
        """Detach a consumer; its pending messages go back to be dispatched again (for ordered
        modes before anything newer). Raises UnknownConsumer."""

    def add_permits(self, consumer_id: ConsumerId, permits: int) -> None:
        """The consumer can take ``permits`` more messages. Raises UnknownConsumer."""

    def accept(self, messages: Sequence[Message]) -> None:
        """Newly read messages, in log order, each after every message accepted before."""

    @property
    def buffered(self) -> int:
        """Messages held here that are not pending at any consumer."""

    def read_budget(self) -> int:
        """How many more messages the I/O layer should read now (0: stop reading)."""

    def take_deliveries(self) -> list[Delivery]:
        """What to send now, within permits; at most one Delivery per consumer. Every message
        returned is pending at that consumer until it acks, nacks or leaves."""

    def ack(self, consumer_id: ConsumerId, positions: Iterable[Position]) -> None:
        """Individual acks. Positions not pending at this consumer, and consumers no longer
        attached, are ignored: an ack never moves a message between consumers."""

    def redeliver(
        self, consumer_id: ConsumerId, positions: Iterable[Position] | None = None
    ) -> None:
        """The consumer nacked these pending messages (None: all of them); they are dispatched
        again, to whichever consumer the mode chooses. Unknown ones are ignored."""

    def unblock_wakeup(self, now: float) -> float | None:
        """When to call take_deliveries again because held-back messages became deliverable
        (Key_Shared), or None. Answers a time once per batch; take_deliveries ends the batch."""

    def pending(self, consumer_id: ConsumerId) -> list[Message]:
        """The consumer's delivered, unacknowledged messages, by position."""

    def pending_up_to(self, consumer_id: ConsumerId, position: Position) -> list[Position]:
        """The positions of the consumer's pending messages up to and including ``position``
        (what a cumulative ack covers), in no particular order."""

    def pending_message(self, position: Position) -> Message | None:
        """The message at ``position`` if it is pending at a consumer (None otherwise)."""

    @property
    def unacked(self) -> int:
        """Messages delivered and not acknowledged, at every consumer."""

    def consumers(self) -> list[Consumer]:
        """Attached consumers, in the order they were added."""

    @property
    def outstanding(self) -> int:
        """Messages accepted and not acknowledged yet: buffered plus pending everywhere. Zero
        with the log fully read means the segment is drained for this subscription."""

    def stats(self) -> DispatcherStats: ...
