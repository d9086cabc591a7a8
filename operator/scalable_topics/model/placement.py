"""Where a new segment goes: the live broker with the least load.

Brokers register with a heartbeat Lease whose annotations carry their URL and load. A broker
is live while its lease is held and its last renewal is younger than the lease duration. This
compares the broker's renewTime with the controller's wall clock, so clock skew between them
shifts liveness by the skew; placement tolerates that (a broker wrongly thought dead only gets
no new segments for a while). A segment never moves: its log is on its broker's disk.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from .resources import GROUP

BROKER_URL_ANNOTATION = f"{GROUP}/broker-url"
BROKER_SEGMENTS_ANNOTATION = f"{GROUP}/segments"
BROKER_MSG_RATE_ANNOTATION = f"{GROUP}/msg-rate-in"
BROKER_CAPACITY_ANNOTATION = f"{GROUP}/segment-capacity"
BROKER_LEASE_PREFIX = "broker-"


class NoLiveBroker(Exception):
    def __init__(self, known: int) -> None:
        super().__init__(
            f"no live broker to place a segment on ({known} registered, none renewed its lease in time); "
            "start a broker or check that brokers reach the store"
        )


class NoBrokerCapacity(NoLiveBroker):
    def __init__(self, live: int) -> None:
        Exception.__init__(
            self,
            f"every live broker ({live}) hosts as many segments as it can; start a broker, or "
            "give brokers more open files (--max-open-files)",
        )


@dataclass(frozen=True, slots=True)
class BrokerInfo:
    identity: str
    url: str
    segments: int
    msg_rate_in: float
    renewed_at: datetime | None
    lease_seconds: int
    capacity: int | None = None  # segments it can host; None: it does not say

    def has_room(self, planned: int = 0) -> bool:
        return self.capacity is None or self.segments + planned < self.capacity

    def is_live(self, now: datetime) -> bool:
        return (
            bool(self.identity)
            and self.renewed_at is not None
            and now - self.renewed_at < timedelta(seconds=self.lease_seconds)
        )


def choose_broker(
    brokers: list[BrokerInfo], now: datetime, planned: dict[str, int] | None = None
) -> BrokerInfo:
    """The live broker with room hosting the fewest segments (counting ``planned`` placements
    not yet reported), then the lowest message rate, then the name, so the choice is
    deterministic."""
    extra = planned or {}
    live = [b for b in brokers if b.is_live(now)]
    if not live:
        raise NoLiveBroker(len(brokers))
    roomy = [b for b in live if b.has_room(extra.get(b.identity, 0))]
    if not roomy:
        raise NoBrokerCapacity(len(live))
    return min(
        roomy, key=lambda b: (b.segments + extra.get(b.identity, 0), b.msg_rate_in, b.identity)
    )


def live_urls(brokers: list[BrokerInfo], now: datetime) -> frozenset[str]:
    """The URLs of the live brokers. A segment's placement names its broker by URL; a URL
    that no live broker's lease carries (expired, released, or never registered) is a broker
    that is gone, for as long as it stays so."""
    return frozenset(b.url for b in brokers if b.is_live(now))


def broker_lease_name(identity: str) -> str:
    """A Lease name (a DNS subdomain) for a broker identity such as ``10.0.0.7:6650``."""
    cleaned = "".join(c if c.isalnum() else "-" for c in identity.lower()).strip("-")
    return (BROKER_LEASE_PREFIX + cleaned)[:253].rstrip("-")
