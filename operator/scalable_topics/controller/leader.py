"""Per-topic leader election on a store Lease, with client-go's timing rules.

A candidate campaigns every ``retry_period`` (with jitter) until it holds the lease, then
renews it every ``renew_interval``: half the ``renew_deadline``, where client-go renews every
``retry_period`` (a failed renewal is retried every quarter retry period). A leader that has
not renewed for ``renew_deadline`` stops acting: it cancels its leader work and gives up.
Because ``renew_deadline`` is shorter than ``lease_duration``, and another candidate takes the
lease only after seeing it unrenewed for a whole ``lease_duration`` on its own clock, the old
leader has stopped before anyone else starts. The lease's transition count at the time of
acquiring is the leader's *term*.

Why renew less often than client-go: a takeover waits a whole ``lease_duration`` after the
last renewal it saw, however often the holder renews, so renewing more often than needed buys
no faster failover (a dead holder's last renewal is at most ``renew_interval`` old when it
dies, so a standby takes over between ``lease_duration - renew_interval`` and
``lease_duration`` after the death, plus one campaign period); it only costs writes, and every
watcher of the Leases wakes for each. Renewing twice per ``renew_deadline`` keeps a healthy
holder's lease from ever lapsing and leaves half the deadline to retry a failed renewal.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import Any

from ..model.clock import Clock
from ..store import LeaseLock, StoreError

log = logging.getLogger(__name__)

JITTER_FACTOR = 1.2  # client-go's wait.JitterUntil factor for the retry period


@dataclass(frozen=True, slots=True)
class ElectionTiming:
    lease_duration: float = 15.0
    renew_deadline: float = 10.0
    retry_period: float = 2.0

    @property
    def renew_interval(self) -> float:
        """How long a holder waits after a renewal before the next one (module docstring)."""
        return max(self.retry_period, self.renew_deadline / 2)

    def __post_init__(self) -> None:
        if not self.lease_duration > self.renew_deadline:
            raise ValueError(
                f"lease_duration ({self.lease_duration}s) must exceed renew_deadline ({self.renew_deadline}s): "
                "a leader must stop acting before its lease can expire elsewhere"
            )
        if not self.renew_deadline > JITTER_FACTOR * self.retry_period:
            raise ValueError(
                f"renew_deadline ({self.renew_deadline}s) must exceed {JITTER_FACTOR} x retry_period "
                f"({self.retry_period}s), or a single slow retry loses the lease"
            )
        if self.retry_period <= 0:
            raise ValueError(f"retry_period must be positive, not {self.retry_period}")


LeaderWork = Callable[[int], Coroutine[Any, Any, None]]


class LeaderElector:
    """Campaign for one lease and run ``lead(term)`` while holding it."""

    def __init__(
        self,
        lock: LeaseLock,
        timing: ElectionTiming,
        clock: Clock,
        lead: LeaderWork,
        jitter: Callable[[], float] = random.random,
        may_acquire: Callable[[], bool] = lambda: True,
    ) -> None:
        """``may_acquire`` is asked before each attempt to take the lease (never before a
        renewal): a candidate that holds its share of leases lets the others take the rest."""
        self._lock = lock
        self._timing = timing
        self._clock = clock
        self._lead = lead
        self._jitter = jitter
        self._may_acquire = may_acquire
        self._term: int | None = None

    @property
    def term(self) -> int | None:
        """The term being led, or None while not leading."""
        return self._term

    async def run(self) -> None:
        """Campaign, lead until leadership is lost, then return (the caller may run again).
        Cancelling it while leading stops the leader work and releases the lease; a failure of
        the leader work releases the lease and is raised."""
        await self._campaign()
        record = self._lock.record
        assert record is not None
        self._term = record.lease_transitions
        log.info("%s leads term %d", self._lock.identity, self._term)
        loop = asyncio.get_running_loop()
        work = loop.create_task(self._lead(self._term), name=f"leader term {self._term}")
        renewal = loop.create_task(self._keep_renewing(), name=f"lease renewal term {self._term}")
        lost = False
        try:
            done, _ = await asyncio.wait({work, renewal}, return_when=asyncio.FIRST_COMPLETED)
            lost = renewal in done
            if lost:
                log.warning(
                    "%s stops leading term %d: no renewal within %ss",
                    self._lock.identity,
                    self._term,
                    self._timing.renew_deadline,
                )
        finally:
            try:
                # The leader work's failure is raised below; the renewal's cannot fail.
                for task in (work, renewal):
                    task.cancel()
                await asyncio.wait({work, renewal})
            finally:
                if not lost:
                    await self._release()
                self._term = None
        failure = None if work.cancelled() else work.exception()
        if failure is not None:
            raise failure

    async def _campaign(self) -> None:
        # Polling is the protocol: a lease expires by not being renewed, which nothing announces.
        while True:
            if self._may_acquire():
                if await self._attempt():
                    return
            else:
                await self._observe()  # it may be allowed later: know how long it was unrenewed
            await asyncio.sleep(
                self._timing.retry_period * (1 + (JITTER_FACTOR - 1) * self._jitter())
            )

    async def _observe(self) -> None:
        try:
            await self._lock.observe()
        except StoreError:
            log.debug("lease %s: reading it failed", self._lock.identity, exc_info=True)

    async def _keep_renewing(self) -> None:
        """Return once the lease could not be renewed for ``renew_deadline``."""
        last_renewal = self._clock.monotonic()
        while True:
            await asyncio.sleep(self._timing.renew_interval)
            while not await self._attempt():
                if self._clock.monotonic() - last_renewal >= self._timing.renew_deadline:
                    return
                await asyncio.sleep(self._timing.retry_period / 4)
            last_renewal = self._clock.monotonic()

    async def _attempt(self) -> bool:
        try:
            return await self._lock.try_acquire_or_renew()
        except StoreError as error:
            # An expected condition (the API unreachable, a namespace missing) is one line,
            # not a traceback every retry period.
            log.warning("lease %s: the store refused the attempt: %s", self._lock.identity, error)
            return False

    async def _release(self) -> None:
        try:
            released = await self._lock.release()
        except StoreError:
            log.warning(
                "lease %s: releasing failed; it will expire", self._lock.identity, exc_info=True
            )
            return
        if not released:
            log.warning(
                "lease %s: the lease kept changing while it was released; it will expire",
                self._lock.identity,
            )
