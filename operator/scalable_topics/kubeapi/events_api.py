"""core/v1 Events and events.k8s.io/v1 Events: one stored object, two APIs.

The API server keeps one Event and serves it in both forms; the fields map one to one::

    core/v1                  events.k8s.io/v1
    involvedObject           regarding
    message                  note
    count                    deprecatedCount
    firstTimestamp           deprecatedFirstTimestamp
    lastTimestamp            deprecatedLastTimestamp
    source                   deprecatedSource
    reportingComponent       reportingController
    reportingInstance, eventTime, series, action, reason, type, related: the same

Both functions answer what the API server would serve: Go's zero values included where its
JSON has them (``eventTime: null``, ``source: {}``, ``reportingComponent: ""`` in core/v1;
``regarding: {}``, ``deprecatedSource: {}``, null deprecated timestamps in events.k8s.io/v1),
empty strings and zero counts left out where it omits them, unknown fields dropped. Converting
one way and back gives the same object.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

Object = dict[str, Any]

CORE_API_VERSION = "v1"
EVENTS_API_VERSION = "events.k8s.io/v1"
KIND = "Event"

REFERENCE_FIELDS = (
    "kind",
    "namespace",
    "name",
    "uid",
    "apiVersion",
    "resourceVersion",
    "fieldPath",
)


def _reference(value: Any) -> Object:
    if not isinstance(value, Mapping):
        return {}
    return {key: value[key] for key in REFERENCE_FIELDS if value.get(key)}


def _source(value: Any) -> Object:
    if not isinstance(value, Mapping):
        return {}
    return {key: value[key] for key in ("component", "host") if value.get(key)}


def _time(value: Any) -> Any:
    return value if value else None


def _core_series(value: Any) -> Object | None:
    if not isinstance(value, Mapping):
        return None
    series: Object = {}
    if value.get("count"):
        series["count"] = value["count"]
    series["lastObservedTime"] = _time(value.get("lastObservedTime"))
    return series


def _events_series(value: Any) -> Object | None:
    if not isinstance(value, Mapping):
        return None
    return {
        "count": value.get("count") or 0,
        "lastObservedTime": _time(value.get("lastObservedTime")),
    }


def _metadata(obj: Mapping[str, Any]) -> Object:
    metadata = obj.get("metadata")
    return copy.deepcopy(dict(metadata)) if isinstance(metadata, Mapping) else {}


def _put(out: Object, key: str, value: Any) -> None:
    """An ``omitempty`` field: left out when empty."""
    if value:
        out[key] = copy.deepcopy(value)


def to_events_v1(core: Mapping[str, Any]) -> Object:
    """A core/v1 Event as events.k8s.io/v1 serves it."""
    out: Object = {"apiVersion": EVENTS_API_VERSION, "kind": KIND, "metadata": _metadata(core)}
    out["eventTime"] = _time(core.get("eventTime"))
    series = _events_series(core.get("series"))
    if series is not None:
        out["series"] = series
    _put(out, "reportingController", core.get("reportingComponent"))
    _put(out, "reportingInstance", core.get("reportingInstance"))
    _put(out, "action", core.get("action"))
    _put(out, "reason", core.get("reason"))
    out["regarding"] = _reference(core.get("involvedObject"))
    if isinstance(core.get("related"), Mapping):
        out["related"] = _reference(core["related"])
    _put(out, "note", core.get("message"))
    _put(out, "type", core.get("type"))
    out["deprecatedSource"] = _source(core.get("source"))
    out["deprecatedFirstTimestamp"] = _time(core.get("firstTimestamp"))
    out["deprecatedLastTimestamp"] = _time(core.get("lastTimestamp"))
    _put(out, "deprecatedCount", core.get("count"))
    return out


def to_core(event: Mapping[str, Any]) -> Object:
    """An events.k8s.io/v1 Event as core/v1 serves it (the form the store keeps)."""
    out: Object = {"apiVersion": CORE_API_VERSION, "kind": KIND, "metadata": _metadata(event)}
    out["involvedObject"] = _reference(event.get("regarding"))
    _put(out, "reason", event.get("reason"))
    _put(out, "message", event.get("note"))
    out["source"] = _source(event.get("deprecatedSource"))
    out["firstTimestamp"] = _time(event.get("deprecatedFirstTimestamp"))
    out["lastTimestamp"] = _time(event.get("deprecatedLastTimestamp"))
    _put(out, "count", event.get("deprecatedCount"))
    _put(out, "type", event.get("type"))
    out["eventTime"] = _time(event.get("eventTime"))
    series = _core_series(event.get("series"))
    if series is not None:
        out["series"] = series
    _put(out, "action", event.get("action"))
    if isinstance(event.get("related"), Mapping):
        out["related"] = _reference(event["related"])
    out["reportingComponent"] = event.get("reportingController") or ""
    out["reportingInstance"] = event.get("reportingInstance") or ""
    return out


def normalize_core(core: Mapping[str, Any]) -> Object:
    """A core/v1 Event as the API server would serve it back."""
    return to_core(to_events_v1(core))


def normalize_events_v1(event: Mapping[str, Any]) -> Object:
    """An events.k8s.io/v1 Event as the API server would serve it back."""
    return to_events_v1(to_core(event))


@dataclass(frozen=True, slots=True)
class EventConversion:
    """events.k8s.io/v1 Events to and from their stored (core/v1) form; the same two
    attributes as the registry's ``Conversion``."""

    to_storage: Callable[[Object], Object] = to_core
    from_storage: Callable[[Object], Object] = to_events_v1
