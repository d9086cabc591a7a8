"""The resources the server serves right now: the built-in ones and those applied CRDs define.

The registry is also the store's list of kinds (``store_kinds``, a live mapping): a CRD that is
applied makes its kind storable at once, one that is removed makes it unknown again. A kind is
stored in one form, its storage version; a resource served at another version, or by another
API (events.k8s.io Events are stored as core Events), is converted on the way in and out; and
what is read is defaulted as kube-apiserver's defaulters do (a Namespace without a phase is
Active).
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any, Protocol

from ..store.kinds import KindInfo
from .resources import ResourceType

Object = dict[str, Any]
Converter = Callable[[Object], Object]


class Conversion(Protocol):
    """How objects of one served resource map to and from their stored form."""

    @property
    def to_storage(self) -> Converter: ...

    @property
    def from_storage(self) -> Converter: ...


class StoreKinds(Mapping[str, KindInfo]):
    """The registry's stored kinds, as the store port's ``kinds`` mapping."""

    def __init__(self, registry: Registry) -> None:
        self._registry = registry

    def __getitem__(self, kind: str) -> KindInfo:
        return self._registry._stored[kind]

    def __iter__(self) -> Iterator[str]:
        return iter(dict(self._registry._stored))

    def __len__(self) -> int:
        return len(self._registry._stored)


class Registry:
    def __init__(
        self,
        builtins: Iterable[ResourceType],
        conversions: Mapping[tuple[str, str], Conversion] | None = None,
        defaults: Mapping[str, Converter] | None = None,
    ) -> None:
        self._builtin = tuple(builtins)
        self._conversions = dict(conversions or {})
        self._defaults = dict(defaults or {})  # stored kind -> defaulting of what is read
        self._defined: dict[str, tuple[ResourceType, ...]] = {}  # CRD name -> its resources
        self._storage_versions: dict[str, str] = {}  # CRD name -> the version objects keep
        self._stored: dict[str, KindInfo] = {}
        self._by_path: dict[tuple[str, str, str], ResourceType] = {}
        self.store_kinds = StoreKinds(self)
        self._rebuild()

    # -- what is served --------------------------------------------------------------------

    def resources(self) -> list[ResourceType]:
        return [*self._builtin, *(r for types in self._defined.values() for r in types)]

    def resolve(self, group: str, version: str, plural: str) -> ResourceType | None:
        return self._by_path.get((group, version, plural))

    def storage_form(self, kind: str) -> KindInfo | None:
        return self._stored.get(kind)

    def defined_by(self, crd_name: str) -> tuple[ResourceType, ...]:
        return self._defined.get(crd_name, ())

    def owner_of(self, group: str, kind: str) -> str | None:
        """The CRD that defines ``kind`` in ``group``, if any."""
        for crd_name, types in self._defined.items():
            if any(r.group == group and r.kind == kind for r in types):
                return crd_name
        return None

    # -- CRDs coming and going -------------------------------------------------------------

    def define(self, crd_name: str, types: Iterable[ResourceType], storage_version: str) -> None:
        """Serve the resources a CRD defines (replacing what it defined before)."""
        self._defined[crd_name] = tuple(types)
        self._storage_versions[crd_name] = storage_version
        self._rebuild()

    def forget(self, crd_name: str) -> None:
        self._defined.pop(crd_name, None)
        self._storage_versions.pop(crd_name, None)
        self._rebuild()

    def _rebuild(self) -> None:
        by_path: dict[tuple[str, str, str], ResourceType] = {}
        stored: dict[str, KindInfo] = {}
        for resource in self._builtin:
            by_path[(resource.group, resource.version, resource.plural)] = resource
            if resource.stored_as == resource.kind and (
                resource.api_version,
                resource.kind,
            ) not in (self._conversions):
                stored[resource.kind] = _kind_info(resource)
        for crd_name, types in self._defined.items():
            storage = self._storage_versions.get(crd_name)
            for resource in types:
                by_path[(resource.group, resource.version, resource.plural)] = resource
                if resource.version == storage:
                    stored[resource.stored_as] = _kind_info(resource)
        self._by_path, self._stored = by_path, stored

    # -- conversion ------------------------------------------------------------------------

    def to_storage(self, resource: ResourceType, obj: Object) -> Object:
        conversion = self._conversions.get((resource.api_version, resource.kind))
        if conversion is not None:
            return conversion.to_storage(obj)
        info = self._stored.get(resource.stored_as)
        converted = copy.copy(obj)
        if info is not None:
            converted["apiVersion"] = info.api_version
        return converted

    def from_storage(self, resource: ResourceType, obj: Object) -> Object:
        default = self._defaults.get(resource.stored_as)
        if default is not None:
            obj = default(obj)
        conversion = self._conversions.get((resource.api_version, resource.kind))
        if conversion is not None:
            return conversion.from_storage(obj)
        if obj.get("apiVersion") == resource.api_version:
            return obj
        converted = copy.copy(obj)
        converted["apiVersion"] = resource.api_version
        return converted


def _kind_info(resource: ResourceType) -> KindInfo:
    return KindInfo(
        resource.stored_as,
        resource.api_version,
        resource.plural,
        status_subresource=resource.status_subresource,
        namespaced=resource.namespaced,
    )
