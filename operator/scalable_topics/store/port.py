"""The store port: what the controller and brokers may ask of persistent state.

It offers exactly what the Kubernetes API offers, so that an adapter over the real API server
needs no redesign: objects are JSON dicts (``apiVersion``, ``kind``, ``metadata``, ``spec``,
``status``) in namespaces; every write is a compare-and-swap on ``metadata.resourceVersion``;
there are no multi-object transactions.

Semantics every adapter keeps (the contract suite in tests/store checks them):

* ``resourceVersion`` is an opaque string that changes on every write of the object; within one
  store the revisions of all writes are totally ordered, and a list's ``resource_version`` is the
  revision a watch resumes from to see exactly the later changes.
* ``create`` sets uid, resourceVersion, ``generation = 1`` and creationTimestamp; a kind with a
  status subresource drops ``status`` on create.
* ``replace`` needs the resourceVersion the writer read (else Invalid) and raises Conflict when
  the object moved on. It changes metadata (labels, annotations, finalizers, ownerReferences) and
  spec; ``generation`` grows by one only when spec changed. For kinds with a status subresource
  ``status`` in the request is ignored. ``replace_status`` changes only status and never the
  generation.
* ``patch`` / ``patch_status`` apply an RFC 7386 JSON merge patch under the same rules, with an
  optional resourceVersion precondition.
* ``delete`` of an object without finalizers removes it. With finalizers it sets
  ``deletionTimestamp`` (once) and bumps ``generation``; the object goes when a write leaves its
  finalizer list empty. No finalizer may be added once deletion started.
* ``watch`` yields ADDED / MODIFIED / DELETED events of one kind (one namespace or all) in
  revision order, each carrying the object with the event's resourceVersion. Without a
  resourceVersion it starts with an ADDED event for every current object; with one, it delivers
  every later change with no gap, or raises Expired when that history is gone. With a label
  selector an object that stops matching arrives as DELETED and one that starts as ADDED.
  A watch holds resources until closed: use it as ``async with store.watch(...) as events``.
  With ``allow_bookmarks`` it may also yield BOOKMARK events now and then: their object has
  only ``kind``, ``apiVersion`` and ``metadata.resourceVersion``, a revision every change up to
  which was delivered, so that a watch resumed from it sees exactly the later changes (a quiet
  watch keeps a fresh place to resume from while other kinds move the history on).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from enum import StrEnum
from types import TracebackType
from typing import Any, Protocol, Self

Object = dict[str, Any]


class EventType(StrEnum):
    ADDED = "ADDED"
    MODIFIED = "MODIFIED"
    DELETED = "DELETED"
    BOOKMARK = "BOOKMARK"


@dataclass(frozen=True, slots=True)
class WatchEvent:
    type: EventType
    object: Object

    @property
    def resource_version(self) -> str:
        return str(self.object["metadata"]["resourceVersion"])


@dataclass(frozen=True, slots=True)
class ObjectList:
    items: list[Object] = field(default_factory=list)
    resource_version: str = "0"


class Watch(Protocol):
    """A stream of watch events that releases its listener when closed."""

    def __aiter__(self) -> AsyncIterator[WatchEvent]: ...

    async def __aenter__(self) -> Self: ...

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None: ...

    async def aclose(self) -> None: ...


class Store(Protocol):
    async def get(self, kind: str, namespace: str, name: str) -> Object: ...

    async def list(
        self, kind: str, namespace: str | None = None, label_selector: str | None = None
    ) -> ObjectList: ...

    async def create(self, obj: Object) -> Object: ...

    async def replace(self, obj: Object) -> Object: ...

    async def replace_status(self, obj: Object) -> Object: ...

    async def patch(
        self,
        kind: str,
        namespace: str,
        name: str,
        patch: Object,
        resource_version: str | None = None,
    ) -> Object: ...

    async def patch_status(
        self,
        kind: str,
        namespace: str,
        name: str,
        patch: Object,
        resource_version: str | None = None,
    ) -> Object: ...

    async def delete(
        self, kind: str, namespace: str, name: str, resource_version: str | None = None
    ) -> Object:
        """Return the object as deleted, or as marked for deletion when finalizers hold it."""
        ...

    def watch(
        self,
        kind: str,
        namespace: str | None = None,
        resource_version: str | None = None,
        label_selector: str | None = None,
        allow_bookmarks: bool = False,
    ) -> Watch: ...

    async def close(self) -> None: ...
