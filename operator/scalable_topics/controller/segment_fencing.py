"""Fence every segment of a topic to a producer epoch: the I/O half of a topic-wide grant.

Each segment's broker raises the segment's producer epoch (``POST .../fence``), reserves the
segment for the holder (or, with no holder, releases it: the grant ended) and closes the
producers admitted under an older epoch or of another name. The segments to fence are read from the topic after
the grant's compare-and-swap: the Active ones and the children of a split or merge whose
``ChildrenCreated`` is recorded, each of which must be fenced, and the children of one still
``Planned``, fenced if their storage exists already. A child made later is made with the new
epoch: the operation's next compare-and-swap of the topic conflicts with the grant's, so it
reads the topic again and creates (idempotently, raising the epoch) once more.
Rounds repeat until a fresh read shows nothing left, so a split committed meanwhile is covered.
When the grant ends the same rounds run with no holder, releasing every segment; a segment
already gone counts as released.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from ..admin.broker_admin import BrokerAdminError, BrokerUnreachable
from ..model.clock import Clock
from ..model.exclusive_grants import fence_targets
from ..model.layout import LayoutChange, SegmentLayout
from ..model.resources import TOPIC_LABEL, OperationStep, ScalableTopic, Segment
from ..store import Store

FENCE_TIMEOUT = 10.0  # a grant is refused when a segment stays unreachable this long
_RETRY_FIRST, _RETRY_MAX = 0.05, 1.0


class SegmentFencer(Protocol):
    """The broker call that fences one segment and reserves it for ``holder`` (None
    releases it); returns the epoch in force afterwards."""

    async def fence(
        self,
        broker_url: str,
        namespace: str,
        topic: str,
        descriptor: str,
        epoch: int,
        holder: str | None = None,
    ) -> int: ...


class FenceFailed(Exception):
    """Some Active segments could not be fenced in time; ``missing`` says why, per id."""

    def __init__(self, missing: dict[int, str]) -> None:
        reasons = "; ".join(f"segment {i}: {why}" for i, why in sorted(missing.items()))
        super().__init__(f"not every active segment could be fenced: {reasons}")
        self.missing = missing


@dataclass(frozen=True, slots=True)
class _Served:
    broker: str | None
    descriptor: str


async def fence_topic(
    store: Store,
    fencer: SegmentFencer,
    clock: Clock,
    namespace: str,
    name: str,
    epoch: int,
    check: Callable[[ScalableTopic], None],
    give_up_after: float = FENCE_TIMEOUT,
    holder: str | None = None,
) -> int:
    """Fence every segment of the topic to ``epoch``, reserved for ``holder``; return the highest epoch a segment
    reports in force (above ``epoch`` only if a segment was taken over on its own). ``check``
    sees every read of the topic (it raises to stop: the leader was deposed). Raises
    FenceFailed after ``give_up_after`` seconds, NotFound when the topic is gone, StoreError."""
    deadline = clock.monotonic() + give_up_after
    fenced: set[int] = set()
    highest = epoch
    delay = _RETRY_FIRST
    while True:
        topic = ScalableTopic.model_validate(await store.get(ScalableTopic.KIND, namespace, name))
        check(topic)
        status = topic.status
        layout = SegmentLayout.from_status(status.to_wire()) if status.segments else None
        pending = status.pending_operation
        children = LayoutChange.from_dict(pending.to_wire()).child_ids if pending else ()
        created = pending is not None and pending.step is not OperationStep.PLANNED
        targets = fence_targets(layout, children, created)
        todo = (targets.required | targets.if_present) - fenced
        if not targets.required - fenced:
            return highest
        served = await _served(store, namespace, name)
        attempts = (
            _fence_one(fencer, namespace, name, segment_id, served.get(segment_id), epoch, holder)
            for segment_id in sorted(todo)
        )
        missing: dict[int, str] = {}
        for segment_id, in_force, problem in await asyncio.gather(*attempts):
            if in_force is not None:
                fenced.add(segment_id)
                highest = max(highest, in_force)
            elif segment_id in targets.required:
                missing[segment_id] = problem
        if highest > epoch and holder is not None:
            return highest  # the caller raises the topic's epoch past it and fences again
        if not missing:
            continue  # read again: done unless the layout moved meanwhile
        if clock.monotonic() >= deadline:
            raise FenceFailed(missing)
        await asyncio.sleep(delay)
        delay = min(delay * 2, _RETRY_MAX)


async def _fence_one(
    fencer: SegmentFencer,
    namespace: str,
    name: str,
    segment_id: int,
    where: _Served | None,
    epoch: int,
    holder: str | None,
) -> tuple[int, int | None, str]:
    """(id, epoch in force or None, why not)."""
    if where is None or where.broker is None:
        return segment_id, None, "not placed on a broker yet"
    try:
        in_force = await fencer.fence(
            where.broker, namespace, name, where.descriptor, epoch, holder
        )
    except BrokerAdminError as error:
        if holder is None and error.status == 404:
            return segment_id, epoch, ""  # a release: a segment gone holds no reservation
        return segment_id, None, str(error)
    except BrokerUnreachable as error:
        return segment_id, None, str(error)
    return segment_id, in_force, ""


async def _served(store: Store, namespace: str, name: str) -> dict[int, _Served]:
    listing = await store.list(Segment.KIND, namespace, f"{TOPIC_LABEL}={name}")
    served = {}
    for item in listing.items:
        segment = Segment.model_validate(item)
        served[segment.spec.segment_id] = _Served(
            segment.status.broker, segment.metadata.name.removeprefix(f"{name}-")
        )
    return served
