"""This replica's share of the ownership shards (model/ownership.py says why shards).

Each replica renews a member Lease, so that every replica can count the live ones, and runs
one elector per shard. An elector takes its shard only while this replica holds fewer than
its fair share (shards / live members, rounded up); a replica above its share (another one
joined) hands shards over: it stops leading them, which releases their Leases, and the replica
below its share takes them. When a replica dies, its member and shard Leases stop being
renewed; once they expire the survivors' shares grow and they take its shards.

A shard's term is its Lease's transition count. Taking a shard over writes at least one more
than the newest term stored on any of its topics, so that after the shard count changed (and
topics moved between shards) a new leader still out-ranks every earlier writer.

Every Lease read comes from the process's Lease informer: campaigning costs no request until a
Lease looks free, and renewing costs one write per held shard and one for the member Lease
each renew interval (half the renew deadline: leader.py says why not every retry period).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine
from typing import Any

from ..model.clock import Clock
from ..model.ownership import (
    SHARD_COUNT_ANNOTATION,
    fair_share,
    holder,
    is_member_lease,
    member_lease_name,
    shard_lease_name,
    shard_of,
    shard_of_lease,
    stored_term,
)
from ..model.resources import CONTROLLER_ENDPOINT_ANNOTATION
from ..store import LeaseLock, Store, StoreError
from ..store.informer import Change
from ..store.informers import Informers
from ..tasks import TaskOwner
from .leader import ElectionTiming, LeaderElector

log = logging.getLogger(__name__)

LeadShard = Callable[[int, int, asyncio.Event], Coroutine[Any, Any, None]]


def shard_index(count: int) -> str:
    """The name of the topic informer's index by shard, for a shard count."""
    return f"shard-of-{count}"


class ShardOwnership:
    """Campaigns for this replica's share of ``count`` shards and runs ``lead(shard, term,
    handover)`` for each one it holds: that coroutine returns once ``handover`` is set (the
    shard goes to another replica) and is cancelled when the Lease is lost."""

    def __init__(
        self,
        store: Store,
        informers: Informers,
        identity: str,
        endpoint: str | None,
        count: int,
        timing: ElectionTiming,
        clock: Clock,
        lead: LeadShard,
    ) -> None:
        self._store = store
        self._informers = informers
        self._identity = identity
        self._count = count
        self._timing = timing
        self._clock = clock
        self._lead = lead
        self._namespace = informers.system_namespace
        self._annotations = {SHARD_COUNT_ANNOTATION: str(count)}
        if endpoint:
            self._annotations[CONTROLLER_ENDPOINT_ANNOTATION] = endpoint
        self._held: dict[int, asyncio.Event] = {}  # shard -> its handover signal
        # When each Lease of the namespace last changed, on this replica's monotonic clock.
        self._seen_change: dict[str, float] = {}
        self._mismatch_logged = False
        self._tasks = TaskOwner("shard ownership", log)
        informers.topics.add_index(
            shard_index(count),
            lambda obj: [shard_of(obj["metadata"]["namespace"], obj["metadata"]["name"], count)],
        )

    @property
    def held(self) -> frozenset[int]:
        return frozenset(self._held)

    @property
    def count(self) -> int:
        return self._count

    async def run(self) -> None:
        """Campaign until cancelled; cancelling stops leading every shard and releases."""
        leases = self._informers.leases
        unsubscribe = leases.subscribe(self._lease_changed)
        try:
            await leases.wait_synced()
            now = self._clock.monotonic()
            for lease in leases.list():
                self._seen_change.setdefault(lease["metadata"]["name"], now)
            self._tasks.spawn(self._stay_member(), "controller member lease")
            for shard in range(self._count):
                self._tasks.spawn(self._campaign(shard), f"shard {shard} campaign")
            await self._balance()
        finally:
            unsubscribe()
            await self._tasks.close()

    # -- membership -----------------------------------------------------------------------------

    def live_members(self) -> int:
        """Replicas renewing a member Lease with this replica's shard count (this one
        included): one configured with another count takes no shard, so it has no share."""
        now = self._clock.monotonic()
        members = {self._identity}
        for lease in self._informers.leases.list():
            name = lease["metadata"]["name"]
            who = holder(lease)
            if who is None or not is_member_lease(name):
                continue
            announced = (lease["metadata"].get("annotations") or {}).get(SHARD_COUNT_ANNOTATION)
            if announced != str(self._count):
                continue
            duration = int((lease.get("spec") or {}).get("leaseDurationSeconds") or 0)
            if now - self._seen_change.get(name, now) < duration:
                members.add(who)
        return len(members)

    def share(self) -> int:
        return fair_share(self._count, self.live_members())

    async def _stay_member(self) -> None:
        """Renew the member Lease as often as a shard Lease; a failed attempt again after a
        retry period, so that a short outage does not make the others count one fewer."""
        name = member_lease_name(self._identity)
        lock = self._lock(name)
        while True:
            renewed = False
            try:
                renewed = await lock.try_acquire_or_renew()
            except StoreError as error:
                log.warning("renewing member lease %s failed: %s", name, error)
            timing = self._timing
            await asyncio.sleep(timing.renew_interval if renewed else timing.retry_period)

    def _lease_changed(self, change: Change) -> None:
        self._seen_change[change.key[1]] = self._clock.monotonic()

    # -- shards ---------------------------------------------------------------------------------

    def _lock(self, name: str) -> LeaseLock:
        leases = self._informers.leases
        return LeaseLock(
            self._store,
            self._namespace,
            name,
            self._identity,
            max(1, round(self._timing.lease_duration)),
            self._clock,
            self._annotations,
            read=lambda: leases.get(self._namespace, name),
            term_floor=lambda: self._term_floor(name),
        )

    def _term_floor(self, lease_name: str) -> int:
        shard = shard_of_lease(lease_name)
        if shard is None:
            return 0
        topics = self._informers.topics.by_index(shard_index(self._count), shard)
        return 1 + max((stored_term(topic) for topic in topics), default=-1)

    def _may_acquire(self) -> bool:
        return len(self._held) < self.share() and self._counts_agree()

    def _counts_agree(self) -> bool:
        """Two settings of the shard count would map a topic to two shards, and two leaders:
        a replica that sees a live shard Lease of another count takes no shard."""
        for lease in self._informers.leases.list():
            if shard_of_lease(lease["metadata"]["name"]) is None or holder(lease) is None:
                continue
            announced = (lease["metadata"].get("annotations") or {}).get(SHARD_COUNT_ANNOTATION)
            if announced is not None and announced != str(self._count):
                if not self._mismatch_logged:
                    self._mismatch_logged = True
                    log.error(
                        "shard Lease %s was written with %s shards, this controller has %d: "
                        "every replica must use the same --shards; not taking any shard",
                        lease["metadata"]["name"],
                        announced,
                        self._count,
                    )
                return False
        return True

    async def _campaign(self, shard: int) -> None:
        lock = self._lock(shard_lease_name(shard))

        async def lead(term: int) -> None:
            handover = self._held[shard] = asyncio.Event()
            try:
                await self._lead(shard, term, handover)
            finally:
                if self._held.get(shard) is handover:
                    del self._held[shard]

        elector = LeaderElector(
            lock, self._timing, self._clock, lead, may_acquire=self._may_acquire
        )
        while True:
            try:
                await elector.run()  # returns when the shard is lost or handed over
            except Exception:
                log.exception("leading shard %d failed; campaigning again", shard)
                await asyncio.sleep(self._timing.retry_period)

    async def _balance(self) -> None:
        """Hand over every shard above this replica's share each retry period (another replica
        joined): the highest-numbered ones, so that replicas agree which ones move. All at
        once, not one per period: with one, a replica that started first kept a new one
        waiting for half the shards for shards/2 retry periods (16 s with the defaults), and
        every topic of a shard still queued for handover waited with it."""
        while True:
            await asyncio.sleep(self._timing.retry_period)
            leading = sorted(s for s, signal in self._held.items() if not signal.is_set())
            surplus = len(leading) - self.share()
            if surplus > 0:
                moving = leading[-surplus:]
                log.info(
                    "%s holds %d shards, its share is %d: handing shards %s over",
                    self._identity,
                    len(leading),
                    self.share(),
                    ", ".join(map(str, moving)),
                )
                for shard in moving:
                    self._held[shard].set()
