"""The API server's own controllers: garbage collection by ownerReference, namespace deletion
and the removal of a deleted CRD's objects.

One informer per stored kind (Events aside: nothing owns them) feeds a level-triggered sweep,
debounced to at most one every ``interval`` seconds while changes arrive:

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
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any

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


class Collector:
    def __init__(
        self,
        store: Store,
        registry: Registry,
        *,
        interval: float = SWEEP_INTERVAL,
    ) -> None:
        self._store = store
        self._registry = registry
        self._interval = interval
        self._informers: dict[str, Informer] = {}
        self._dirty = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self.sweeps = 0

    def start(self) -> None:
        self.kinds_changed()
        self._task = asyncio.get_running_loop().create_task(self._run(), name="kubeapi collector")

    async def stop(self) -> None:
        if self._task is not None:
            await cancel_and_wait(self._task)
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
