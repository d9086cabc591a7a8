"""Drained markers: which segments every message of a subscription has been acknowledged on.

A parent's broker records ``status.drained[subscription]`` on the parent's Segment object
once; any broker serving a child reads it to open the child's ordered dispatch (DESIGN
guarantee 3). One store watch per broker over all Segment objects keeps a local cache, and
listeners (the hosted segments) are told whenever it changes. A parent whose Segment object no
longer exists was pruned, which garbage collection does only to drained segments, so it counts
as drained; until the first list has arrived, nothing counts as drained.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from datetime import UTC, datetime

from ..model.resources import Segment, segment_object_name
from ..model.timefmt import format_time
from ..store import EventType, Expired, NotFound, Store, StoreError
from ..tasks import cancel_and_wait

log = logging.getLogger(__name__)

_Key = tuple[str, str, int]  # namespace, topic, segment id
_RETRY_SECONDS = 1.0


class DrainMarkers:
    def __init__(self, store: Store) -> None:
        self._store = store
        self._drained: dict[_Key, frozenset[str]] = {}
        self._synced = asyncio.Event()
        self._listeners: list[Callable[[], None]] = []
        self._task: asyncio.Task[None] | None = None
        self._writes: set[asyncio.Task[None]] = set()

    async def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._follow(), name="drain markers")

    async def wait_synced(self) -> None:
        await self._synced.wait()

    async def stop(self) -> None:
        for task in [self._task, *self._writes]:
            if task is not None:
                await cancel_and_wait(task)

    def listen(self, callback: Callable[[], None]) -> Callable[[], None]:
        self._listeners.append(callback)
        return lambda: self._listeners.remove(callback) if callback in self._listeners else None

    def parents_drained(
        self, namespace: str, topic: str, parents: tuple[int, ...], subscription: str
    ) -> bool:
        if not self._synced.is_set():
            return False
        for parent in parents:
            drained = self._drained.get((namespace, topic, parent))
            if drained is not None and subscription not in drained:
                return False
        return True

    def mark_drained(self, namespace: str, topic: str, descriptor: str, subscription: str) -> None:
        """Record the marker in the background, retrying until the store takes it."""
        task = asyncio.get_running_loop().create_task(
            self._write(namespace, topic, descriptor, subscription)
        )
        self._writes.add(task)
        task.add_done_callback(self._writes.discard)

    async def _write(self, namespace: str, topic: str, descriptor: str, subscription: str) -> None:
        name = segment_object_name(topic, descriptor)
        patch = {"status": {"drained": {subscription: format_time(datetime.now(UTC))}}}
        while True:
            try:
                current = await self._store.get(Segment.KIND, namespace, name)
                if subscription in ((current.get("status") or {}).get("drained") or {}):
                    return
                await self._store.patch_status(Segment.KIND, namespace, name, patch)
                return
            except NotFound:
                log.warning(
                    "no Segment object %s/%s to record that %s drained it",
                    namespace,
                    name,
                    subscription,
                )
                return
            except StoreError:
                log.warning(
                    "recording drained marker on %s/%s failed; retrying",
                    namespace,
                    name,
                    exc_info=True,
                )
                await asyncio.sleep(_RETRY_SECONDS)

    async def _follow(self) -> None:
        while True:
            try:
                listing = await self._store.list(Segment.KIND)
                self._drained = {_key(o): _drained(o) for o in listing.items if _key(o) is not None}  # type: ignore[misc]
                self._synced.set()
                self._notify()
                async with self._store.watch(
                    Segment.KIND, resource_version=listing.resource_version
                ) as events:
                    async for event in events:
                        key = _key(event.object)
                        if key is None:
                            continue
                        if event.type is EventType.DELETED:
                            self._drained.pop(key, None)
                        else:
                            self._drained[key] = _drained(event.object)
                        self._notify()
            except asyncio.CancelledError:
                raise
            except Expired:
                continue
            except Exception:
                log.warning("watch on Segment objects failed; relisting", exc_info=True)
                await asyncio.sleep(_RETRY_SECONDS)

    def _notify(self) -> None:
        for listener in list(self._listeners):
            listener()


def _key(obj: dict[str, object]) -> _Key | None:
    spec = obj.get("spec")
    metadata = obj.get("metadata")
    if not isinstance(spec, dict) or not isinstance(metadata, dict):
        return None
    try:
        return str(metadata["namespace"]), str(spec["topic"]), int(spec["segmentId"])
    except (KeyError, TypeError, ValueError):
        return None


def _drained(obj: dict[str, object]) -> frozenset[str]:
    status = obj.get("status")
    drained = status.get("drained") if isinstance(status, dict) else None
    return frozenset(drained) if isinstance(drained, dict) else frozenset()
