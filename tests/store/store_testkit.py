"""Builders and watch readers shared by the store tests."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

from scalable_topics.model.clock import Clock
from scalable_topics.model.resources import API_VERSION
from scalable_topics.store import DEFAULT_KINDS, KindInfo, Object, Store, Watch, WatchEvent

TOPIC = "ScalableTopic"
LEASE = "Lease"
TIMEOUT = 10.0  # generous: it only bounds a failing test

# The contract suite's own kind (tests/store/storeprobe-crd.yaml): free-form spec and status,
# so that its objects mean the same on every target, a real API server's CRD schema included.
PROBE_INFO = KindInfo(
    "StoreProbe", "test.scalabletopics.dev/v1", "storeprobes", status_subresource=True
)
PROBE = PROBE_INFO.kind
PROBE_CRD = Path(__file__).with_name("storeprobe-crd.yaml")
TEST_KINDS: Mapping[str, KindInfo] = MappingProxyType({**DEFAULT_KINDS, PROBE: PROBE_INFO})


# Opens one more store instance on a backend: (clock, history_limit) -> store.
StoreOpener = Callable[[Clock | None, int | None], Awaitable[Store]]


@dataclass
class Backend:
    """One storage backend and a factory of store instances on it (another connection each)."""

    name: str
    url: str
    opener: StoreOpener
    # Whether a test can shorten the history the backend keeps, to check Expired.
    compacts_on_request: bool
    # Whether the clock a test gives new_store stamps the objects (a real cluster's API server
    # keeps its own time).
    controls_clock: bool = True
    # Whether only the test moves the backend's revisions (a real cluster's controllers write
    # all the time, so a list's resourceVersion may be past the test's last write).
    private_history: bool = True
    # What else to release once the stores are closed (a server the backend started).
    cleanup: Callable[[], Awaitable[None]] | None = None
    _stores: list[Store] = field(default_factory=list)

    async def new_store(
        self, *, clock: Clock | None = None, history_limit: int | None = None
    ) -> Store:
        store = await self.opener(clock, history_limit)
        self._stores.append(store)
        return store

    async def close_all(self) -> None:
        try:
            for store in self._stores:
                await store.close()
        finally:
            if self.cleanup is not None:
                await self.cleanup()


def topic(
    name: str,
    namespace: str = "default",
    *,
    labels: dict[str, str] | None = None,
    spec: dict[str, Any] | None = None,
    status: dict[str, Any] | None = None,
    finalizers: list[str] | None = None,
) -> Object:
    metadata: dict[str, Any] = {"name": name, "namespace": namespace}
    if labels is not None:
        metadata["labels"] = labels
    if finalizers is not None:
        metadata["finalizers"] = finalizers
    obj: Object = {
        "apiVersion": API_VERSION,
        "kind": TOPIC,
        "metadata": metadata,
        "spec": spec if spec is not None else {"partitions": 1},
    }
    if status is not None:
        obj["status"] = status
    return obj


def probe(
    name: str,
    namespace: str = "default",
    *,
    labels: dict[str, str] | None = None,
    spec: dict[str, Any] | None = None,
    status: dict[str, Any] | None = None,
    finalizers: list[str] | None = None,
) -> Object:
    """A StoreProbe, as ``topic`` builds a ScalableTopic."""
    obj = topic(name, namespace, labels=labels, spec=spec, status=status, finalizers=finalizers)
    return {**obj, "apiVersion": PROBE_INFO.api_version, "kind": PROBE}


def lease_object(name: str, namespace: str = "default", **spec: Any) -> Object:
    return {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": LEASE,
        "metadata": {"name": name, "namespace": namespace},
        "spec": spec,
    }


def rv(obj: Object) -> int:
    return int(obj["metadata"]["resourceVersion"])


def names(events: list[WatchEvent]) -> list[tuple[str, str]]:
    return [(e.type.value, e.object["metadata"]["name"]) for e in events]


async def next_event(watch: Watch, seconds: float = TIMEOUT) -> WatchEvent:
    async with asyncio.timeout(seconds):
        return await anext(aiter(watch))


async def events_through(watch: Watch, revision: int, seconds: float = TIMEOUT) -> list[WatchEvent]:
    """Read events until one carries ``revision`` (or a later one)."""
    events: list[WatchEvent] = []
    async with asyncio.timeout(seconds):
        async for event in watch:
            events.append(event)
            if int(event.resource_version) >= revision:
                return events
    raise AssertionError(f"the watch ended before revision {revision}: {names(events)}")


async def take(watch: Watch, count: int, seconds: float = TIMEOUT) -> list[WatchEvent]:
    events: list[WatchEvent] = []
    async with asyncio.timeout(seconds):
        async for event in watch:
            events.append(event)
            if len(events) == count:
                break
    assert len(events) == count, names(events)
    return events
