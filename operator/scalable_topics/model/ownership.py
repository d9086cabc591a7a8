"""Which controller leads a topic: topics hash onto a fixed number of ownership shards, and the
holder of a shard's Lease leads every topic in it. Pure: names, hashing and arithmetic.

One Lease per topic would cost one renewal per topic every few seconds, thousands of writes a
second at 10,000 topics, far more than an API server lets one client make. A fixed number of
shards (like Pulsar's namespace bundles) bounds that by the shard count, whatever the number of
topics, while leadership stays per topic: exactly one controller acts for a topic at a time,
and the shard Lease's transition count is the *term* that fences its writes.

The Leases live in the system namespace, named ``scalabletopics-shard-<n>`` and annotated with
the shard count and the holder's endpoint, so that brokers find a topic's leader with no
configuration of their own. Each controller replica also renews a member Lease
(``scalabletopics-controller-<identity>``) so that replicas know how many share the shards.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any

import mmh3

from .resources import CONTROLLER_ENDPOINT_ANNOTATION, GROUP

DEFAULT_SHARD_COUNT = 16
MAX_SHARD_COUNT = 1024
SHARD_LEASE_PREFIX = "scalabletopics-shard-"
MEMBER_LEASE_PREFIX = "scalabletopics-controller-"
SHARD_COUNT_ANNOTATION = f"{GROUP}/shard-count"

Lease = Mapping[str, Any]


def validate_shard_count(count: int) -> int:
    if not 1 <= count <= MAX_SHARD_COUNT:
        raise ValueError(f"the shard count must be between 1 and {MAX_SHARD_COUNT}, not {count}")
    return count


def shard_of(namespace: str, name: str, count: int) -> int:
    """The shard a topic belongs to: a stable hash of ``namespace/name``, so every replica and
    broker computes the same one."""
    return mmh3.hash(f"{namespace}/{name}", signed=False) % count


def shard_lease_name(shard: int) -> str:
    return f"{SHARD_LEASE_PREFIX}{shard}"


def shard_of_lease(lease_name: str) -> int | None:
    """The shard a Lease elects a leader for; None for any other Lease."""
    suffix = lease_name.removeprefix(SHARD_LEASE_PREFIX)
    if suffix == lease_name or not suffix.isdecimal():
        return None
    return int(suffix)


def member_lease_name(identity: str) -> str:
    cleaned = "".join(c if c.isalnum() or c in "-." else "-" for c in identity.lower())
    return (MEMBER_LEASE_PREFIX + cleaned)[:253].rstrip("-.")


def is_member_lease(lease_name: str) -> bool:
    return lease_name.startswith(MEMBER_LEASE_PREFIX)


def fair_share(shards: int, members: int) -> int:
    """How many shards one of ``members`` replicas may hold: the rest go to the others."""
    return math.ceil(shards / max(1, members))


def holder(lease: Lease | None) -> str | None:
    """Who holds a Lease; None when nobody does (released, or never taken)."""
    if lease is None:
        return None
    identity = (lease.get("spec") or {}).get("holderIdentity")
    return identity if isinstance(identity, str) and identity else None


def lease_endpoint(lease: Lease | None) -> str | None:
    """The endpoint a held shard Lease announces; None when nobody holds it."""
    if holder(lease) is None:
        return None
    assert lease is not None
    annotations = (lease.get("metadata") or {}).get("annotations") or {}
    endpoint = annotations.get(CONTROLLER_ENDPOINT_ANNOTATION)
    return endpoint if isinstance(endpoint, str) and endpoint else None


def announced_shard_count(leases: Iterable[Lease]) -> int | None:
    """The shard count the shard Leases announce (the controllers' setting); None before any
    controller ran. Should they disagree (replicas configured differently), the count of the
    most recently renewed Lease wins here, and the controllers refuse to campaign."""
    newest: tuple[str, int] | None = None
    for lease in leases:
        metadata = lease.get("metadata") or {}
        if shard_of_lease(str(metadata.get("name", ""))) is None:
            continue
        value = (metadata.get("annotations") or {}).get(SHARD_COUNT_ANNOTATION)
        if not isinstance(value, str) or not value.isdecimal():
            continue
        renewed = str((lease.get("spec") or {}).get("renewTime") or "")
        if newest is None or renewed > newest[0]:
            newest = (renewed, int(value))
    return None if newest is None else newest[1]


def stored_term(topic: Mapping[str, Any]) -> int:
    """The newest term a ScalableTopic's status was written by (its leader, consumer
    registrations, the exclusive producer): a new leader of its shard must lead with a
    higher one, or its predecessors' writes would look newer than its own."""
    status = topic.get("status") or {}
    terms = [_term(status.get("controller")), _term(status.get("producer"))]
    for entry in status.get("subscriptions") or ():
        if isinstance(entry, Mapping):
            terms.extend(_term(consumer) for consumer in entry.get("consumers") or ())
    return max(terms)


def _term(written: Any) -> int:
    term = written.get("term") if isinstance(written, Mapping) else None
    return term if isinstance(term, int) and term >= 0 else 0
