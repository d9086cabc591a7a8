"""Drained markers: which segments every message of a subscription has been acknowledged on.

A parent's broker records ``status.drained[subscription]`` on the parent's Segment object
once; any broker serving a child reads it to open the child's ordered dispatch (DESIGN
guarantee 3). The markers are read from the process's Segment informer; a hosted segment
listens to its parents' objects only, so a change wakes the segments it concerns and nobody
else. A parent whose Segment object no longer exists was pruned, which garbage collection does
only to drained segments, so it counts as drained; until the informer's first list has
arrived, nothing counts as drained.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from datetime import UTC, datetime

from ..model.resources import Segment, segment_object_name
from ..model.timefmt import format_time
from ..store import NotFound, Store, StoreError
from ..store.informer import Unsubscribe
from ..store.informers import BY_SEGMENT, Informers
from ..tasks import TaskOwner

log = logging.getLogger(__name__)

_RETRY_SECONDS = 1.0


class DrainMarkers:
    def __init__(self, store: Store, informers: Informers) -> None:
        self._store = store
        self._segments = informers.segments
        self._tasks = TaskOwner("drained markers", log)
        # Segments that asked before the first list: told once it arrives.
        self._before_sync: set[Callable[[], None]] = set()

    async def start(self) -> None:
        self._tasks.spawn(self._tell_when_synced(), "drained markers: first list")

    async def stop(self) -> None:
        await self._tasks.close()

    def parents_drained(
        self, namespace: str, topic: str, parents: tuple[int, ...], subscription: str
    ) -> bool:
        if not self._segments.synced:
            return False
        for parent in parents:
            for obj in self._segments.by_index(BY_SEGMENT, (namespace, topic, parent)):
                if subscription not in ((obj.get("status") or {}).get("drained") or {}):
                    return False
        return True

    def listen(
        self, namespace: str, topic: str, parents: tuple[int, ...], callback: Callable[[], None]
    ) -> Unsubscribe:
        """Call ``callback`` whenever a parent's markers may have changed."""
        unsubscribes = [
            self._segments.subscribe_index(
                BY_SEGMENT, (namespace, topic, parent), lambda change: callback()
            )
            for parent in parents
        ]
        if parents and not self._segments.synced:
            self._before_sync.add(callback)

        def unsubscribe() -> None:
            self._before_sync.discard(callback)
            for each in unsubscribes:
                each()

        return unsubscribe

    def mark_drained(self, namespace: str, topic: str, descriptor: str, subscription: str) -> None:
        """Record the marker in the background, retrying until the store takes it."""
        self._tasks.spawn(
            self._write(namespace, topic, descriptor, subscription),
            f"drained marker {namespace}/{topic}/{descriptor} {subscription}",
        )

    async def _tell_when_synced(self) -> None:
        await self._segments.wait_synced()
        waiting, self._before_sync = self._before_sync, set()
        for callback in waiting:
            callback()

    async def _write(self, namespace: str, topic: str, descriptor: str, subscription: str) -> None:
        name = segment_object_name(topic, descriptor)
        patch = {"status": {"drained": {subscription: format_time(datetime.now(UTC))}}}
        while True:
            await self._segments.wait_synced()
            cached = self._segments.get(namespace, name)
            if cached is not None and subscription in (
                (cached.get("status") or {}).get("drained") or {}
            ):
                return
            try:
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
            except StoreError as error:  # one line per attempt, no traceback
                log.warning(
                    "recording drained marker on %s/%s failed (%s); retrying",
                    namespace,
                    name,
                    error,
                )
                await asyncio.sleep(_RETRY_SECONDS)
