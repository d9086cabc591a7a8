"""meta.k8s.io Table and PartialObjectMetadata output, and the Accept negotiation that asks for
them.

``kubectl get`` sends ``Accept: application/json;as=Table;v=v1;g=meta.k8s.io,
application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json`` and prints the Table's
rows; the API server computes every cell, ages included (``5m``: kubectl prints cells as they
come). Columns are a resource's printer columns, after a NAME column: a CRD's
additionalPrinterColumns evaluated with Kubernetes JSONPath, or, when it declares none, a single
AGE column (a ``date`` of ``.metadata.creationTimestamp``). Each row carries the object as
``includeObject`` asks: ``Metadata`` (the default, a PartialObjectMetadata), ``Object`` or
``None`` (null).

On a watch the API server sends each event's object as a one-row Table; only the first event of
a stream carries ``columnDefinitions`` (null afterwards: kubectl keeps the last ones it saw).
Error events (a Status) pass through untouched.
"""

from __future__ import annotations

import copy
import functools
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Any

from . import ages, jsonpath
from .resources import ResourceType
from .status import ApiError, Reason

Object = dict[str, Any]

META_GROUP = "meta.k8s.io"
META_V1 = "meta.k8s.io/v1"
JSON = "application/json"
YAML = "application/yaml"
SERVED_MEDIA_TYPES = (JSON, YAML)

NAME_DESCRIPTION = (
    "Name must be unique within a namespace. Is required when creating resources, although "
    "some resources may allow a client to request the generation of an appropriate name "
    "automatically. Cannot be updated."
)
AGE_DESCRIPTION = (
    "CreationTimestamp is a timestamp representing the server time when this object was "
    "created. It is represented in RFC3339 form and is in UTC."
)
DEFAULT_COLUMN: Mapping[str, Any] = {
    "name": "Age",
    "type": "date",
    "description": AGE_DESCRIPTION,
    "jsonPath": ".metadata.creationTimestamp",
}


class Target(StrEnum):
    """What the client asked the response to be."""

    OBJECT = "Object"  # the resource itself (or its List)
    TABLE = "Table"
    PARTIAL_OBJECT_METADATA = "PartialObjectMetadata"
    PARTIAL_OBJECT_METADATA_LIST = "PartialObjectMetadataList"


class IncludeObject(StrEnum):
    """``?includeObject=``: what each Table row carries."""

    NONE = "None"
    METADATA = "Metadata"
    OBJECT = "Object"


@dataclass(frozen=True, slots=True)
class Negotiated:
    target: Target
    media_type: str  # application/json or application/yaml
    group_version: str = META_V1  # of the Table / PartialObjectMetadata (v1 or v1beta1)
    include_object: IncludeObject = IncludeObject.METADATA
    pretty: bool = False

    @property
    def table(self) -> bool:
        return self.target is Target.TABLE

    @property
    def content_type(self) -> str:
        return self.media_type


def not_acceptable() -> ApiError:
    return ApiError(
        406,
        Reason.NOT_ACCEPTABLE,
        "only the following media types are accepted: " + ", ".join(SERVED_MEDIA_TYPES),
    )


@dataclass(frozen=True, slots=True)
class _Clause:
    type: str
    subtype: str
    params: dict[str, str]
    q: float


def parse_accept(header: str) -> list[_Clause]:
    """The media ranges of an Accept header, best first (by q, then specific before wildcard;
    ties keep their order, as the API server's parser does)."""
    clauses = []
    for part in header.split(","):
        pieces = [p.strip() for p in part.split(";")]
        media = pieces[0].lower()
        if not media:
            continue
        kind, _, subtype = media.partition("/")
        params: dict[str, str] = {}
        q = 1.0
        for piece in pieces[1:]:
            key, sep, value = piece.partition("=")
            if not sep:
                continue
            key, value = key.strip(), value.strip().strip('"')
            if key == "q":
                try:
                    q = float(value)
                except ValueError:
                    q = 0.0
            else:
                params[key] = value
        clauses.append(_Clause(kind, subtype or "*", params, q))
    return sorted(clauses, key=lambda c: (-c.q, c.type == "*", c.subtype == "*"))


def _media_type(clause: _Clause) -> str | None:
    if clause.type == "*" and clause.subtype == "*":
        return JSON
    if clause.type != "application":
        return None
    if clause.subtype in ("json", "*"):
        return JSON
    if clause.subtype == "yaml":
        return YAML
    return None


def negotiate(accept: str | None, query: Mapping[str, str] | None = None) -> Negotiated:
    """What to answer for this Accept header (and ``includeObject`` in ``query``).

    Protobuf and CBOR are not served (a client that also accepts JSON gets JSON); nothing
    acceptable is 406 NotAcceptable. A Table needs ``g=meta.k8s.io`` and ``v=v1`` or
    ``v1beta1``; an unknown ``includeObject`` is 400, as the API server answers."""
    clauses = parse_accept(accept) if accept and accept.strip() else []
    if not clauses:
        return Negotiated(Target.OBJECT, JSON)
    for clause in clauses:
        media_type = _media_type(clause)
        if media_type is None:
            continue
        params = clause.params
        stream = params.get("stream")
        if stream and stream != "watch":
            continue
        pretty = params.get("pretty") == "1"
        convert = {k: params[k] for k in ("as", "g", "v") if k in params}
        if not convert:
            return Negotiated(Target.OBJECT, media_type, pretty=pretty)
        if convert.get("g") != META_GROUP or convert.get("v") not in ("v1", "v1beta1"):
            continue
        try:
            target = Target(convert.get("as", ""))
        except ValueError:
            continue
        if target is Target.OBJECT:
            continue
        group_version = f"{META_GROUP}/{convert['v']}"
        include = IncludeObject.METADATA
        if target is Target.TABLE:
            include = include_object(query)
        return Negotiated(target, media_type, group_version, include, pretty)
    raise not_acceptable()


def include_object(query: Mapping[str, str] | None) -> IncludeObject:
    value = (query or {}).get("includeObject", "")
    if not value:
        return IncludeObject.METADATA
    try:
        return IncludeObject(value)
    except ValueError:
        raise ApiError(
            400, Reason.BAD_REQUEST, f'unrecognized includeObject value: "{value}"'
        ) from None


# -- columns and cells ------------------------------------------------------------------------


def columns(resource: ResourceType) -> list[Mapping[str, Any]]:
    """The resource's columns, NAME first (unless it places a ``format: name`` column itself,
    as the Event printer does), AGE when a CRD declares none."""
    declared = list(resource.printer_columns) or [DEFAULT_COLUMN]
    if any(column.get("format") == "name" for column in declared):
        return declared
    name: Mapping[str, Any] = {
        "name": "Name",
        "type": "string",
        "format": "name",
        "description": NAME_DESCRIPTION,
        "cell": lambda obj, _now: (obj.get("metadata") or {}).get("name", ""),
    }
    return [name, *declared]


def column_definitions(resource: ResourceType) -> list[Object]:
    definitions = []
    for column in columns(resource):
        description = column.get("description") or (
            "Custom resource definition column (in JSONPath format): " + str(column.get("jsonPath"))
        )
        definitions.append(
            {
                "name": column.get("name", ""),
                "type": column.get("type", ""),
                "format": column.get("format", ""),
                "description": description,
                "priority": int(column.get("priority") or 0),
            }
        )
    return definitions


@functools.lru_cache(maxsize=512)
def _parsed(json_path: str) -> jsonpath.Template | None:
    try:
        return jsonpath.parse_column_path(json_path)
    except jsonpath.JSONPathError:
        return None


def json_value_cell(column_type: str, value: Any, now: datetime) -> Any:
    """A non-string column's cell from the value its path found, as the API server types it:
    integer and number cells only from numbers, booleans from booleans, a date as an age."""
    if value is None:
        return None
    if column_type == "integer":
        if isinstance(value, bool) or not isinstance(value, int | float):
            return None
        return int(value)
    if column_type == "number":
        if isinstance(value, bool) or not isinstance(value, int | float):
            return None
        return float(value)
    if column_type == "boolean":
        return value if isinstance(value, bool) else None
    if column_type == "string":
        return value if isinstance(value, str) else None
    if column_type == "date":
        return ages.date_cell(value, now)
    return None


def cell(column: Mapping[str, Any], obj: Mapping[str, Any], now: datetime) -> Any:
    compute = column.get("cell")
    if compute is not None:
        try:
            return compute(obj, now)
        except (TypeError, ValueError, AttributeError):
            return None  # a stored object of an unexpected shape: an empty cell, not a 500
    template = _parsed(str(column.get("jsonPath", "")))
    if template is None:
        return None
    try:
        results = template.find_results(obj)
    except jsonpath.JSONPathError:
        return None
    if not results or not results[0]:
        return None
    value = results[0][0]
    if column.get("type") == "string":
        return jsonpath.print_value(value)
    return json_value_cell(str(column.get("type", "")), value, now)


def cells(resource: ResourceType, obj: Mapping[str, Any], now: datetime | None = None) -> list[Any]:
    moment = now or ages.now()
    return [cell(column, obj, moment) for column in columns(resource)]


# -- objects in rows --------------------------------------------------------------------------


def partial_object_metadata(obj: Mapping[str, Any], group_version: str = META_V1) -> Object:
    return {
        "kind": "PartialObjectMetadata",
        "apiVersion": group_version,
        "metadata": copy.deepcopy(obj.get("metadata") or {}),
    }


def partial_object_metadata_list(
    items: Iterable[Mapping[str, Any]],
    metadata: Mapping[str, Any] | None = None,
    group_version: str = META_V1,
) -> Object:
    return {
        "kind": "PartialObjectMetadataList",
        "apiVersion": group_version,
        "metadata": dict(metadata or {}),
        "items": [partial_object_metadata(item, group_version) for item in items],
    }


def _row_object(
    obj: Mapping[str, Any], include: IncludeObject, group_version: str
) -> Object | None:
    if include is IncludeObject.NONE:
        return None
    if include is IncludeObject.OBJECT:
        return copy.deepcopy(dict(obj))
    return partial_object_metadata(obj, group_version)


def row(
    resource: ResourceType,
    obj: Mapping[str, Any],
    include_object: IncludeObject = IncludeObject.METADATA,
    *,
    now: datetime | None = None,
    group_version: str = META_V1,
) -> Object:
    return {
        "cells": cells(resource, obj, now),
        "object": _row_object(obj, IncludeObject(include_object), group_version),
    }


def _table(
    resource: ResourceType,
    items: Iterable[Mapping[str, Any]],
    metadata: Mapping[str, Any],
    include_object: IncludeObject,
    now: datetime | None,
    group_version: str,
    headers: bool,
) -> Object:
    moment = now or ages.now()
    return {
        "kind": "Table",
        "apiVersion": group_version,
        "metadata": dict(metadata),
        "columnDefinitions": column_definitions(resource) if headers else None,
        "rows": [
            row(resource, item, include_object, now=moment, group_version=group_version)
            for item in items
        ],
    }


def object_table(
    resource: ResourceType,
    obj: Mapping[str, Any],
    include_object: IncludeObject = IncludeObject.METADATA,
    *,
    now: datetime | None = None,
    group_version: str = META_V1,
    headers: bool = True,
) -> Object:
    """The Table for one object (a get): one row, and the object's resourceVersion."""
    metadata: Object = {}
    rv = (obj.get("metadata") or {}).get("resourceVersion")
    if rv:
        metadata["resourceVersion"] = rv
    return _table(resource, [obj], metadata, include_object, now, group_version, headers)


def list_table(
    resource: ResourceType,
    items: Iterable[Mapping[str, Any]],
    metadata: Mapping[str, Any],
    include_object: IncludeObject = IncludeObject.METADATA,
    *,
    now: datetime | None = None,
    group_version: str = META_V1,
) -> Object:
    """The Table for a list: ``metadata`` is the list's (resourceVersion, continue,
    remainingItemCount)."""
    kept = {
        key: metadata[key]
        for key in ("resourceVersion", "continue", "remainingItemCount")
        if metadata.get(key) not in (None, "")
    }
    return _table(resource, items, kept, include_object, now, group_version, True)


def watch_table(
    resource: ResourceType,
    obj: Mapping[str, Any],
    include_object: IncludeObject = IncludeObject.METADATA,
    *,
    headers: bool = True,
    now: datetime | None = None,
    group_version: str = META_V1,
) -> Object:
    """A watch event's object as a Table: one row; a Status (an ERROR event) as it is.
    The API server sends ``columnDefinitions`` in the first event only (``headers=False``
    afterwards gives null, as it does)."""
    if obj.get("kind") == "Status" and obj.get("apiVersion") == "v1":
        return dict(obj)
    return object_table(
        resource, obj, include_object, now=now, group_version=group_version, headers=headers
    )


class WatchTransform:
    """Turns each watch event's object into what was negotiated, sending the Table headers
    only once per stream, as the API server does (it keeps no other state)."""

    def __init__(self, resource: ResourceType, negotiated: Negotiated) -> None:
        self.resource = resource
        self.negotiated = negotiated
        self._headers_sent = False

    def __call__(self, obj: Mapping[str, Any], *, now: datetime | None = None) -> Object:
        target = self.negotiated.target
        if obj.get("kind") == "Status" and obj.get("apiVersion") == "v1":
            transformed = dict(obj)
        elif target is Target.TABLE:
            transformed = watch_table(
                self.resource,
                obj,
                self.negotiated.include_object,
                headers=not self._headers_sent,
                now=now,
                group_version=self.negotiated.group_version,
            )
        elif target is Target.PARTIAL_OBJECT_METADATA:
            transformed = partial_object_metadata(obj, self.negotiated.group_version)
        else:
            transformed = dict(obj)
        self._headers_sent = True
        return transformed


def check_list_target(negotiated: Negotiated, *, is_list: bool) -> None:
    """406 for PartialObjectMetadata asked of a list, or PartialObjectMetadataList of one
    object (the API server's words)."""
    if negotiated.target is Target.PARTIAL_OBJECT_METADATA and is_list:
        raise ApiError(
            406,
            Reason.NOT_ACCEPTABLE,
            "you requested PartialObjectMetadata, but the requested object is a list "
            "(*unstructured.UnstructuredList)",
        )
    if negotiated.target is Target.PARTIAL_OBJECT_METADATA_LIST and not is_list:
        raise ApiError(
            406,
            Reason.NOT_ACCEPTABLE,
            "you requested PartialObjectMetadataList, but the requested object is not a list "
            "(*unstructured.Unstructured)",
        )
