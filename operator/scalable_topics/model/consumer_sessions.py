"""Consumer sessions of ordered (Stream, Checkpoint) subscriptions, apart from any I/O.

Seed: Consumer Session Lifecycle. A registration (consumer name, assigned segments, the layout
epoch and controller term they were computed at) is durable; whether the consumer is connected
is not. A disconnected consumer keeps its registration, and so its segments, until its grace
period ends; a new leader starts a fresh grace period for every registration it loads.

``GraceTimers`` keeps the deadlines on a monotonic clock the caller passes in; ``reassign``
deals the segments to every registered consumer, connected or not, so a brief disconnection
moves nothing.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Mapping
from datetime import datetime

from .assignment import assign
from .layout import SegmentLayout
from .resources import ConsumerRegistration

SessionKey = tuple[str, str]  # (subscription, consumer name)


class GraceTimers:
    """When each disconnected consumer's grace period ends (monotonic seconds)."""

    def __init__(self, grace_period: float) -> None:
        if not grace_period > 0:
            raise ValueError(f"the consumer grace period must be positive, not {grace_period}s")
        self._grace_period = grace_period
        self._deadlines: dict[SessionKey, float] = {}
        # (deadline, key) entries; an entry whose deadline no longer matches is stale.
        self._heap: list[tuple[float, SessionKey]] = []

    @property
    def grace_period(self) -> float:
        return self._grace_period

    def start(self, key: SessionKey, now: float) -> float:
        """The consumer disconnected at ``now``: its grace period runs from here."""
        deadline = now + self._grace_period
        self._deadlines[key] = deadline
        heapq.heappush(self._heap, (deadline, key))
        return deadline

    def cancel(self, key: SessionKey) -> None:
        """The consumer reconnected, left or was removed: no deadline any more."""
        self._deadlines.pop(key, None)

    def deadline(self, key: SessionKey) -> float | None:
        return self._deadlines.get(key)

    def next_deadline(self) -> float | None:
        self._drop_stale()
        return self._heap[0][0] if self._heap else None

    def pop_expired(self, now: float) -> list[SessionKey]:
        """The consumers whose grace period ended by ``now``, forgotten here, oldest first."""
        expired: list[SessionKey] = []
        while True:
            self._drop_stale()
            if not self._heap or self._heap[0][0] > now:
                return expired
            _, key = heapq.heappop(self._heap)
            del self._deadlines[key]
            expired.append(key)

    def __contains__(self, key: object) -> bool:
        return key in self._deadlines

    def __len__(self) -> int:
        return len(self._deadlines)

    def _drop_stale(self) -> None:
        heap = self._heap
        while heap and self._deadlines.get(heap[0][1]) != heap[0][0]:
            heapq.heappop(heap)


def drained_segments(
    layout: SegmentLayout | None,
    drained_by_segment: Mapping[int, frozenset[str]],
    subscription: str,
) -> set[int]:
    """The sealed segments every message of which is acknowledged on ``subscription``.

    ``drained_by_segment`` holds the drained markers of the segments whose Segment object
    exists. A sealed segment without one counts as drained: objects are removed only by
    garbage collection of drained segments or by the topic's deletion (as the brokers read it).
    """
    if layout is None:
        return set()
    drained: set[int] = set()
    for segment in layout.sealed:
        markers = drained_by_segment.get(segment.segment_id)
        if markers is None or subscription in markers:
            drained.add(segment.segment_id)
    return drained


def reassign(
    layout: SegmentLayout | None,
    drained: Iterable[int],
    members: Mapping[str, datetime | None],
    term: int,
    previous: Mapping[str, Iterable[int]] | None = None,
) -> tuple[ConsumerRegistration, ...]:
    """Every registered consumer (name -> when it registered) with the segments the seed's
    round-robin gives it now (keeping what it had in ``previous`` where the shares allow),
    stamped with the layout epoch and ``term``; sorted by name. Without a layout yet (the
    topic is being created) nobody reads anything, at epoch 0."""
    if layout is None:
        segments_of: Mapping[str, tuple[int, ...]] = {}
        epoch = 0
    else:
        assignment = assign(layout, members, drained, term, previous)
        segments_of, epoch = assignment.segments_by_consumer, assignment.layout_epoch
    return tuple(
        ConsumerRegistration(
            name=name,
            assigned_segments=list(segments_of.get(name, ())),
            layout_epoch=epoch,
            term=term,
            registered_at=members[name],
        )
        for name in sorted(members)
    )
