"""The shard Leases that say which controller leads a topic, written directly through the
store port, with no controller (see scalable_topics.model.ownership)."""

from __future__ import annotations

from typing import Any

from scalable_topics.model.ownership import (
    SHARD_COUNT_ANNOTATION,
    announced_shard_count,
    shard_lease_name,
    shard_of,
)
from scalable_topics.model.resources import CONTROLLER_ENDPOINT_ANNOTATION
from scalable_topics.store import NotFound, Store
from scalable_topics.store.kinds import LEASE

SYSTEM_NAMESPACE = "scalable-topics"


def lease_object(
    holder: str, endpoint: str | None, transitions: int = 0, shard: int = 0, count: int = 1
) -> dict[str, Any]:
    """A shard Lease; with the default single shard, every topic's leader."""
    annotations = {SHARD_COUNT_ANNOTATION: str(count)}
    if endpoint is not None:
        annotations[CONTROLLER_ENDPOINT_ANNOTATION] = endpoint
    return {
        "apiVersion": LEASE.api_version,
        "kind": LEASE.kind,
        "metadata": {
            "name": shard_lease_name(shard),
            "namespace": SYSTEM_NAMESPACE,
            "annotations": annotations,
        },
        "spec": {
            "holderIdentity": holder,
            "leaseDurationSeconds": 15,
            "leaseTransitions": transitions,
        },
    }


async def topic_lease(store: Store, namespace: str, topic: str) -> dict[str, Any]:
    """The Lease of the shard that leads ``topic``, as the controllers announce them."""
    leases = (await store.list(LEASE.kind, SYSTEM_NAMESPACE)).items
    count = announced_shard_count(leases)
    if count is None:  # no controller has announced its shards yet
        raise NotFound(LEASE.kind, SYSTEM_NAMESPACE, shard_lease_name(0))
    name = shard_lease_name(shard_of(namespace, topic, count))
    return await store.get(LEASE.kind, SYSTEM_NAMESPACE, name)


async def put_lease(store: Store, holder: str, endpoint: str | None, transitions: int = 0) -> None:
    """Create the single shard Lease or overwrite its holder and endpoint."""
    wanted = lease_object(holder, endpoint, transitions)
    try:
        current = await store.get(LEASE.kind, SYSTEM_NAMESPACE, wanted["metadata"]["name"])
    except NotFound:
        await store.create(wanted)
        return
    wanted["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"]
    await store.replace(wanted)
