"""What the API server knows of each resource it serves: one :class:`ResourceType` per kind and
version, built in (Namespace, Event, Lease, CustomResourceDefinition) or defined by a CRD."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

Schema = Mapping[str, Any]

# The verbs discovery lists for every resource this server serves.
VERBS = ("create", "delete", "deletecollection", "get", "list", "patch", "update", "watch")


@dataclass(frozen=True, slots=True)
class ResourceType:
    """One kind at one version, as discovery, OpenAPI, admission and Table output see it."""

    group: str  # "" for the core group
    version: str
    kind: str
    plural: str
    singular: str
    namespaced: bool
    short_names: tuple[str, ...] = ()
    categories: tuple[str, ...] = ()
    status_subresource: bool = False
    # The openAPIV3Schema objects are validated against (structural, as in a CRD); None for a
    # kind whose objects are only checked by its own rules (see builtins).
    schema: Schema | None = None
    # additionalPrinterColumns, as a CRD declares them (name, type, jsonPath, format,
    # description, priority); empty means the default NAME and AGE columns. A built-in kind's
    # column may give "cell", a function (object, now) -> cell, instead of a jsonPath, for what
    # a path cannot express (kubectl's "pod/name" OBJECT of an Event); see tables.py.
    printer_columns: tuple[Mapping[str, Any], ...] = ()
    # The kind the store keeps these objects under (events.k8s.io Events are stored as core
    # Events, so both APIs show the same objects).
    store_kind: str = ""

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def group_version(self) -> str:
        return self.api_version

    @property
    def list_kind(self) -> str:
        return f"{self.kind}List"

    @property
    def stored_as(self) -> str:
        return self.store_kind or self.kind

    def names(self) -> Sequence[str]:
        """Every name kubectl may use for this resource."""
        return (self.plural, self.singular, *self.short_names)
