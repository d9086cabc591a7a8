"""A store whose compare-and-swap writes update the process's informers at once.

A controller reads from its informers and writes to the store; without this, its next read
after a write could still see the version it replaced (the watch event is on its way) and its
next write would fail with Conflict. A write whose precondition was the cached version cannot
have been overtaken, so the cache takes it at once (``Informer.written``). Other writes (a
patch without a resourceVersion, a delete) wait for their watch events like anyone else's.
"""

from __future__ import annotations

from collections.abc import Mapping

from .informer import Informer
from .port import Object, ObjectList, Store, Watch


class WriteThroughStore:
    """The store port over ``store``, telling ``informers`` (by kind) of its own writes."""

    def __init__(self, store: Store, informers: Mapping[str, Informer]) -> None:
        self._store = store
        self._informers = informers

    @property
    def inner(self) -> Store:
        return self._store

    def _written(self, kind: str, replaced: str | None, obj: Object) -> Object:
        informer = self._informers.get(kind)
        if informer is not None:
            informer.written(replaced, obj)
        return obj

    async def get(self, kind: str, namespace: str, name: str) -> Object:
        return await self._store.get(kind, namespace, name)

    async def list(
        self, kind: str, namespace: str | None = None, label_selector: str | None = None
    ) -> ObjectList:
        return await self._store.list(kind, namespace, label_selector)

    async def create(self, obj: Object) -> Object:
        return self._written(obj["kind"], None, await self._store.create(obj))

    async def replace(self, obj: Object) -> Object:
        replaced = obj["metadata"].get("resourceVersion")
        return self._written(obj["kind"], replaced, await self._store.replace(obj))

    async def replace_status(self, obj: Object) -> Object:
        replaced = obj["metadata"].get("resourceVersion")
        return self._written(obj["kind"], replaced, await self._store.replace_status(obj))

    async def patch(
        self,
        kind: str,
        namespace: str,
        name: str,
        patch: Object,
        resource_version: str | None = None,
    ) -> Object:
        written = await self._store.patch(kind, namespace, name, patch, resource_version)
        return (
            written if resource_version is None else self._written(kind, resource_version, written)
        )

    async def patch_status(
        self,
        kind: str,
        namespace: str,
        name: str,
        patch: Object,
        resource_version: str | None = None,
    ) -> Object:
        written = await self._store.patch_status(kind, namespace, name, patch, resource_version)
        return (
            written if resource_version is None else self._written(kind, resource_version, written)
        )

    async def delete(
        self, kind: str, namespace: str, name: str, resource_version: str | None = None
    ) -> Object:
        return await self._store.delete(kind, namespace, name, resource_version)

    def watch(
        self,
        kind: str,
        namespace: str | None = None,
        resource_version: str | None = None,
        label_selector: str | None = None,
        allow_bookmarks: bool = False,
    ) -> Watch:
        return self._store.watch(kind, namespace, resource_version, label_selector, allow_bookmarks)

    async def close(self) -> None:
        await self._store.close()
