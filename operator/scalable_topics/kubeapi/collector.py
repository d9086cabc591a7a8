"""The API server's own controllers: garbage collection by ownerReference, namespace deletion
and the removal of a deleted CRD's objects.

One informer per stored kind (Events aside: nothing owns them) feeds a level-triggered sweep,
debounced to at most one every ``interval`` seconds while changes arrive. Only a change that
can alter what a sweep does wakes it (``sweep_may_change``): an object added or deleted, or a
change of its ownerReferences, deletionTimestamp or finalizers, or of a Namespace's phase. A
Lease renewal (every few seconds per Lease, for ever) changes none of them, and a sweep reads
every cached object.

* An object whose every owner is gone is deleted (Background propagation); an owner that is
  gone is dropped from the ownerReferences of an object that keeps another. An owner looks gone
  in the caches for a moment after it is created, so it is read from the store before anything
  is done about it.
* An owner being deleted with the ``orphan`` finalizer first has itself removed from its
  dependents' ownerReferences; with ``foregroundDeletion`` its dependents are deleted first. The
  finalizer goes once that is done.
* A Namespace in phase Terminating has every object in it deleted (finalizers are honoured:
  their controllers finish), then goes itself.
* A CustomResourceDefinition being deleted has every object of its kind deleted, then loses
  its cleanup finalizer, and its kind stops being served.

Apart from the sweep, Events are deleted ``event_ttl`` after they were last seen (the API
server's ``--event-ttl``, an hour by default), checked every ``event_ttl / 60``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from datetime import datetime
from typing import Any

from ..model.clock import Clock, SystemClock
from ..model.timefmt import parse_time
from ..store import Conflict, NotFound, Store, StoreError
from ..store.informer import Change, Informer
from ..tasks import cancel_and_wait
from .registry import Registry

log = logging.getLogger(__name__)

Object = dict[str, Any]

CRD_KIND = "CustomResourceDefinition"
CRD_CLEANUP = "customresourcecleanup.apiextensions.k8s.io"
ORPHAN, FOREGROUND = "orphan", "foregroundDeletion"
TERMINATING = "Terminating"
NOT_COLLECTED = frozenset({"Event"})
SWEEP_INTERVAL = 0.2
EVENT_TTL = 3600.0


class Collector:
    def __init__(
        self,
        store: Store,
        registry: Registry,
        *,
        interval: float = SWEEP_INTERVAL,
        event_ttl: float = EVENT_TTL,
        clock: Clock | None = None,
    ) -> None:
        self._store = store
        self._registry = registry
        self._interval = interval
        self._informers: dict[str, Informer] = {}
        self._dirty = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []
        self._event_ttl = event_ttl
        self._clock: Clock = clock or SystemClock()
        self.sweeps = 0
        self.events_expired = 0

    def start(self) -> None:
        self.kinds_changed()
        loop = asyncio.get_running_loop()
        self._tasks = [
            loop.create_task(self._run(), name="kubeapi collector"),
            loop.create_task(self._expire_events(), name="kubeapi event expiry"),
        ]

    async def stop(self) -> None:
        tasks, self._tasks = self._tasks, []
        for task in tasks:
            await cancel_and_wait(task)
        for informer in self._informers.values():
            await informer.stop()
        self._informers.clear()

    def kinds_changed(self) -> None:
        """Start informing on kinds the registry now stores (a CRD was applied)."""
        for kind in self._registry.store_kinds:
            if kind in NOT_COLLECTED or kind in self._informers:
                continue
            informer = Informer(self._store, kind)
            informer.subscribe(self._changed)
            informer.start()
            self._informers[kind] = informer
        self._dirty.set()

    def wake(self) -> None:
        self._dirty.set()

    def _changed(self, change: Change) -> None:
        if sweep_may_change(change):
            self._dirty.set()

    async def _run(self) -> None:
        while True:
            await self._dirty.wait()
            self._dirty.clear()
            for informer in list(self._informers.values()):
                await informer.wait_synced()
            try:
                await self.sweep()
            except StoreError as exc:
                log.warning("garbage collection pass failed, retrying: %s", exc)
                self._dirty.set()
            self.sweeps += 1
            await asyncio.sleep(self._interval)

    async def _expire_events(self) -> None:
        while True:
            try:
                await self.expire_events()
            except StoreError as exc:
                log.warning("expiring old Events failed, retrying: %s", exc)
            await asyncio.sleep(self._event_ttl / 60)

    async def expire_events(self) -> None:
        """Delete the Events last seen more than ``event_ttl`` ago."""
        if "Event" not in self._registry.store_kinds:
            return
        now = self._clock.now()
        for event in (await self._store.list("Event")).items:
            seen = _last_seen(event)
            if seen is not None and (now - seen).total_seconds() > self._event_ttl:
                meta = event["metadata"]
                with contextlib.suppress(NotFound, Conflict):
                    await self._store.delete(
                        "Event", meta["namespace"], meta["name"], meta["resourceVersion"]
                    )
                    self.events_expired += 1

    # -- one pass --------------------------------------------------------------------------

    async def sweep(self) -> None:
        objects = [obj for informer in self._informers.values() for obj in informer.list()]
        uids = {obj["metadata"].get("uid") for obj in objects}
        dependents: dict[str, list[Object]] = {}
        for obj in objects:
            for ref in obj["metadata"].get("ownerReferences") or []:
                dependents.setdefault(ref.get("uid"), []).append(obj)
        for obj in objects:
            meta = obj["metadata"]
            refs = meta.get("ownerReferences") or []
            if refs and any(ref.get("uid") not in uids for ref in refs):
                await self._drop_dangling(obj)
            if "deletionTimestamp" in meta:
                finalizers = meta.get("finalizers") or []
                if ORPHAN in finalizers:
                    await self._orphan(obj, dependents.get(meta.get("uid"), []))
                if FOREGROUND in finalizers:
                    await self._foreground(obj, dependents.get(meta.get("uid"), []))
        for namespace in self._list("Namespace"):
            if (namespace.get("status") or {}).get("phase") == TERMINATING:
                await self._empty_namespace(namespace)
        for crd in self._list(CRD_KIND):
            meta = crd["metadata"]
            if "deletionTimestamp" in meta and CRD_CLEANUP in (meta.get("finalizers") or []):
                await self._remove_crd_objects(crd)

    def _list(self, kind: str) -> list[Object]:
        informer = self._informers.get(kind)
        return informer.list() if informer is not None else []

    async def _drop_dangling(self, obj: Object) -> None:
        meta = obj["metadata"]
        namespace = meta.get("namespace", "")
        alive = []
        for ref in meta.get("ownerReferences") or []:
            if await self._owner_exists(ref, namespace):
                alive.append(ref)
        if len(alive) == len(meta.get("ownerReferences") or []):
            return
        kind, name = obj["kind"], meta["name"]
        if not alive:
            log.info("collecting %s %s/%s: its owners are gone", kind, namespace, name)
            with contextlib.suppress(NotFound):
                await self._store.delete(kind, namespace, name)
            return
        with contextlib.suppress(NotFound, Conflict):
            await self._store.patch(
                kind,
                namespace,
                name,
                {"metadata": {"ownerReferences": alive}},
                meta["resourceVersion"],
            )

    async def _owner_exists(self, ref: Object, namespace: str) -> bool:
        kind, name = ref.get("kind"), ref.get("name")
        if not isinstance(kind, str) or not isinstance(name, str):
            return False
        if kind not in self._registry.store_kinds:
            return False
        info = self._registry.store_kinds[kind]
        try:
            owner = await self._store.get(kind, namespace if info.namespaced else "", name)
        except NotFound:
            return False
        return bool(owner["metadata"].get("uid") == ref.get("uid"))

    async def _orphan(self, owner: Object, dependents: list[Object]) -> None:
        uid = owner["metadata"]["uid"]
        for obj in dependents:
            meta = obj["metadata"]
            refs = [r for r in meta.get("ownerReferences") or [] if r.get("uid") != uid]
            with contextlib.suppress(NotFound, Conflict):
                await self._store.patch(
                    obj["kind"],
                    meta.get("namespace", ""),
                    meta["name"],
                    {"metadata": {"ownerReferences": refs or None}},
                    meta["resourceVersion"],
                )
        await self._remove_finalizer(owner, ORPHAN)

    async def _foreground(self, owner: Object, dependents: list[Object]) -> None:
        for obj in dependents:
            meta = obj["metadata"]
            if "deletionTimestamp" not in meta:
                with contextlib.suppress(NotFound):
                    await self._store.delete(obj["kind"], meta.get("namespace", ""), meta["name"])
        if not dependents:
            await self._remove_finalizer(owner, FOREGROUND)

    async def _remove_finalizer(self, obj: Object, finalizer: str) -> None:
        meta = obj["metadata"]
        remaining = [f for f in meta.get("finalizers") or [] if f != finalizer]
        with contextlib.suppress(NotFound, Conflict):  # the next pass sees the newer object
            await self._store.patch(
                obj["kind"],
                meta.get("namespace", ""),
                meta["name"],
                {"metadata": {"finalizers": remaining or None}},
                meta["resourceVersion"],
            )

    async def _empty_namespace(self, namespace: Object) -> None:
        name = namespace["metadata"]["name"]
        left = 0
        for kind, info in list(self._registry.store_kinds.items()):
            if not info.namespaced:
                continue
            found = await self._store.list(kind, name)
            for obj in found.items:
                left += 1
                if "deletionTimestamp" not in obj["metadata"]:
                    with contextlib.suppress(NotFound):
                        await self._store.delete(kind, name, obj["metadata"]["name"])
        if left:
            self._dirty.set()  # their finalizers go on other events; look again then
            return
        log.info("namespace %s is empty: removing it", name)
        with contextlib.suppress(NotFound):
            await self._store.delete("Namespace", "", name)

    async def _remove_crd_objects(self, crd: Object) -> None:
        kind = crd["spec"]["names"]["kind"]
        left = 0
        if kind in self._registry.store_kinds:
            found = await self._store.list(kind)
            for obj in found.items:
                left += 1
                meta = obj["metadata"]
                if "deletionTimestamp" not in meta:
                    with contextlib.suppress(NotFound):
                        await self._store.delete(kind, meta.get("namespace", ""), meta["name"])
        if left:
            self._dirty.set()
            return
        await self._remove_finalizer(crd, CRD_CLEANUP)
        informer = self._informers.pop(kind, None)
        if informer is not None:
            await informer.stop()


_SWEPT_METADATA = ("uid", "ownerReferences", "deletionTimestamp", "finalizers")


def sweep_may_change(change: Change) -> bool:
    """Whether a sweep could act differently after ``change`` (what ``sweep`` reads)."""
    old, new = change.old, change.new
    if old is None or new is None:
        return True  # an owner appeared or went, or a dependent did
    old_meta, new_meta = old.get("metadata") or {}, new.get("metadata") or {}
    if any(old_meta.get(field) != new_meta.get(field) for field in _SWEPT_METADATA):
        return True
    return bool(_phase(old) != _phase(new))  # a Namespace that starts Terminating


def _phase(obj: Object) -> Any:
    status = obj.get("status")
    return status.get("phase") if isinstance(status, dict) else None


def _last_seen(event: Object) -> datetime | None:
    """When an Event was last seen: its lastTimestamp, eventTime (or series' last), or its
    creation."""
    series = event.get("series") or {}
    for text in (
        event.get("lastTimestamp"),
        series.get("lastObservedTime"),
        event.get("eventTime"),
        event["metadata"].get("creationTimestamp"),
    ):
        if isinstance(text, str) and text:
            try:
                return parse_time(text)
            except ValueError:
                continue
    return None
