"""Fence every segment of a topic to a producer epoch: the I/O half of a topic-wide grant.

Each segment's broker raises the segment's producer epoch (``POST .../fence``), reserves the
segment for the holder and closes the producers admitted under an older epoch or of another
name. An Exclusive or WaitForExclusive grant asks ``ifFree``: a broker where a producer of
another name is connected refuses (ProducerBusy, naming them) and changes nothing, so no
producer opens between that check and the reservation; the round raises SegmentsBusy and the
caller undoes the claim. The segments to fence are read from the topic after
the grant's compare-and-swap: the Active ones and the children of a split or merge whose
``ChildrenCreated`` is recorded, each of which must be fenced, and the children of one still
``Planned``, fenced if their storage exists already. A child made later is made with the new
epoch: the operation's next compare-and-swap of the topic conflicts with the grant's, so it
reads the topic again and creates (idempotently, raising the epoch) once more.
Rounds repeat until a fresh read shows nothing left, so a split committed meanwhile is covered.
When the grant ends (or a claim is undone) the same rounds run with no holder, releasing every
segment (``POST .../release``: the reservation goes, the epoch is not raised, nobody is
closed); a segment already gone counts as released. :func:`connected_producers` is the cheap
probe (``GET .../producers``) a claim makes first: only a hint, the conditional fence decides.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from ..admin.broker_admin import BrokerAdminError, BrokerUnreachable, SegmentBusy
from ..model.clock import Clock
from ..model.exclusive_grants import FenceTargets, fence_targets
from ..model.layout import LayoutChange, SegmentLayout
from ..model.resources import OperationStep, ScalableTopic, Segment
from ..store import NotFound
from ..store.informers import Informers
from ..tasks import gather_settled

FENCE_TIMEOUT = 10.0  # a grant is refused when a segment stays unreachable this long
_RETRY_FIRST, _RETRY_MAX = 0.05, 1.0


class SegmentFencer(Protocol):
    """The broker calls on one segment that a grant makes (``admin.broker_admin.BrokerAdmin``)."""

    async def fence(
        self,
        broker_url: str,
        namespace: str,
        topic: str,
        descriptor: str,
        epoch: int,
        holder: str | None = None,
        *,
        if_free: bool = False,
    ) -> int:
        """Fence to ``epoch`` and reserve for ``holder``; the epoch in force afterwards.
        ``if_free``: raise SegmentBusy, changing nothing, while another producer is connected."""
        ...

    async def release(
        self, broker_url: str, namespace: str, topic: str, descriptor: str, epoch: int
    ) -> int:
        """Clear a reservation made at ``epoch`` or before; the epoch in force."""
        ...

    async def producers(
        self, broker_url: str, namespace: str, topic: str, descriptor: str
    ) -> list[str]:
        """The names of the producers connected to the segment."""
        ...


class FenceFailed(Exception):
    """Some Active segments could not be fenced in time; ``missing`` says why, per id."""

    def __init__(self, missing: dict[int, str]) -> None:
        reasons = "; ".join(f"segment {i}: {why}" for i, why in sorted(missing.items()))
        super().__init__(f"not every active segment could be fenced: {reasons}")
        self.missing = missing


class SegmentsBusy(Exception):
    """A conditional fence was refused: ``producers`` are connected, per segment id."""

    def __init__(self, producers: dict[int, tuple[str, ...]]) -> None:
        where = "; ".join(f"segment {i}: {', '.join(p)}" for i, p in sorted(producers.items()))
        super().__init__(f"other producers are connected ({where})")
        self.producers = producers

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(sorted({name for names in self.producers.values() for name in names}))


@dataclass(frozen=True, slots=True)
class _Served:
    broker: str | None
    descriptor: str


async def fence_topic(
    informers: Informers,
    fencer: SegmentFencer,
    clock: Clock,
    namespace: str,
    name: str,
    epoch: int,
    check: Callable[[ScalableTopic], None],
    give_up_after: float = FENCE_TIMEOUT,
    holder: str | None = None,
    if_free: bool = False,
) -> int:
    """Fence every segment of the topic to ``epoch``, reserved for ``holder`` (None: release
    every reservation made at ``epoch`` or before); return the highest epoch a segment
    reports in force (above ``epoch`` only if a segment was taken over on its own). ``check``
    sees every read of the topic (it raises to stop: the leader was deposed). ``if_free``:
    raise SegmentsBusy once a round found another producer connected (the segments fenced
    before stay reserved: the caller releases them). Raises FenceFailed after
    ``give_up_after`` seconds, NotFound when the topic is gone, StoreError."""
    deadline = clock.monotonic() + give_up_after
    fenced: set[int] = set()
    highest = epoch
    delay = _RETRY_FIRST
    while True:
        targets = _targets(informers, namespace, name, check)
        todo = (targets.required | targets.if_present) - fenced
        if not targets.required - fenced:
            return highest
        served = _served(informers, namespace, name)
        attempts = (
            _fence_one(
                fencer, namespace, name, segment_id, served.get(segment_id), epoch, holder, if_free
            )
            for segment_id in sorted(todo)
        )
        missing: dict[int, str] = {}
        busy: dict[int, tuple[str, ...]] = {}
        for segment_id, in_force, problem in await gather_settled(*attempts):
            if isinstance(problem, tuple):
                busy[segment_id] = problem
            elif in_force is not None:
                fenced.add(segment_id)
                highest = max(highest, in_force)
            elif segment_id in targets.required:
                missing[segment_id] = problem
        if busy:
            raise SegmentsBusy(busy)
        if highest > epoch and holder is not None:
            return highest  # the caller raises the topic's epoch past it and fences again
        if not missing:
            continue  # read again: done unless the layout moved meanwhile
        if clock.monotonic() >= deadline:
            raise FenceFailed(missing)
        await asyncio.sleep(delay)
        delay = min(delay * 2, _RETRY_MAX)


async def connected_producers(
    informers: Informers,
    fencer: SegmentFencer,
    namespace: str,
    name: str,
    check: Callable[[ScalableTopic], None],
    holder: str,
) -> dict[int, tuple[str, ...]]:
    """The producers of other names than ``holder`` connected to the segments a grant would
    fence, per segment id (those with none left out). A hint read before a claim, so that a
    claim that would be refused costs no write: a segment that does not answer counts as free
    here, and the claim's conditional fence decides."""
    targets = _targets(informers, namespace, name, check)
    served = _served(informers, namespace, name)

    async def probe(segment_id: int) -> tuple[int, tuple[str, ...]]:
        where = served.get(segment_id)
        if where is None or where.broker is None:
            return segment_id, ()
        try:
            names = await fencer.producers(where.broker, namespace, name, where.descriptor)
        except (BrokerAdminError, BrokerUnreachable):
            return segment_id, ()
        return segment_id, tuple(sorted({n for n in names if n != holder}))

    found = await gather_settled(*(probe(i) for i in sorted(targets.required | targets.if_present)))
    return {segment_id: names for segment_id, names in found if names}


def _targets(
    informers: Informers, namespace: str, name: str, check: Callable[[ScalableTopic], None]
) -> FenceTargets:
    raw = informers.topics.get(namespace, name)
    if raw is None:
        raise NotFound(ScalableTopic.KIND, namespace, name)
    topic = ScalableTopic.model_validate(raw)
    check(topic)
    status = topic.status
    layout = SegmentLayout.from_status(status.to_wire()) if status.segments else None
    pending = status.pending_operation
    children = LayoutChange.from_dict(pending.to_wire()).child_ids if pending else ()
    created = pending is not None and pending.step is not OperationStep.PLANNED
    return fence_targets(layout, children, created)


async def _fence_one(
    fencer: SegmentFencer,
    namespace: str,
    name: str,
    segment_id: int,
    where: _Served | None,
    epoch: int,
    holder: str | None,
    if_free: bool,
) -> tuple[int, int | None, str | tuple[str, ...]]:
    """(id, epoch in force or None, why not: a reason, or the producers that keep it busy)."""
    if where is None or where.broker is None:
        return segment_id, None, "not placed on a broker yet"
    try:
        if holder is None:
            in_force = await fencer.release(where.broker, namespace, name, where.descriptor, epoch)
        else:
            in_force = await fencer.fence(
                where.broker, namespace, name, where.descriptor, epoch, holder, if_free=if_free
            )
    except SegmentBusy as busy:
        return segment_id, None, busy.producers
    except BrokerAdminError as error:
        if holder is None and error.status == 404:
            return segment_id, epoch, ""  # a release: a segment gone holds no reservation
        return segment_id, None, str(error)
    except BrokerUnreachable as error:
        return segment_id, None, str(error)
    return segment_id, in_force, ""


def _served(informers: Informers, namespace: str, name: str) -> dict[int, _Served]:
    served = {}
    for item in informers.segments_of(namespace, name):
        segment = Segment.model_validate(item)
        served[segment.spec.segment_id] = _Served(
            segment.status.broker, segment.metadata.name.removeprefix(f"{name}-")
        )
    return served
