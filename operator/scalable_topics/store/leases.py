"""Leader election on Kubernetes Leases, with client-go's ``tryAcquireOrRenew`` rules.

Built on the store port alone, so it works on every adapter. A lease held by someone else
counts as expired only once this lock's *monotonic* clock says the holder's
``leaseDurationSeconds`` have passed since the lock last saw the record change: the holder's
renewTime is never compared with the local wall clock, so clock skew between machines cannot
steal a lease. Every write is a compare-and-swap on the resourceVersion that was read.

Given ``read`` (an informer's cache of the Lease), a lock reads from it instead of asking the
store: a campaign then costs nothing until the lease looks free, and a renewal one write. A
stale read only costs a refused write (Conflict), after which the cache catches up; a
release, which is not tried again later, reads the store itself after a Conflict.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from types import MappingProxyType
from typing import Any

from ..model.clock import Clock
from ..model.timefmt import format_time, parse_time
from .errors import AlreadyExists, Conflict, NotFound
from .kinds import LEASE
from .port import Object, Store

_EMPTY: Mapping[str, str] = MappingProxyType({})
_RELEASED_DURATION_SECONDS = 1  # what client-go writes on release
# A release refused this often, each time on a fresh read of the store, is left to expire.
RELEASE_ATTEMPTS = 3


@dataclass(frozen=True, slots=True)
class LeaseRecord:
    """A lease's spec as last observed, with the object's annotations."""

    holder_identity: str
    lease_duration_seconds: int
    acquire_time: datetime | None
    renew_time: datetime | None
    lease_transitions: int
    annotations: Mapping[str, str] = field(default_factory=lambda: _EMPTY)

    @classmethod
    def from_object(cls, lease: Object) -> LeaseRecord:
        spec: dict[str, Any] = lease.get("spec") or {}
        annotations = lease.get("metadata", {}).get("annotations") or {}
        return cls(
            holder_identity=str(spec.get("holderIdentity") or ""),
            lease_duration_seconds=int(spec.get("leaseDurationSeconds") or 0),
            acquire_time=_time(spec.get("acquireTime")),
            renew_time=_time(spec.get("renewTime")),
            lease_transitions=int(spec.get("leaseTransitions") or 0),
            annotations=MappingProxyType(dict(annotations)),
        )

    def to_spec(self) -> dict[str, Any]:
        spec: dict[str, Any] = {
            "holderIdentity": self.holder_identity,
            "leaseDurationSeconds": self.lease_duration_seconds,
            "leaseTransitions": self.lease_transitions,
        }
        if self.acquire_time is not None:
            spec["acquireTime"] = format_time(self.acquire_time)
        if self.renew_time is not None:
            spec["renewTime"] = format_time(self.renew_time)
        return spec


def _time(value: Any) -> datetime | None:
    return parse_time(value) if isinstance(value, str) and value else None


class LeaseLock:
    """One candidate's view of one Lease: acquire, renew and release it."""

    def __init__(
        self,
        store: Store,
        namespace: str,
        name: str,
        identity: str,
        duration_seconds: int,
        clock: Clock,
        annotations: Mapping[str, str] | None = None,
        *,
        read: Callable[[], Object | None] | None = None,
        term_floor: Callable[[], int] | None = None,
    ) -> None:
        """``read`` returns the Lease as cached (None: there is none); without it every
        attempt reads the store. ``term_floor`` is the least transition count an acquisition
        may write (a taken-over lease counts at least one more than before)."""
        if not identity:
            raise ValueError("a lease candidate needs a non-empty identity")
        if duration_seconds < 1:
            raise ValueError(f"lease duration must be at least 1 s, not {duration_seconds}")
        self._store = store
        self._namespace, self._name = namespace, name
        self._identity = identity
        self._duration_seconds = duration_seconds
        self._clock = clock
        self._annotations = dict(annotations or {})
        self._read_cached = read
        self._term_floor = term_floor or (lambda: 0)
        self._observed: LeaseRecord | None = None
        self._observed_at = 0.0  # monotonic time the observed record last changed

    @property
    def identity(self) -> str:
        return self._identity

    @property
    def record(self) -> LeaseRecord | None:
        """The lease as this lock last read or wrote it; None before the first attempt."""
        return self._observed

    def annotate(self, annotations: Mapping[str, str]) -> None:
        """Annotations to write with the next acquire or renew (e.g. a holder's current load)."""
        self._annotations.update(annotations)

    @property
    def is_leader(self) -> bool:
        """Whether the last observed record names this candidate (it may have expired since)."""
        return self._observed is not None and self._observed.holder_identity == self._identity

    async def _read(self) -> Object | None:
        if self._read_cached is not None:
            return self._read_cached()
        return await self._read_store()

    async def _read_store(self) -> Object | None:
        try:
            return await self._store.get(LEASE.kind, self._namespace, self._name)
        except NotFound:
            return None

    async def try_acquire_or_renew(self) -> bool:
        now = self._clock.now()
        lease = await self._read()
        if lease is None:
            return await self._create(now)
        current = LeaseRecord.from_object(lease)
        self._observe(current)
        if current.holder_identity and not self.is_leader and not self._expired(current):
            return False
        if self.is_leader:  # renewal: the term goes on
            acquire_time, transitions = current.acquire_time, current.lease_transitions
        else:
            acquire_time = now
            transitions = max(current.lease_transitions + 1, self._term_floor())
        wanted = LeaseRecord(
            holder_identity=self._identity,
            lease_duration_seconds=self._duration_seconds,
            acquire_time=acquire_time,
            renew_time=now,
            lease_transitions=transitions,
            annotations=MappingProxyType({**current.annotations, **self._annotations}),
        )
        return await self._write(lease, wanted)

    async def observe(self) -> None:
        """Read the lease and note whether it changed, without trying to take it: a candidate
        that may not campaign now keeps its expiry clock running, so it can take the lease
        as soon as it may (from a cache, this costs no request)."""
        lease = await self._read()
        if lease is not None:
            self._observe(LeaseRecord.from_object(lease))

    async def release(self) -> bool:
        """Give the lease up if this candidate holds it; True when it no longer does.

        The cache may lag this candidate's own last renewal: one whose answer was lost (a
        renewal cancelled mid-request at shutdown) or one the watch has not brought back yet
        (after an outage). A Conflict is then no sign of a lost lease, so the release reads
        the store and tries again: a lease left held keeps everyone out for a whole term."""
        read = self._read
        for _ in range(RELEASE_ATTEMPTS):
            if not self.is_leader:
                return True
            if await self._release_once(await read()):
                return True
            read = self._read_store
        return False

    async def _release_once(self, lease: Object | None) -> bool:
        if lease is None:
            self._observed = None
            return True
        current = LeaseRecord.from_object(lease)
        self._observe(current)
        if not self.is_leader:
            return True
        now = self._clock.now()
        released = LeaseRecord(
            holder_identity="",
            lease_duration_seconds=_RELEASED_DURATION_SECONDS,
            acquire_time=now,
            renew_time=now,
            lease_transitions=current.lease_transitions,
            # The annotations this candidate wrote describe the holder, which is now nobody.
            annotations=MappingProxyType(
                {k: v for k, v in current.annotations.items() if k not in self._annotations}
            ),
        )
        return await self._write(lease, released)

    def _expired(self, observed: LeaseRecord) -> bool:
        """client-go's rule: a full term has passed here since the record last changed."""
        return self._clock.monotonic() >= self._observed_at + observed.lease_duration_seconds

    def _observe(self, record: LeaseRecord) -> None:
        if record != self._observed:
            self._observed = record
            self._observed_at = self._clock.monotonic()

    async def _create(self, now: datetime) -> bool:
        record = LeaseRecord(
            holder_identity=self._identity,
            lease_duration_seconds=self._duration_seconds,
            acquire_time=now,
            renew_time=now,
            lease_transitions=self._term_floor(),
            annotations=MappingProxyType(dict(self._annotations)),
        )
        metadata: dict[str, Any] = {"name": self._name, "namespace": self._namespace}
        if self._annotations:
            metadata["annotations"] = dict(self._annotations)
        lease = {
            "apiVersion": LEASE.api_version,
            "kind": LEASE.kind,
            "metadata": metadata,
            "spec": record.to_spec(),
        }
        try:
            await self._store.create(lease)
        except AlreadyExists:
            return False
        self._observed, self._observed_at = record, self._clock.monotonic()
        return True

    async def _write(self, lease: Object, record: LeaseRecord) -> bool:
        metadata = dict(lease["metadata"])
        metadata["annotations"] = dict(record.annotations)
        if not record.annotations:
            del metadata["annotations"]
        updated = {**lease, "metadata": metadata, "spec": record.to_spec()}
        try:
            written = await self._store.replace(updated)
        except (Conflict, NotFound):
            return False
        self._observed = LeaseRecord.from_object(written)
        self._observed_at = self._clock.monotonic()
        return True
