"""Topic-wide exclusive producers, granted by the topic's leader (DESIGN guarantee 5).

A grant is carried out in this order, and only then reported: a compare-and-swap of
``status.producer`` raises the topic's producer epoch and names the holder (stamped with this
leader's term), then every Active segment is fenced to that epoch and reserved for the holder
(``segment_fencing.py``), so no other producer opens there while the holder has none.
Segments created afterwards inherit the epoch and the reservation from the topic. Were a segment found ahead of
the topic (taken over on its own, outside any grant), the epoch is raised past it and the
fencing repeated, so the holder is never refused by a segment it was granted.

Only ExclusiveWithFencing takes over (exclusive-producer seed). Exclusive and WaitForExclusive
*claim* a topic nobody holds, and only while no producer of another name is connected to it:
the leader first asks every segment's broker who is connected (a cheap read, so that a claim
bound to fail writes nothing), then writes the holder with ``claiming`` set and fences with
``ifFree``: each broker reserves its segment only while no other producer is connected there,
atomically, and refuses otherwise. A refused claim is undone (holder cleared, the epoch stays,
every segment released without raising its epoch, so the producers that made it busy are left
alone); a confirmed one is written without ``claiming``, and only then reported. Exclusive is
then refused with ProducerBusy, WaitForExclusive keeps its place in line. Waiting requests are
served in arrival order: only the first in line is tried, and an Exclusive request is busy
while anyone waits. A waiting request holds nothing, so Shared producers keep opening; the
leader looks again with backoff (0.1 s doubling to 1 s) while the first in line finds others
connected, because brokers have no channel to tell it that the last one left.

Liveness is not persisted (as for consumer sessions): a holder whose broker connection drops
keeps the topic for the grace period, and may resume within it with the epoch it was granted;
when the period ends, or on an explicit release, the holder is cleared (the epoch stays), the
first WaitForExclusive request in line is tried, and every segment's reservation is released
(at the ended grant's epoch, so a release that arrives late cannot undo a newer grant). A new leader loads the holder as
disconnected with a fresh grace period, stamps its term on it in one compare-and-swap (so a
deposed leader's write conflicts, and one that reads again finds a newer term and stops) and
finishes fencing the segments to the holder's epoch (or, with no holder, releasing them), in
case its predecessor died half way. A holder still ``claiming`` was never told: the new leader
undoes its claim, and its requester, which the broker asks again, gets a fresh decision.
The queue of waiting requests lives in memory: after a failover the brokers ask again.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from ..model.clock import Clock
from ..model.exclusive_grants import (
    Claim,
    ProducerHold,
    Refusal,
    Refuse,
    Resume,
    TakeOver,
    Wait,
    decide,
)
from ..model.resources import ProducerAccessMode, ScalableTopic
from ..protocol import ErrorCode
from ..store import Conflict, NotFound, Store, StoreError
from ..store.informers import Informers
from .led_topics import (
    DEFAULT_GRACE_PERIOD,
    Deposed,
    LedTopics,
    Refused,
    check_term,
    keep_settling,
    newest_term,
    retry,
)
from .segment_fencing import (
    FENCE_TIMEOUT,
    FenceFailed,
    SegmentFencer,
    SegmentsBusy,
    connected_producers,
    fence_topic,
)

log = logging.getLogger(__name__)

# How soon the first WaitForExclusive request in line, kept out by other producers, is tried
# again: the brokers do not say when the last one leaves, so the leader looks.
RECHECK_FIRST, RECHECK_MAX = 0.1, 1.0

_CODES = {
    Refusal.BUSY: ErrorCode.PRODUCER_BUSY,
    Refusal.FENCED: ErrorCode.PRODUCER_FENCED,
    Refusal.INVALID: ErrorCode.INVALID_REQUEST,
}


class GrantRefused(Refused):
    """A grant request the coordinator turns down; ``code`` goes on the wire."""


class GrantChannel(Protocol):
    """A requester as the coordinator sees it. The calls must not block: the endpoint queues
    the frames, in call order."""

    def queued(self) -> None:
        """A WaitForExclusive request waits for its turn (answers the request)."""
        ...

    def granted(self, epoch: int) -> None:
        """The topic is held at ``epoch`` (answers the request, or follows ``queued``)."""
        ...

    def revoked(self, code: ErrorCode, message: str) -> None:
        """The grant (or the wait) ended here: fenced by another, topic gone, leadership lost."""
        ...


@dataclass(eq=False, slots=True)
class _Waiter:
    name: str
    mode: ProducerAccessMode
    requested_epoch: int | None  # a returning holder's epoch, if it is one
    channel: GrantChannel


class TopicProducerGrants:
    """One topic's exclusive producer, for one term of leadership. ``run`` serves until
    cancelled (or until the store shows a newer term); ``acquire``, ``release`` and ``detach``
    are the endpoint's calls."""

    def __init__(
        self,
        store: Store,
        informers: Informers,
        fencer: SegmentFencer,
        namespace: str,
        name: str,
        term: int,
        clock: Clock,
        grace_period: float = DEFAULT_GRACE_PERIOD,
        fence_timeout: float = FENCE_TIMEOUT,
    ) -> None:
        if not grace_period > 0:
            raise ValueError(f"the producer grace period must be positive, not {grace_period}s")
        self._store = store
        self._informers = informers
        self._fencer = fencer
        self._namespace, self._name = namespace, name
        self._term = term
        self._clock = clock
        self._grace_period = grace_period
        self._fence_timeout = fence_timeout
        self._lock = asyncio.Lock()
        self._ready = asyncio.Event()
        self._wake = asyncio.Event()
        self._hold = ProducerHold()  # as last read or written
        self._holder_channel: GrantChannel | None = None
        self._grace_deadline: float | None = None
        self._clear_due = False  # the holder is released or expired; not yet written
        self._fence_due: int | None = None  # an adopted grant whose fencing is finished here
        self._release_due: int | None = None  # an ended grant's epoch; segments still reserved
        self._waiters: deque[_Waiter] = deque()
        self._recheck_at: float | None = None  # when the first in line is tried again
        self._recheck_delay = RECHECK_FIRST
        self._closed: tuple[ErrorCode, str] | None = None

    @property
    def topic(self) -> str:
        return f"{self._namespace}/{self._name}"

    @property
    def waiting(self) -> tuple[str, ...]:
        return tuple(w.name for w in self._waiters)

    # -- running --------------------------------------------------------------------------------

    async def run(self) -> None:
        try:
            await self._start()
            await self._keep()
        except Deposed as deposed:
            log.warning("exclusive producer of %s: %s", self.topic, deposed)
        finally:
            self._shut(ErrorCode.NOT_LEADER, f"this controller no longer leads {self.topic}")

    async def _start(self) -> None:
        """Adopt the persisted holder: disconnected, a fresh grace period, this term."""
        await retry(self._adopt, f"loading the exclusive producer of {self.topic}")
        self._ready.set()

    async def _adopt(self) -> None:
        async with self._lock:
            try:
                topic = await self._read()
            except _TopicGone as gone:
                self._shut(ErrorCode.TOPIC_NOT_FOUND, str(gone))
                return
            hold = ProducerHold.from_status(topic.status.producer)
            if hold.claiming:
                # The predecessor died before every segment confirmed the claim: nobody was
                # told, so it is undone; the requester, asked again by its broker, is decided
                # afresh. Its segments are released (reservations only, nobody is fenced).
                log.info(
                    "exclusive producer of %s: term %d undoes the unconfirmed claim of %s",
                    self.topic,
                    self._term,
                    hold.holder,
                )
                hold = hold.released()
                await self._write(topic, hold)
                self._release_due = hold.epoch
                self._wake.set()
            elif hold.holder is not None:
                await self._write(topic, hold)
                self._grace_deadline = self._clock.monotonic() + self._grace_period
                self._fence_due = hold.epoch
                self._wake.set()
                log.info(
                    "exclusive producer of %s: term %d adopted holder %s at epoch %d",
                    self.topic,
                    self._term,
                    hold.holder,
                    hold.epoch,
                )
            elif hold.epoch > 0:
                # The predecessor may have died between clearing the holder and releasing.
                self._release_due = hold.epoch
                self._wake.set()
            self._hold = hold

    async def _keep(self) -> None:
        """Expire the holder's grace period, persist releases, grant waiters, finish adopted
        fencing; retrying failures with backoff."""
        await keep_settling(
            self._settle_now,
            self._wake,
            self._next_deadline,
            self._clock,
            f"settling the exclusive producer of {self.topic}",
            (StoreError, ValueError, FenceFailed, GrantRefused),
        )

    def _next_deadline(self) -> float | None:
        due = [d for d in (self._grace_deadline, self._recheck_at) if d is not None]
        return min(due, default=None)

    async def _settle_now(self) -> bool:
        """Settle; True once the topic is gone (and nothing is served any more)."""
        try:
            async with self._lock:
                await self._settle()
        except (_TopicGone, NotFound) as gone:
            self._shut(ErrorCode.TOPIC_NOT_FOUND, f"topic {self.topic} is gone: {gone}")
            return True
        return False

    async def _settle(self) -> None:
        if self._closed is not None:
            return
        deadline = self._grace_deadline
        if (
            deadline is not None
            and self._holder_channel is None
            and self._clock.monotonic() >= deadline
        ):
            log.info(
                "exclusive producer %s of %s did not come back within %.0fs: released",
                self._hold.holder,
                self.topic,
                self._grace_period,
            )
            self._grace_deadline = None
            self._clear_due = True
        if self._clear_due:
            await self._clear()
        if self._fence_due is not None:
            await fence_topic(
                self._informers,
                self._fencer,
                self._clock,
                self._namespace,
                self._name,
                self._fence_due,
                self._check_fence,
                self._fence_timeout,
                holder=self._hold.holder,
            )
            self._fence_due = None
        # A timer may fire up to the loop's clock resolution early: a recheck due within a
        # millisecond is due now (else the keeper would wake again and again until it is).
        if self._recheck_at is not None and self._clock.monotonic() < self._recheck_at - 1e-3:
            await self._release_segments()  # the first in line is tried again later
            return
        self._recheck_at = None
        while self._waiters and self._hold.holder is None and self._closed is None:
            waiter = self._waiters[0]
            try:
                granted = await self._serve(
                    waiter.name, waiter.mode, waiter.requested_epoch, waiter.channel, promoting=True
                )
            except GrantRefused as refusal:
                if refusal.code is ErrorCode.SERVICE_NOT_READY:
                    raise  # it keeps its place; tried again after a backoff
                self._forget_waiter(waiter)
                waiter.channel.revoked(refusal.code, str(refusal))
                continue
            if not granted:
                if self._hold.holder is None:  # other producers are connected: look again
                    self._look_again_later()
                break
            if not self._forget_waiter(waiter):
                self.detach(waiter.channel)  # its connection dropped while it was being granted
        await self._release_segments()

    async def _release_segments(self) -> None:
        """Release every segment of an ended grant (or undone claim), if nobody holds the
        topic since; a no-op when nothing is due."""
        if self._release_due is None or self._hold.holder is not None:
            return
        await fence_topic(
            self._informers,
            self._fencer,
            self._clock,
            self._namespace,
            self._name,
            self._release_due,
            self._check_fence,
            self._fence_timeout,
            holder=None,
        )
        self._release_due = None

    def _forget_waiter(self, waiter: _Waiter) -> bool:
        """Take ``waiter`` out of the line; False if it had left already (detached)."""
        if waiter in self._waiters:
            first = self._waiters[0] is waiter
            self._waiters.remove(waiter)
            if first:
                self._next_in_line()
            return True
        return False

    def _next_in_line(self) -> None:
        """The first in line left, or the holder did: the first in line is tried at once, with
        a fresh backoff."""
        self._recheck_at = None
        self._recheck_delay = RECHECK_FIRST
        if self._waiters and self._hold.holder is None:
            self._wake.set()

    def _look_again_later(self) -> None:
        """The first in line is kept out by other producers: try it again after a backoff."""
        self._recheck_at = self._clock.monotonic() + self._recheck_delay
        self._recheck_delay = min(self._recheck_delay * 2, RECHECK_MAX)
        self._wake.set()  # the keeper takes the new deadline

    # -- the endpoint's calls -------------------------------------------------------------------

    async def acquire(
        self,
        name: str,
        mode: ProducerAccessMode,
        requested_epoch: int | None,
        channel: GrantChannel,
    ) -> None:
        """Grant, queue or refuse. On success the channel has been told (``granted`` or
        ``queued``) before this returns; otherwise GrantRefused says why."""
        await self._ready.wait()
        async with self._lock:
            self._refuse_if_closed()
            await self._serve(name, mode, requested_epoch, channel, promoting=False)

    async def release(self, channel: GrantChannel) -> None:
        """The holder gives the topic up, or a waiter stops waiting."""
        async with self._lock:
            self._refuse_if_closed()
            for waiter in self._waiters:
                if waiter.channel is channel:
                    self._forget_waiter(waiter)
                    return
            if channel is not self._holder_channel:
                raise GrantRefused(
                    ErrorCode.UNKNOWN_GRANT, f"the request holds no grant of {self.topic}"
                )
            log.info("exclusive producer %s released %s", self._hold.holder, self.topic)
            self._holder_channel = None
            self._clear_due = True
            self._wake.set()  # the next in line is granted by the keeper, off this request
            try:
                await self._clear()
            except _TopicGone:
                return  # nothing is held any more
            except Deposed as deposed:
                raise GrantRefused(ErrorCode.NOT_LEADER, str(deposed)) from None
            except (StoreError, ValueError) as error:
                # The release stands (nobody is granted meanwhile); the keeper writes it.
                log.info("recording the release of %s failed: %s; retrying", self.topic, error)

    def detach(self, channel: GrantChannel) -> None:
        """The requester's connection is gone: a holder's grace period starts; a waiter leaves
        the line."""
        for waiter in [w for w in self._waiters if w.channel is channel]:
            self._forget_waiter(waiter)
        if channel is not self._holder_channel:
            return
        self._holder_channel = None
        self._grace_deadline = self._clock.monotonic() + self._grace_period
        self._wake.set()
        log.info(
            "exclusive producer %s of %s disconnected; it keeps the topic for %.0fs",
            self._hold.holder,
            self.topic,
            self._grace_period,
        )

    # -- granting -------------------------------------------------------------------------------

    async def _serve(
        self,
        name: str,
        mode: ProducerAccessMode,
        requested_epoch: int | None,
        channel: GrantChannel,
        promoting: bool,
    ) -> bool:
        """Decide and carry out a request; True once granted, False while it waits.
        ``promoting``: the first in line is tried (it is already queued)."""
        others: tuple[str, ...] | None = None  # other producers connected; None: not asked yet
        while True:
            topic = await self._read_for_request()
            hold = self._effective(ProducerHold.from_status(topic.status.producer))
            decision = decide(
                hold,
                self._holder_channel is not None,
                name,
                mode,
                requested_epoch,
                ahead=0 if promoting else len(self._waiters),
                others=others or (),
            )
            match decision:
                case Refuse(reason, message):
                    raise GrantRefused(_CODES[reason], message)
                case Wait():
                    if not promoting:
                        self._waiters.append(_Waiter(name, mode, requested_epoch, channel))
                        channel.queued()
                        log.info("exclusive producer %s waits for %s", name, self.topic)
                        if len(self._waiters) == 1 and hold.holder is None:
                            self._look_again_later()  # kept out by other producers
                    return False
                case Claim(epoch):
                    if others is None:
                        others = await self._probe(name)
                        if others:
                            continue  # decided again: busy, or waiting
                    try:
                        await self._write_for_request(
                            topic, hold.granted(name, mode, epoch, claiming=True)
                        )
                    except Conflict:
                        await self._newer_than(topic)
                        continue
                    try:
                        await self._take(name, mode, epoch, channel, claim=True)
                    except SegmentsBusy as busy:
                        log.info(
                            "exclusive producer %s of %s is kept out: %s", name, self.topic, busy
                        )
                        others = busy.names
                        continue  # undone; decided again: busy, or waiting
                    return True
                case Resume(epoch) if hold.holder is not None:
                    # Its segments were fenced before it was first told; children inherit.
                    self._grace_deadline = None
                    self._holder_channel = channel
                    channel.granted(epoch)
                    log.info("exclusive producer %s of %s is back", name, self.topic)
                    return True
                case Resume(epoch) | TakeOver(epoch):
                    try:
                        await self._write_for_request(topic, hold.granted(name, mode, epoch))
                    except Conflict:  # someone wrote the topic: decide again on what is there now
                        await self._newer_than(topic)
                        continue
                    await self._take(name, mode, epoch, channel)
                    return True

    async def _probe(self, name: str) -> tuple[str, ...]:
        """The producers of other names connected to the topic's segments, as their brokers
        say now (a hint: the claim's conditional fence decides)."""
        try:
            busy = await connected_producers(
                self._informers, self._fencer, self._namespace, self._name, self._check_fence, name
            )
        except Deposed as deposed:
            raise GrantRefused(ErrorCode.NOT_LEADER, str(deposed)) from None
        except NotFound:
            raise GrantRefused(ErrorCode.TOPIC_NOT_FOUND, f"topic {self.topic} is gone") from None
        except (StoreError, ValueError) as error:
            raise GrantRefused(
                ErrorCode.SERVICE_NOT_READY, f"the controller cannot read {self.topic}: {error}"
            ) from None
        return tuple(sorted({n for names in busy.values() for n in names}))

    async def _take(
        self,
        name: str,
        mode: ProducerAccessMode,
        epoch: int,
        channel: GrantChannel,
        claim: bool = False,
    ) -> None:
        """The new holder is persisted at ``epoch``: fence, then tell it. ``claim``: the fences
        are conditional, and SegmentsBusy (after the claim is undone) says who kept it out."""
        displaced = self._holder_channel
        self._holder_channel = None
        self._grace_deadline = None
        self._clear_due = False
        self._fence_due = None
        self._release_due = None  # the new grant's fence replaces every reservation
        if displaced is not None and displaced is not channel:
            displaced.revoked(
                ErrorCode.PRODUCER_FENCED,
                f"producer {name!r} took {self.topic} over at epoch {epoch}: "
                "this producer is closed for good",
            )
        try:
            try:
                while True:
                    in_force = await fence_topic(
                        self._informers,
                        self._fencer,
                        self._clock,
                        self._namespace,
                        self._name,
                        epoch,
                        self._check_fence,
                        self._fence_timeout,
                        holder=name,
                        if_free=claim,
                    )
                    if in_force <= epoch:
                        break
                    log.warning(
                        "a segment of %s is at producer epoch %d, ahead of the topic's %d: "
                        "raising the topic past it",
                        self.topic,
                        in_force,
                        epoch,
                    )
                    epoch = in_force + 1
                    await self._put(ProducerHold(epoch, name, mode, claim))
            except SegmentsBusy:
                await self._undo_claim()
                raise
            if claim:
                await self._confirm(name, epoch)
        except Deposed as deposed:
            raise GrantRefused(ErrorCode.NOT_LEADER, str(deposed)) from None
        except (_TopicGone, NotFound) as gone:
            raise GrantRefused(
                ErrorCode.TOPIC_NOT_FOUND, f"topic {self.topic} is gone: {gone}"
            ) from None
        except (FenceFailed, StoreError, ValueError) as error:
            await self._abandon(name, error)
            raise GrantRefused(
                ErrorCode.SERVICE_NOT_READY, f"the grant of {self.topic} was abandoned: {error}"
            ) from None
        self._holder_channel = channel
        channel.granted(epoch)
        log.info(
            "exclusive producer %s holds %s at epoch %d (%s)", name, self.topic, epoch, mode.value
        )

    async def _confirm(self, name: str, epoch: int) -> None:
        """Every segment is reserved for the claimant: the claim stands."""

        def confirmed(current: ProducerHold) -> ProducerHold | None:
            if (current.holder, current.epoch) != (name, epoch):
                raise ValueError(f"the claim of {name!r} at epoch {epoch} was overwritten")
            return current.confirmed() if current.claiming else None

        await self._update(confirmed)

    async def _undo_claim(self) -> None:
        """A claim some segment refused: clear the holder (the epoch stays; the keeper writes
        it if the store does not answer now) and let the keeper release the segments it
        reserved, off the request: a broker that does not answer must not delay the answer."""
        self._clear_due = True
        self._wake.set()
        with contextlib.suppress(StoreError, ValueError, _TopicGone):
            await self._clear()

    async def _abandon(self, name: str, why: BaseException) -> None:
        """A grant that could not be completed: its holder is cleared (the epoch stays)."""
        log.warning("the grant of %s to %s failed: %s", self.topic, name, why)
        self._clear_due = True
        self._wake.set()
        with contextlib.suppress(StoreError, ValueError, _TopicGone, Deposed):
            await self._clear()

    async def _clear(self) -> None:
        """Persist that nobody holds the topic (if the stored holder is still ours)."""
        expected = self._hold

        def released(current: ProducerHold) -> ProducerHold | None:
            if (current.holder, current.epoch) != (expected.holder, expected.epoch):
                return None  # taken over meanwhile: nothing of ours to clear
            return current.released()

        await self._update(released)
        self._clear_due = False
        if expected.holder is not None and self._hold.holder is None:
            self._release_due = expected.epoch
            self._wake.set()
            if not expected.claiming:
                self._next_in_line()  # a holder left: the line is served now

    def _effective(self, stored: ProducerHold) -> ProducerHold:
        """The stored hold, with a release that is not written yet taken into account."""
        if self._clear_due and (stored.holder, stored.epoch) == (
            self._hold.holder,
            self._hold.epoch,
        ):
            return stored.released()
        return stored

    # -- the store ------------------------------------------------------------------------------

    async def _read(self) -> ScalableTopic:
        raw = self._informers.topics.get(self._namespace, self._name)
        if raw is None:
            raise _TopicGone(f"topic {self.topic} was deleted")
        topic = ScalableTopic.model_validate(raw)
        if topic.metadata.deletion_timestamp is not None:
            raise _TopicGone(f"topic {self.topic} is being deleted")
        self._check_fence(topic)
        return topic

    async def _read_for_request(self) -> ScalableTopic:
        try:
            return await self._read()
        except _TopicGone as gone:
            raise GrantRefused(ErrorCode.TOPIC_NOT_FOUND, str(gone)) from None
        except Deposed as deposed:
            raise GrantRefused(ErrorCode.NOT_LEADER, str(deposed)) from None
        except (StoreError, ValueError) as error:
            raise GrantRefused(
                ErrorCode.SERVICE_NOT_READY, f"the controller cannot read {self.topic}: {error}"
            ) from None

    async def _write_for_request(self, topic: ScalableTopic, hold: ProducerHold) -> None:
        try:
            await self._write(topic, hold)
        except Conflict:
            raise
        except (StoreError, ValueError) as error:
            raise GrantRefused(
                ErrorCode.SERVICE_NOT_READY, f"the controller cannot record it now: {error}"
            ) from None

    async def _write(self, topic: ScalableTopic, hold: ProducerHold) -> None:
        """A compare-and-swap of ``status.producer`` on the version read, with this term."""
        status = hold.to_status(self._term)
        producer: dict[str, Any] = {
            "epoch": status.epoch,
            "holder": status.holder,  # None deletes the field (merge patch)
            "accessMode": status.access_mode.value if status.access_mode else None,
            "term": status.term,
            "claiming": True if status.claiming else None,
        }
        await self._store.patch_status(
            ScalableTopic.KIND,
            self._namespace,
            self._name,
            {"status": {"producer": producer}},
            resource_version=topic.metadata.resource_version,
        )
        self._hold = hold

    async def _put(self, hold: ProducerHold) -> None:
        """Write ``hold``, reading again on a conflict (only leaders write it: the term
        check on each read stops a deposed one)."""
        await self._update(lambda _current: hold)

    async def _update(self, change: Callable[[ProducerHold], ProducerHold | None]) -> None:
        """Read, apply ``change`` (current hold -> wanted, None for nothing to do), write;
        again on a conflict."""
        while True:
            topic = await self._read()
            wanted = change(ProducerHold.from_status(topic.status.producer))
            if wanted is None:
                return
            try:
                await self._write(topic, wanted)
                return
            except Conflict:
                await self._newer_than(topic)

    async def _newer_than(self, topic: ScalableTopic) -> None:
        """After a Conflict: wait until the cache holds the version that caused it."""
        await self._informers.topics.wait_changed(
            self._namespace, self._name, topic.metadata.resource_version or ""
        )

    def _check_fence(self, topic: ScalableTopic) -> None:
        stored = topic.status.producer.term if topic.status.producer else 0
        check_term(max(newest_term(topic), stored), self._term, self.topic, self._shut)

    def _refuse_if_closed(self) -> None:
        if self._closed is not None:
            raise GrantRefused(*self._closed)

    def _shut(self, code: ErrorCode, message: str) -> None:
        """Stop serving: the holder's and every waiter's channel hears ``code``; later
        requests are refused with it."""
        if self._closed is None:
            self._closed = (code, message)
        channels = [w.channel for w in self._waiters]
        if self._holder_channel is not None:
            channels.append(self._holder_channel)
        self._waiters.clear()
        self._holder_channel = None
        for channel in channels:
            channel.revoked(code, message)
        self._ready.set()


class _TopicGone(Exception):
    pass


class ProducerGrantCoordinators(LedTopics[TopicProducerGrants]):
    """The exclusive producers of the topics this controller leads, for the endpoint to find."""

    def __init__(
        self,
        store: Store,
        informers: Informers,
        fencer: SegmentFencer,
        clock: Clock,
        grace_period: float = DEFAULT_GRACE_PERIOD,
    ) -> None:
        if not grace_period > 0:
            raise ValueError(f"the producer grace period must be positive, not {grace_period}s")

        def make(namespace: str, name: str, term: int) -> TopicProducerGrants:
            return TopicProducerGrants(
                store, informers, fencer, namespace, name, term, clock, grace_period
            )

        super().__init__(make, "exclusive producer")
