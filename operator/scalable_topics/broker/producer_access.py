"""Who may produce to one segment: access modes and the producer epoch that fences.

Pure bookkeeping, no I/O. A producer opens in one of four modes (exclusive-producer seed):
Shared (many at once, none while an exclusive one holds the segment), Exclusive (fails at once
when anyone else produces), WaitForExclusive (queues until the segment is free) and
ExclusiveWithFencing (fences everyone else and takes over). Every exclusive takeover raises
the segment's *producer epoch*; a producer whose grant is older than the epoch is fenced for
good: its later sends are refused and never reach the log.

The controller's topic-wide grant (DESIGN guarantee 5) is :meth:`ProducerAccess.fence`: it
raises the epoch on every active segment first, then the new holder opens with that epoch.
The fence also *reserves* the segment for the holder, so that nobody else slips in while the
holder has no producer here (before its first open, or while it reconnects within its grace
period): Shared producers and exclusive ones of other names are refused, unless they come with
a higher epoch (only a newer grant yields one). An ExclusiveWithFencing grant fences
unconditionally; an Exclusive or WaitForExclusive one asks ``if_free``: the segment refuses
with ProducerBusy, changing nothing, while a producer of another name is connected, so no
producer can open between the check and the reservation. :meth:`ProducerAccess.release` clears
the reservation when the grant ends, or when a claim is undone.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Hashable
from dataclasses import dataclass
from enum import StrEnum

from ..model.resources import ProducerAccessMode
from ..protocol.limits import MAX_PRODUCER_EPOCH, MAX_REQUESTED_PRODUCER_EPOCH


class AccessError(Exception):
    """A producer cannot open or send; ``code`` is the wire error code."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


class ProducerBusy(AccessError):
    def __init__(self, message: str) -> None:
        super().__init__("ProducerBusy", message)


class ProducerFenced(AccessError):
    def __init__(self, message: str) -> None:
        super().__init__("ProducerFenced", message)


class Standing(StrEnum):
    GRANTED = "granted"
    WAITING = "waiting"


@dataclass(frozen=True, slots=True)
class Grant:
    """A producer's admission: its handle, name, mode and the epoch it writes under."""

    handle: Hashable
    name: str
    mode: ProducerAccessMode
    epoch: int


@dataclass(frozen=True, slots=True)
class OpenResult:
    standing: Standing
    grant: Grant | None
    fenced: tuple[Grant, ...] = ()  # producers this open fenced (ExclusiveWithFencing)


@dataclass(slots=True)
class _Waiter:
    handle: Hashable
    name: str
    requested_epoch: int | None


class ProducerAccess:
    def __init__(self, epoch: int = 0, reserved_for: str | None = None) -> None:
        self._epoch = epoch
        self._reserved_for = reserved_for  # the topic-wide holder, at ``epoch``
        self._shared: dict[Hashable, Grant] = {}
        self._exclusive: Grant | None = None
        self._waiting: deque[_Waiter] = deque()

    @property
    def epoch(self) -> int:
        """The segment's producer epoch; the caller persists it whenever it changes."""
        return self._epoch

    @property
    def reserved_for(self) -> str | None:
        """The topic-wide holder this segment is kept for; persisted along with the epoch."""
        return self._reserved_for

    @property
    def producers(self) -> tuple[Grant, ...]:
        holder = (self._exclusive,) if self._exclusive is not None else ()
        return holder + tuple(self._shared.values())

    @property
    def waiting(self) -> int:
        return len(self._waiting)

    def grant_of(self, handle: Hashable) -> Grant | None:
        if self._exclusive is not None and self._exclusive.handle == handle:
            return self._exclusive
        return self._shared.get(handle)

    def open(
        self,
        handle: Hashable,
        name: str,
        mode: ProducerAccessMode,
        requested_epoch: int | None = None,
    ) -> OpenResult:
        """Admit, queue or refuse a producer. ``requested_epoch`` is the epoch a reconnecting
        exclusive producer held, or the one the controller granted topic-wide."""
        if self.grant_of(handle) is not None or any(w.handle == handle for w in self._waiting):
            raise AccessError("InvalidRequest", f"producer handle {handle!r} is already open")
        if requested_epoch is not None and requested_epoch > MAX_REQUESTED_PRODUCER_EPOCH:
            raise AccessError(
                "InvalidRequest",
                f"producer_epoch {requested_epoch} is above the largest a producer may ask "
                f"for, {MAX_REQUESTED_PRODUCER_EPOCH} (2**62)",
            )
        self._refuse_stale(name, requested_epoch)
        self._refuse_reserved(name, mode, requested_epoch)
        if mode is ProducerAccessMode.SHARED:
            if self._exclusive is not None:
                raise ProducerBusy(self._busy_message(name))
            grant = Grant(handle, name, mode, self._epoch)
            self._shared[handle] = grant
            return OpenResult(Standing.GRANTED, grant)
        if mode is ProducerAccessMode.EXCLUSIVE_WITH_FENCING:
            fenced = self.producers
            self._shared.clear()
            self._exclusive = None
            return OpenResult(
                Standing.GRANTED, self._take_over(handle, name, mode, requested_epoch), fenced
            )
        if self._exclusive is None and not self._shared:
            return OpenResult(
                Standing.GRANTED, self._take_over(handle, name, mode, requested_epoch)
            )
        if mode is ProducerAccessMode.WAIT_FOR_EXCLUSIVE:
            self._waiting.append(_Waiter(handle, name, requested_epoch))
            return OpenResult(Standing.WAITING, None)
        raise ProducerBusy(self._busy_message(name))

    def close(self, handle: Hashable) -> tuple[list[Grant], list[tuple[Hashable, AccessError]]]:
        """Remove a producer (or a waiter). Returns the waiters now granted and those refused."""
        self._waiting = deque(w for w in self._waiting if w.handle != handle)
        if self._exclusive is not None and self._exclusive.handle == handle:
            self._exclusive = None
        self._shared.pop(handle, None)
        return self._promote()

    def fence(self, epoch: int, holder: str | None = None, *, if_free: bool = False) -> list[Grant]:
        """Raise the epoch to at least ``epoch`` and reserve the segment for ``holder`` (None
        clears the reservation); every producer granted under an older epoch, or of another
        name than the holder, is removed and returned, so its session can refuse its sends from
        now on. A fence below the epoch in force leaves the reservation alone: it is stale.
        ``if_free``: raise ProducerBusy instead, changing nothing, while a producer of another
        name than ``holder`` is connected (a fence that is stale changes nothing either)."""
        if not 0 <= epoch <= MAX_PRODUCER_EPOCH:
            raise ValueError(f"epoch {epoch} is outside 0..{MAX_PRODUCER_EPOCH}")
        if if_free and epoch >= self._epoch:
            others = self.others_than(holder)
            if others:
                names = ", ".join(sorted({repr(g.name) for g in others}))
                raise ProducerBusy(
                    f"producer {holder!r} cannot hold the segment exclusively: {names} "
                    f"{'is' if len(others) == 1 else 'are'} connected"
                )
        if epoch >= self._epoch:
            self._reserved_for = holder
        self._epoch = max(self._epoch, epoch)
        fenced = [
            g
            for g in self.producers
            if g.epoch < self._epoch or self._reserved_for not in (None, g.name)
        ]
        for grant in fenced:
            if self._exclusive is grant:
                self._exclusive = None
            self._shared.pop(grant.handle, None)
        return fenced

    def release(self, epoch: int) -> bool:
        """The topic-wide grant at ``epoch`` ended (or its claim was undone): clear the
        reservation if it was made at ``epoch`` or before. Nothing else changes: the epoch is
        not raised, so nobody is fenced (a claim undone because a producer is connected here
        leaves that producer alone). False for a stale release (a newer grant is in force)."""
        if epoch < self._epoch:
            return False
        self._reserved_for = None
        return True

    def others_than(self, name: str | None) -> tuple[Grant, ...]:
        """The connected producers of another name than ``name``."""
        return tuple(g for g in self.producers if g.name != name)

    def check_send(self, handle: Hashable) -> Grant:
        """The producer's grant, if it may still write; raise ProducerFenced otherwise."""
        grant = self.grant_of(handle)
        if grant is None or grant.epoch < self._epoch:
            raise ProducerFenced(
                f"producer {handle!r} no longer holds this segment (segment producer epoch is "
                f"{self._epoch}); it is fenced for good: create a new producer"
            )
        return grant

    def promote_waiters(self) -> tuple[list[Grant], list[tuple[Hashable, AccessError]]]:
        """Grant queued WaitForExclusive producers if the segment became free (after a fence)."""
        return self._promote()

    def _promote(self) -> tuple[list[Grant], list[tuple[Hashable, AccessError]]]:
        granted: list[Grant] = []
        refused: list[tuple[Hashable, AccessError]] = []
        while self._waiting and self._exclusive is None and not self._shared:
            waiter = self._waiting.popleft()
            try:
                self._refuse_stale(waiter.name, waiter.requested_epoch)
                self._refuse_reserved(
                    waiter.name, ProducerAccessMode.WAIT_FOR_EXCLUSIVE, waiter.requested_epoch
                )
            except AccessError as error:
                refused.append((waiter.handle, error))
                continue
            granted.append(
                self._take_over(
                    waiter.handle,
                    waiter.name,
                    ProducerAccessMode.WAIT_FOR_EXCLUSIVE,
                    waiter.requested_epoch,
                )
            )
        return granted, refused

    def _take_over(
        self, handle: Hashable, name: str, mode: ProducerAccessMode, requested_epoch: int | None
    ) -> Grant:
        # The topic's holder keeps the grant's epoch (_refuse_reserved checked it); a producer
        # returning with the current epoch keeps it (it was the last holder); anyone else
        # starts a new epoch.
        if self._reserved_for is None:
            self._epoch = requested_epoch if requested_epoch is not None else self._epoch + 1
        self._exclusive = Grant(handle, name, mode, self._epoch)
        return self._exclusive

    def _refuse_stale(self, name: str, requested_epoch: int | None) -> None:
        if requested_epoch is not None and requested_epoch < self._epoch:
            raise ProducerFenced(
                f"producer {name!r} asks for epoch {requested_epoch}, but the segment is at epoch "
                f"{self._epoch}: another producer took over; create a new producer"
            )

    def _refuse_reserved(
        self, name: str, mode: ProducerAccessMode, requested_epoch: int | None
    ) -> None:
        """While the topic is held, only its holder opens here, and under the grant's epoch:
        only the controller's fence moves a reservation or raises a reserved segment's epoch.
        (An epoch a client sends is a claim, not a grant: were a higher one to displace the
        reservation, the controller's release at the grant's epoch would be stale, and the
        segment would stay reserved for a producer nobody granted, for good.)"""
        holder = self._reserved_for
        if holder is None:
            return
        if mode is ProducerAccessMode.SHARED:
            raise ProducerBusy(
                f"producer {name!r} cannot open: the topic is held exclusively by {holder!r}"
            )
        if name != holder:
            raise ProducerBusy(
                f"producer {name!r} cannot open: the topic is held exclusively by {holder!r} "
                f"at epoch {self._epoch}"
            )
        if requested_epoch is not None and requested_epoch > self._epoch:
            raise AccessError(
                "InvalidRequest",
                f"producer {name!r} asks for epoch {requested_epoch}, but the topic's grant "
                f"is at epoch {self._epoch}: only the topic's controller raises it",
            )

    def _busy_message(self, name: str) -> str:
        holders = ", ".join(repr(g.name) for g in self.producers)
        return f"producer {name!r} cannot open: the segment is held by {holders}"
