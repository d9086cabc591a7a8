"""The informers of one process: one per kind it follows, shared by everything in it.

A controller and a broker in one process (standalone) share one set, so each kind is listed
and watched once per process, however many topics, segments and sessions read it.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable

from ..model.ownership import (
    announced_shard_count,
    lease_endpoint,
    shard_lease_name,
    shard_of,
)
from ..model.resources import ScalableTopic, Segment
from .informer import Informer
from .kinds import CONFIG_MAP, LEASE
from .port import Object, Store
from .write_through import WriteThroughStore

# Segments by the topic they belong to: (namespace, topic).
BY_TOPIC = "topic"
# Segments by (namespace, topic, segment id).
BY_SEGMENT = "segment"


def _segment_topic(obj: Object) -> Iterable[Hashable]:
    return [(obj["metadata"]["namespace"], obj["spec"]["topic"])]


def _segment_id(obj: Object) -> Iterable[Hashable]:
    spec = obj["spec"]
    return [(obj["metadata"]["namespace"], spec["topic"], int(spec["segmentId"]))]


class Informers:
    """ScalableTopics and Segments of every namespace, and the Leases (shard ownership,
    controller members, broker heartbeats) and ConfigMaps (the cluster's settings) of the
    system namespace."""

    def __init__(self, store: Store, system_namespace: str) -> None:
        self.system_namespace = system_namespace
        self.topics = Informer(store, ScalableTopic.KIND)
        self.segments = Informer(store, Segment.KIND)
        self.segments.add_index(BY_TOPIC, _segment_topic)
        self.segments.add_index(BY_SEGMENT, _segment_id)
        self.leases = Informer(store, LEASE.kind, system_namespace)
        self.configmaps = Informer(store, CONFIG_MAP.kind, system_namespace)

    @property
    def all(self) -> tuple[Informer, ...]:
        return self.topics, self.segments, self.leases, self.configmaps

    def start(self) -> None:
        for informer in self.all:
            informer.start()

    async def wait_synced(self) -> None:
        for informer in self.all:
            await informer.wait_synced()

    async def stop(self) -> None:
        for informer in self.all:
            await informer.stop()

    def problems(self) -> list[str]:
        """Why the caches cannot be trusted now (not synced yet, or the store unreachable);
        empty when every informer follows the store."""
        found = []
        for informer in self.all:
            if not informer.synced:
                reason = f": {informer.last_error}" if informer.last_error else ""
                found.append(f"{informer.kind}: not listed yet{reason}")
            elif not informer.following:
                found.append(f"{informer.kind}: not watching: {informer.last_error}")
        return found

    def writing_through(self, store: Store) -> WriteThroughStore:
        """``store``, with its compare-and-swap writes taken into these caches at once."""
        return WriteThroughStore(store, {informer.kind: informer for informer in self.all})

    def segments_of(self, namespace: str, topic: str) -> list[Object]:
        return self.segments.by_index(BY_TOPIC, (namespace, topic))

    # -- who leads a topic (model/ownership.py) --------------------------------------------------

    def shard_count(self) -> int | None:
        """The shard count the controllers announce; None before any controller ran."""
        return announced_shard_count(self.leases.list())

    def shard_lease(self, namespace: str, name: str) -> Object | None:
        """The Lease of the shard a topic belongs to, as last seen."""
        count = self.shard_count()
        if count is None:
            return None
        lease_name = shard_lease_name(shard_of(namespace, name, count))
        return self.leases.get(self.system_namespace, lease_name)

    def leader_endpoint(self, namespace: str, name: str) -> str | None:
        """Where the topic's leader takes requests; None while nobody leads it."""
        return lease_endpoint(self.shard_lease(namespace, name))
