"""The built-in kinds the API server serves, and the rules the real API server applies to them.

Namespace (core/v1), Event (core/v1, and events.k8s.io/v1 over the same stored objects), Lease
(coordination.k8s.io/v1), ConfigMap (core/v1) and CustomResourceDefinition
(apiextensions.k8s.io/v1): each a
:class:`ResourceType` with a structural schema (for ``kubectl explain``, OpenAPI and field
validation) and the printer columns ``kubectl get`` shows for it.

What the API server refuses before validation, because the body does not decode into its Go
types, is answered 400 (:func:`decode_failure`): a MicroTime (``Lease.spec.acquireTime``,
``renewTime``, ``Event.eventTime``, ``series.lastObservedTime``) without exactly six fractional
digits, a timestamp that is not RFC 3339, a string where an integer belongs. What it refuses
after, 422, is :func:`admission_causes`.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from datetime import datetime
from typing import Any

from . import ages, crd_types, events_api, gotime, name_rules
from . import field_errors as fe
from .go_values import go_quote
from .resources import ResourceType
from .status import ApiError, Cause, Reason
from .structural import nested

Object = dict[str, Any]
Schema = dict[str, Any]

CORE = ""
EVENTS_GROUP = "events.k8s.io"
COORDINATION_GROUP = "coordination.k8s.io"

# -- schema building blocks -------------------------------------------------------------------


def _described(schema: Schema, description: str | None) -> Schema:
    if description:
        schema["description"] = description
    return schema


def _string(description: str | None = None, **extra: Any) -> Schema:
    return _described({"type": "string", **extra}, description)


def _int32(description: str | None = None) -> Schema:
    return _described({"type": "integer", "format": "int32"}, description)


def _int64(description: str | None = None) -> Schema:
    return _described({"type": "integer", "format": "int64"}, description)


def _bool(description: str | None = None) -> Schema:
    return _described({"type": "boolean"}, description)


def _time(description: str | None = None) -> Schema:
    return _described({"type": "string", "format": "date-time"}, description)


def _array(items: Schema, description: str | None = None, **extra: Any) -> Schema:
    return _described({"type": "array", "items": items, **extra}, description)


def _object(
    properties: Mapping[str, Schema],
    description: str | None = None,
    *,
    required: Iterable[str] = (),
    **extra: Any,
) -> Schema:
    schema: Schema = {"type": "object", "properties": dict(properties), **extra}
    if required:
        schema["required"] = list(required)
    return _described(schema, description)


def _resource(
    kind_description: str, properties: Mapping[str, Schema], required: Iterable[str] = ()
) -> Schema:
    """A top-level kind: apiVersion, kind and metadata, then its own fields."""
    return _object(
        {
            "apiVersion": _string(
                "The versioned schema of this representation of an object; servers convert "
                "recognized schemas to the latest internal value."
            ),
            "kind": _string("The REST resource this object represents, in CamelCase."),
            "metadata": {"type": "object"},
            **properties,
        },
        kind_description,
        required=required,
    )


OBJECT_REFERENCE = _object(
    {
        "apiVersion": _string("API version of the referent."),
        "fieldPath": _string(
            "If referring to a piece of an object instead of an entire object, a JSON path "
            "within it, e.g. spec.containers{name}."
        ),
        "kind": _string("Kind of the referent."),
        "name": _string("Name of the referent."),
        "namespace": _string("Namespace of the referent."),
        "resourceVersion": _string("Specific resourceVersion to which this reference is made."),
        "uid": _string("UID of the referent."),
    },
    "ObjectReference contains enough information to let you inspect or modify the referred object.",
    **{"x-kubernetes-map-type": "atomic"},
)

EVENT_SOURCE = _object(
    {
        "component": _string("Component from which the event is generated."),
        "host": _string("Node name on which the event is generated."),
    },
    "EventSource contains information for an event.",
)

# -- Namespace --------------------------------------------------------------------------------

NAMESPACE_SCHEMA = _resource(
    "Namespace provides a scope for Names. Use of multiple namespaces is optional.",
    {
        "spec": _object(
            {
                "finalizers": _array(
                    _string(),
                    "Finalizers is an opaque list of values that must be empty to permanently "
                    "remove object from storage.",
                    **{"x-kubernetes-list-type": "atomic"},
                )
            },
            "Spec defines the behavior of the Namespace.",
        ),
        "status": _object(
            {
                "phase": _string(
                    "Phase is the current lifecycle phase of the namespace.",
                    enum=["Active", "Terminating"],
                ),
                "conditions": _array(
                    _object(
                        {
                            "type": _string("Type of namespace controller condition."),
                            "status": _string(
                                "Status of the condition, one of True, False, Unknown."
                            ),
                            "lastTransitionTime": _time(
                                "Last time the condition transitioned from one status to another."
                            ),
                            "reason": _string(
                                "Unique, one-word, CamelCase reason for the condition's last transition."
                            ),
                            "message": _string(
                                "Human-readable message indicating details about last transition."
                            ),
                        },
                        "NamespaceCondition contains details about state of namespace.",
                        required=["type", "status"],
                    ),
                    "Represents the latest available observations of a namespace's current state.",
                    **{"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["type"]},
                ),
            },
            "Status describes the current status of a Namespace.",
        ),
    },
)

# -- Events -----------------------------------------------------------------------------------

CORE_EVENT_SCHEMA = _resource(
    "Event is a report of an event somewhere in the cluster. Events have a limited retention "
    "time and triggers and messages may evolve with time.",
    {
        "involvedObject": _described(
            dict(OBJECT_REFERENCE), "The object that this event is about."
        ),
        "reason": _string(
            "This should be a short, machine understandable string that gives the reason for "
            "the transition into the object's current status."
        ),
        "message": _string("A human-readable description of the status of this operation."),
        "source": _described(dict(EVENT_SOURCE), "The component reporting this event."),
        "firstTimestamp": _time("The time at which the event was first recorded."),
        "lastTimestamp": _time(
            "The time at which the most recent occurrence of this event was recorded."
        ),
        "count": _int32("The number of times this event has occurred."),
        "type": _string(
            "Type of this event (Normal, Warning), new types could be added in the future."
        ),
        "eventTime": _time(
            "Time when this Event was first observed (MicroTime: six fractional digits)."
        ),
        "series": _object(
            {
                "count": _int32(
                    "Number of occurrences in this series up to the last heartbeat time."
                ),
                "lastObservedTime": _time("Time of the last occurrence observed (MicroTime)."),
            },
            "Data about the Event series this event represents or nil if it's a singleton Event.",
        ),
        "action": _string("What action was taken/failed regarding to the Regarding object."),
        "related": _described(
            dict(OBJECT_REFERENCE), "Optional secondary object for more complex actions."
        ),
        "reportingComponent": _string(
            "Name of the controller that emitted this Event, e.g. `kubernetes.io/kubelet`."
        ),
        "reportingInstance": _string("ID of the controller instance, e.g. `kubelet-xyzf`."),
    },
    required=["metadata", "involvedObject"],
)

EVENTS_V1_EVENT_SCHEMA = _resource(
    "Event is a report of an event somewhere in the cluster. It generally denotes some state "
    "change in the system. Events have a limited retention time and triggers and messages may "
    "evolve with time.",
    {
        "eventTime": _time(
            "eventTime is the time when this Event was first observed. It is required "
            "(MicroTime: six fractional digits)."
        ),
        "series": _object(
            {
                "count": _int32(
                    "count is the number of occurrences in this series up to the last heartbeat time."
                ),
                "lastObservedTime": _time(
                    "lastObservedTime is the time when last Event from the series was seen before last heartbeat."
                ),
            },
            "series is data about the Event series this event represents or nil if it's a singleton Event.",
            required=["count", "lastObservedTime"],
        ),
        "reportingController": _string(
            "reportingController is the name of the controller that emitted this Event, e.g. "
            "`kubernetes.io/kubelet`. This field cannot be empty for new Events."
        ),
        "reportingInstance": _string(
            "reportingInstance is the ID of the controller instance, e.g. `kubelet-xyzf`. This "
            "field cannot be empty for new Events and it can have at most 128 characters."
        ),
        "action": _string(
            "action is what action was taken/failed regarding to the regarding object. It is "
            "machine-readable. This field cannot be empty for new Events and it can have at "
            "most 128 characters."
        ),
        "reason": _string(
            "reason is why the action was taken. It is human-readable. This field cannot be "
            "empty for new Events and it can have at most 128 characters."
        ),
        "regarding": _described(
            dict(OBJECT_REFERENCE),
            "regarding contains the object this Event is about.",
        ),
        "related": _described(
            dict(OBJECT_REFERENCE),
            "related is the optional secondary object for more complex actions.",
        ),
        "note": _string(
            "note is a human-readable description of the status of this operation. Maximal "
            "length of the note is 1kB, but libraries should be prepared to handle values up "
            "to 64kB."
        ),
        "type": _string(
            "type is the type of this event (Normal, Warning), new types could be added in the "
            "future. It is machine-readable. This field cannot be empty for new Events."
        ),
        "deprecatedSource": _described(
            dict(EVENT_SOURCE),
            "deprecatedSource is the deprecated field assuring backward compatibility with "
            "core.v1 Event type.",
        ),
        "deprecatedFirstTimestamp": _time(
            "deprecatedFirstTimestamp is the deprecated field assuring backward compatibility "
            "with core.v1 Event type."
        ),
        "deprecatedLastTimestamp": _time(
            "deprecatedLastTimestamp is the deprecated field assuring backward compatibility "
            "with core.v1 Event type."
        ),
        "deprecatedCount": _int32(
            "deprecatedCount is the deprecated field assuring backward compatibility with "
            "core.v1 Event type."
        ),
    },
    required=["eventTime"],
)

# -- Lease ------------------------------------------------------------------------------------

LEASE_SCHEMA = _resource(
    "Lease defines a lease concept.",
    {
        "spec": _object(
            {
                "holderIdentity": _string(
                    "holderIdentity contains the identity of the holder of a current lease."
                ),
                "leaseDurationSeconds": _int32(
                    "leaseDurationSeconds is a duration that candidates for a lease need to wait "
                    "to force acquire it. This is measured against the time of last observed "
                    "renewTime."
                ),
                "acquireTime": _time(
                    "acquireTime is a time when the current lease was acquired "
                    "(MicroTime: exactly six fractional digits)."
                ),
                "renewTime": _time(
                    "renewTime is a time when the current holder of a lease has last updated "
                    "the lease (MicroTime: exactly six fractional digits)."
                ),
                "leaseTransitions": _int32(
                    "leaseTransitions is the number of transitions of a lease between holders."
                ),
                "strategy": _string(
                    "Strategy indicates the strategy for picking the leader for coordinated "
                    "leader election."
                ),
                "preferredHolder": _string(
                    "PreferredHolder signals to a lease holder that the lease has a more optimal "
                    "holder and should be given up. This field can only be set if Strategy is "
                    "also set."
                ),
            },
            "spec contains the specification of the Lease.",
        )
    },
)

CONFIG_MAP_SCHEMA = _resource(
    "ConfigMap holds configuration data for pods to consume.",
    {
        "data": _object(
            {},
            "Data contains the configuration data. Each key must consist of alphanumeric "
            "characters, '-', '_' or '.'.",
            additionalProperties={"type": "string"},
        ),
        "binaryData": _object(
            {},
            "BinaryData contains the binary data (base64 on the wire). Its keys must not also "
            "be keys of data.",
            additionalProperties={"type": "string", "format": "byte"},
        ),
        "immutable": _bool(
            "Immutable, if set to true, ensures that data stored in the ConfigMap cannot be "
            "updated (only object metadata can be modified)."
        ),
    },
)

# -- CustomResourceDefinition -----------------------------------------------------------------


def _names_schema(description: str) -> Schema:
    return _object(
        {
            "plural": _string(
                "plural is the plural name of the resource to serve. The custom resources are "
                "served under `/apis/<group>/<version>/.../<plural>`. Must be all lowercase."
            ),
            "singular": _string(
                "singular is the singular name of the resource. It must be all lowercase. Defaults to lowercased "
                "`kind`."
            ),
            "shortNames": _array(
                _string(),
                "shortNames are short names for the resource, exposed in API discovery "
                "documents, and used by clients to support invocations like `kubectl get "
                "<shortname>`. It must be all lowercase.",
                **{"x-kubernetes-list-type": "atomic"},
            ),
            "kind": _string(
                "kind is the serialized kind of the resource. It is normally CamelCase and singular."
            ),
            "listKind": _string(
                'listKind is the serialized kind of the list for this resource. Defaults to "`kind`List".'
            ),
            "categories": _array(
                _string(),
                "categories is a list of grouped resources this custom resource belongs to "
                "(e.g. 'all'). This is published in API discovery documents, and used by "
                "clients to support invocations like `kubectl get all`.",
                **{"x-kubernetes-list-type": "atomic"},
            ),
        },
        description,
        required=["plural", "kind"],
    )


CRD_SCHEMA = _resource(
    "CustomResourceDefinition represents a resource that should be exposed on the API server. "
    "Its name MUST be in the format <.spec.name>.<.spec.group>.",
    {
        "spec": _object(
            {
                "group": _string(
                    "group is the API group of the defined custom resource. The custom "
                    "resources are served under `/apis/<group>/...`. Must match the name of the "
                    "CustomResourceDefinition (in the form `<names.plural>.<group>`)."
                ),
                "names": _names_schema(
                    "names specify the resource and kind names for the custom resource."
                ),
                "scope": _string(
                    "scope indicates whether the defined custom resource is cluster- or "
                    "namespace-scoped. Allowed values are `Cluster` and `Namespaced`."
                ),
                "versions": _array(
                    _object(
                        {
                            "name": _string(
                                "name is the version name, e.g. \u201cv1\u201d, \u201cv2beta1\u201d, etc. The custom "
                                "resources are served under this version at `/apis/<group>/<version>/...` "
                                "if `served` is true."
                            ),
                            "served": _bool(
                                "served is a flag enabling/disabling this version from being served via REST APIs"
                            ),
                            "storage": _bool(
                                "storage indicates this version should be used when persisting custom "
                                "resources to storage. There must be exactly one version with storage=true."
                            ),
                            "deprecated": _bool(
                                "deprecated indicates this version of the custom resource API is deprecated."
                            ),
                            "deprecationWarning": _string(
                                "deprecationWarning overrides the default warning returned to API clients. "
                                "May only be set when `deprecated` is true."
                            ),
                            "schema": _object(
                                {
                                    "openAPIV3Schema": _described(
                                        {
                                            "type": "object",
                                            "x-kubernetes-preserve-unknown-fields": True,
                                        },
                                        "openAPIV3Schema is the OpenAPI v3 schema to use for "
                                        "validation and pruning.",
                                    )
                                },
                                "schema describes the schema used for validation, pruning, and "
                                "defaulting of this version of the custom resource.",
                            ),
                            "subresources": _object(
                                {
                                    "status": _object(
                                        {},
                                        "status indicates the custom resource should serve a "
                                        "`/status` subresource. When enabled, requests to the custom "
                                        "resource primary endpoint ignore changes to the `status` "
                                        "stanza of the object; requests to the `/status` "
                                        "subresource ignore changes to anything other than the "
                                        "`status` stanza of the object.",
                                    ),
                                    "scale": _object(
                                        {
                                            "specReplicasPath": _string(
                                                "specReplicasPath defines the JSON path inside of a custom resource "
                                                "that corresponds to Scale `spec.replicas`."
                                            ),
                                            "statusReplicasPath": _string(
                                                "statusReplicasPath defines the JSON path inside of a custom resource "
                                                "that corresponds to Scale `status.replicas`."
                                            ),
                                            "labelSelectorPath": _string(
                                                "labelSelectorPath defines the JSON path inside of a custom resource "
                                                "that corresponds to Scale `status.selector`."
                                            ),
                                        },
                                        "scale indicates the custom resource should serve a "
                                        "`/scale` subresource that returns an "
                                        "`autoscaling/v1` Scale object.",
                                        required=["specReplicasPath", "statusReplicasPath"],
                                    ),
                                },
                                "subresources specify what subresources this version of the "
                                "defined custom resource have.",
                            ),
                            "additionalPrinterColumns": _array(
                                _object(
                                    {
                                        "name": _string(
                                            "name is a human readable name for the column."
                                        ),
                                        "type": _string(
                                            "type is an OpenAPI type definition for this column: "
                                            "integer, number, string, boolean or date."
                                        ),
                                        "format": _string(
                                            "format is an optional OpenAPI type definition for this column. The "
                                            "'name' format is applied to the primary identifier column to assist in "
                                            "clients identifying column is the resource name."
                                        ),
                                        "description": _string(
                                            "description is a human readable description of this column."
                                        ),
                                        "priority": _int32(
                                            "priority is an integer defining the relative importance "
                                            "of this column compared to others. Lower numbers are "
                                            "considered higher priority. Columns that may be omitted in "
                                            "limited space scenarios should be given a priority greater "
                                            "than 0."
                                        ),
                                        "jsonPath": _string(
                                            "jsonPath is a simple JSON path (i.e. with array notation) "
                                            "which is evaluated against each custom resource to produce "
                                            "the value for this column."
                                        ),
                                    },
                                    "CustomResourceColumnDefinition specifies a column for server side printing.",
                                    required=["name", "type", "jsonPath"],
                                ),
                                "additionalPrinterColumns specifies additional columns returned in "
                                "Table output. If no columns are specified, a single column "
                                "displaying the age of the custom resource is used.",
                                **{"x-kubernetes-list-type": "atomic"},
                            ),
                            "selectableFields": _array(
                                _object(
                                    {
                                        "jsonPath": _string(
                                            "jsonPath is a simple JSON path which is evaluated against each custom "
                                            "resource to produce a field selector value."
                                        )
                                    },
                                    "SelectableField specifies the JSON path of a field that may be used with field "
                                    "selectors.",
                                    required=["jsonPath"],
                                ),
                                "selectableFields specifies paths to fields that may be used as field selectors.",
                                **{"x-kubernetes-list-type": "atomic"},
                            ),
                        },
                        "CustomResourceDefinitionVersion describes a version for CRD.",
                        required=["name", "served", "storage"],
                    ),
                    "versions is the list of all API versions of the defined custom resource. "
                    "Version names are used to compute the order in which served versions are "
                    "listed in API discovery.",
                    **{"x-kubernetes-list-type": "atomic"},
                ),
                "conversion": _object(
                    {
                        "strategy": _string(
                            "strategy specifies how custom resources are converted between "
                            'versions. Allowed values are: - `"None"` and `"Webhook"`.'
                        ),
                        "webhook": _described(
                            {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
                            "webhook describes how to call the conversion webhook. Required when "
                            '`strategy` is set to `"Webhook"`.',
                        ),
                    },
                    "conversion defines conversion settings for the CRD.",
                    required=["strategy"],
                    default={"strategy": "None"},
                ),
                "preserveUnknownFields": _bool(
                    "preserveUnknownFields indicates that object fields which are not specified "
                    "in the OpenAPI schema should be preserved when persisting to storage."
                ),
            },
            "spec describes how the user wants the resources to appear",
            required=["group", "names", "scope", "versions"],
        ),
        "status": _object(
            {
                "conditions": _array(
                    _object(
                        {
                            "type": _string(
                                "type is the type of the condition. Types include Established, NamesAccepted and "
                                "Terminating."
                            ),
                            "status": _string(
                                "status is the status of the condition. Can be True, False, Unknown."
                            ),
                            "lastTransitionTime": _time(
                                "lastTransitionTime last time the condition transitioned from one status to another."
                            ),
                            "reason": _string(
                                "reason is a unique, one-word, CamelCase reason for the condition's last transition."
                            ),
                            "message": _string(
                                "message is a human-readable message indicating details about last transition."
                            ),
                            "observedGeneration": _int64(
                                "observedGeneration represents the .metadata.generation that the condition was set "
                                "based upon."
                            ),
                        },
                        "CustomResourceDefinitionCondition contains details for the current condition of this pod.",
                        required=["type", "status"],
                    ),
                    "conditions indicate state for particular aspects of a CustomResourceDefinition",
                    **{"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["type"]},
                ),
                "acceptedNames": _names_schema(
                    "acceptedNames are the names that are actually being used to serve discovery. "
                    "They may be different than the names in spec."
                ),
                "storedVersions": _array(
                    _string(),
                    "storedVersions lists all versions of CustomResources that were ever persisted.",
                    **{"x-kubernetes-list-type": "atomic"},
                ),
            },
            "status indicates the actual state of the CustomResourceDefinition",
        ),
    },
    required=["spec"],
)

# -- printer columns --------------------------------------------------------------------------
# A column is a CRD-style additionalPrinterColumn; built-in kinds may instead give "cell", a
# function of (object, now) whose result is the cell as it is, as the API server's own
# printers compute it (kube-apiserver's printers for these kinds are Go functions, not paths).

Cell = Callable[[Mapping[str, Any], datetime], Any]


def _column(name: str, description: str, cell: Cell, *, priority: int = 0, **extra: Any) -> Object:
    column: Object = {"name": name, "type": "string", "description": description, "cell": cell}
    if priority:
        column["priority"] = priority
    column.update(extra)
    return column


def _age_column() -> Object:
    return _column(
        "Age",
        "CreationTimestamp is a timestamp representing the server time when this object was created.",
        lambda obj, now: ages.age(nested(obj, "metadata", "creationTimestamp"), now),
    )


def _event_times(event: Mapping[str, Any], now: datetime) -> tuple[str, str, int]:
    """(last seen, first seen, count) as kubectl's event printer works them out."""
    first = ages.age(event.get("firstTimestamp"), now)
    if not event.get("firstTimestamp"):
        first = ages.age(event.get("eventTime"), now)
    last = ages.age(event.get("lastTimestamp"), now) if event.get("lastTimestamp") else first
    count = event.get("count") or 0
    series = event.get("series")
    if isinstance(series, Mapping):
        last = ages.age(series.get("lastObservedTime"), now)
        count = series.get("count") or 0
    elif not count:
        count = 1  # singleton events of the new API have no count
    return last, first, int(count)


def _event_object(event: Mapping[str, Any]) -> str:
    kind = str(nested(event, "involvedObject", "kind") or "").lower()
    name = nested(event, "involvedObject", "name")
    return f"{kind}/{name}" if name else kind


def _event_source(event: Mapping[str, Any]) -> str:
    component = nested(event, "source", "component") or event.get("reportingComponent") or ""
    instance = nested(event, "source", "host") or event.get("reportingInstance") or ""
    return f"{component}, {instance}" if instance else component


def _event_columns(to_core: Callable[[Mapping[str, Any]], Mapping[str, Any]]) -> tuple[Object, ...]:
    def cell(fn: Callable[[Mapping[str, Any], datetime], Any]) -> Cell:
        return lambda obj, now: fn(to_core(obj), now)

    return (
        _column(
            "Last Seen",
            "The time at which the most recent occurrence of this event was recorded.",
            cell(lambda e, now: _event_times(e, now)[0]),
        ),
        _column(
            "Type", "Type of this event (Normal, Warning).", cell(lambda e, _: e.get("type", ""))
        ),
        _column(
            "Reason",
            "A short, machine understandable reason.",
            cell(lambda e, _: e.get("reason", "")),
        ),
        _column(
            "Object", "The object that this event is about.", cell(lambda e, _: _event_object(e))
        ),
        _column(
            "Subobject",
            "The piece of the object the event is about, as a field path.",
            cell(lambda e, _: nested(e, "involvedObject", "fieldPath") or ""),
            priority=1,
        ),
        _column(
            "Source",
            "The component reporting this event.",
            cell(lambda e, _: _event_source(e)),
            priority=1,
        ),
        _column(
            "Message",
            "A human-readable description of the status of this operation.",
            cell(lambda e, _: str(e.get("message") or "").strip()),
        ),
        _column(
            "First Seen",
            "The time at which the event was first recorded.",
            cell(lambda e, now: _event_times(e, now)[1]),
            priority=1,
        ),
        _column(
            "Count",
            "The number of times this event has occurred.",
            cell(lambda e, now: _event_times(e, now)[2]),
            priority=1,
        ),
        _column(
            "Name",
            "Name must be unique within a namespace.",
            cell(lambda e, _: nested(e, "metadata", "name") or ""),
            priority=1,
            format="name",
        ),
    )


def _identity(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    return obj


# -- the resources ----------------------------------------------------------------------------

NAMESPACE = ResourceType(
    group=CORE,
    version="v1",
    kind="Namespace",
    plural="namespaces",
    singular="namespace",
    namespaced=False,
    short_names=("ns",),
    status_subresource=True,
    schema=NAMESPACE_SCHEMA,
    printer_columns=(
        {
            "name": "Status",
            "type": "string",
            "description": "The status of the namespace",
            "jsonPath": ".status.phase",
        },
        _age_column(),
    ),
)

EVENT = ResourceType(
    group=CORE,
    version="v1",
    kind="Event",
    plural="events",
    singular="event",
    namespaced=True,
    short_names=("ev",),
    schema=CORE_EVENT_SCHEMA,
    printer_columns=_event_columns(_identity),
)

EVENTS_V1_EVENT = ResourceType(
    group=EVENTS_GROUP,
    version="v1",
    kind="Event",
    plural="events",
    singular="event",
    namespaced=True,
    short_names=("ev",),
    schema=EVENTS_V1_EVENT_SCHEMA,
    printer_columns=_event_columns(events_api.to_core),
    store_kind="Event",
)

LEASE = ResourceType(
    group=COORDINATION_GROUP,
    version="v1",
    kind="Lease",
    plural="leases",
    singular="lease",
    namespaced=True,
    schema=LEASE_SCHEMA,
    printer_columns=(
        {
            "name": "Holder",
            "type": "string",
            "description": "The holder of a lease",
            "jsonPath": ".spec.holderIdentity",
        },
        _age_column(),
    ),
)

CONFIG_MAP = ResourceType(
    group=CORE,
    version="v1",
    kind="ConfigMap",
    plural="configmaps",
    singular="configmap",
    namespaced=True,
    short_names=("cm",),
    schema=CONFIG_MAP_SCHEMA,
    printer_columns=(
        _column(
            "Data",
            "The number of keys of data and binaryData.",
            lambda obj, _: len(obj.get("data") or {}) + len(obj.get("binaryData") or {}),
            type="integer",
        ),
        _age_column(),
    ),
)

CUSTOM_RESOURCE_DEFINITION = ResourceType(
    group=crd_types.CRD_GROUP,
    version=crd_types.CRD_VERSION,
    kind=crd_types.CRD_KIND,
    plural=crd_types.CRD_PLURAL,
    singular="customresourcedefinition",
    namespaced=False,
    short_names=("crd", "crds"),
    categories=("api-extensions",),
    status_subresource=True,
    schema=CRD_SCHEMA,
    printer_columns=(
        # The API server's default table for kinds without printers: the time itself, not an age.
        _column(
            "Created At",
            "CreationTimestamp is a timestamp representing the server time when this object was created.",
            lambda obj, _: crd_types.created_at(obj),
            type="date",
        ),
    ),
)

BUILTIN_RESOURCES: tuple[ResourceType, ...] = (
    NAMESPACE,
    EVENT,
    EVENTS_V1_EVENT,
    LEASE,
    CONFIG_MAP,
    CUSTOM_RESOURCE_DEFINITION,
)


def is_builtin(resource: ResourceType) -> bool:
    """A kind compiled into the API server (these take strategic merge patches, as kubectl
    sends for them), not one a CRD defines."""
    return any(
        resource.group == b.group and resource.version == b.version and resource.kind == b.kind
        for b in BUILTIN_RESOURCES
    )


def conversions() -> dict[tuple[str, str], events_api.EventConversion]:
    """Served resources kept in another form: (apiVersion, kind) -> to/from storage."""
    return {(EVENTS_V1_EVENT.api_version, EVENTS_V1_EVENT.kind): events_api.EventConversion()}


def storage_defaults() -> dict[str, Callable[[Object], Object]]:
    """Defaulting applied to every object read from the store, by stored kind (the API server's
    defaulters run when it decodes what storage holds, as when it decodes a request)."""
    return {"Namespace": default_namespace}


def default_namespace(obj: Object) -> Object:
    """SetDefaults_NamespaceStatus: a Namespace without a phase is Active. The store keeps no
    status on create (Namespaces have a status subresource), so every new one has none."""
    status = obj.get("status") or {}
    if status.get("phase"):
        return obj
    return {**obj, "status": {**status, "phase": "Active"}}


def namespace_object(name: str) -> Object:
    return {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {"name": name},
        "spec": {},
        "status": {"phase": "Active"},
    }


# -- decoding (400) ---------------------------------------------------------------------------

# Go type names where the JSON decoder names them in its errors; the rest follow the schema.
_GO_TYPES: dict[tuple[str, str], dict[str, str]] = {
    (CORE, "Namespace"): {
        "": "v1.Namespace",
        "spec": "v1.NamespaceSpec",
        "spec.finalizers[]": "v1.FinalizerName",
        "status": "v1.NamespaceStatus",
        "status.phase": "v1.NamespacePhase",
        "status.conditions[]": "v1.NamespaceCondition",
        "status.conditions.type": "v1.NamespaceConditionType",
        "status.conditions.status": "v1.ConditionStatus",
    },
    (CORE, "Event"): {
        "": "v1.Event",
        "involvedObject": "v1.ObjectReference",
        "related": "v1.ObjectReference",
        "source": "v1.EventSource",
        "series": "v1.EventSeries",
    },
    (EVENTS_GROUP, "Event"): {
        "": "v1.Event",
        "regarding": "v1.ObjectReference",
        "related": "v1.ObjectReference",
        "deprecatedSource": "v1.EventSource",
        "series": "v1.EventSeries",
    },
    (COORDINATION_GROUP, "Lease"): {
        "": "v1.Lease",
        "spec": "v1.LeaseSpec",
        "spec.strategy": "v1.CoordinatedLeaseStrategy",
    },
}

_MICRO_TIMES: dict[tuple[str, str], frozenset[str]] = {
    (CORE, "Event"): frozenset({"eventTime", "series.lastObservedTime"}),
    (EVENTS_GROUP, "Event"): frozenset({"eventTime", "series.lastObservedTime"}),
    (COORDINATION_GROUP, "Lease"): frozenset({"spec.acquireTime", "spec.renewTime"}),
}


class _Decoder:
    """Walks a body as Go's JSON decoder walks it into the typed object, and finds the error it
    would stop at: the first unparsable timestamp (its Unmarshaler fails the decode at once),
    else the first value of the wrong JSON type (the decoder notes it and carries on)."""

    def __init__(self, resource: ResourceType) -> None:
        key = (resource.group, resource.kind)
        self.go_types = _GO_TYPES.get(key, {})
        self.micro_times = _MICRO_TIMES.get(key, frozenset())
        self.type_error: str | None = None

    def decode(self, obj: Any, schema: Mapping[str, Any]) -> str | None:
        time_error = self._value(obj, schema, "", self.go_types.get("", "").split(".")[-1])
        return time_error or self.type_error

    def _go_type(self, schema: Mapping[str, Any], path: str, item: bool = False) -> str:
        named = self.go_types.get(path + "[]" if item else path)
        if named:
            return named
        kind = schema.get("type")
        if kind == "string":
            return "string"
        if kind == "boolean":
            return "bool"
        if kind == "number":
            return "float64"
        if kind == "integer":
            return "int32" if schema.get("format") == "int32" else "int64"
        if kind == "array":
            return "[]" + self._go_type(schema.get("items", {}), path, item=True)
        if kind == "object" and isinstance(schema.get("additionalProperties"), Mapping):
            return "map[string]" + self._go_type(schema["additionalProperties"], path + "{}")
        return "map[string]interface {}"

    def _mismatch(self, value: Any, go_type: str, path: str, struct: str) -> None:
        if self.type_error is not None:
            return
        if isinstance(value, bool):
            found = "bool"
        elif isinstance(value, int | float):
            found = "number"
        elif isinstance(value, str):
            found = "string"
        elif isinstance(value, list):
            found = "array"
        else:
            found = "object"
        self.type_error = (
            f"json: cannot unmarshal {found} into Go struct field {struct}.{path} of type {go_type}"
        )

    def _value(self, value: Any, schema: Mapping[str, Any], path: str, struct: str) -> str | None:
        if value is None or schema.get("x-kubernetes-preserve-unknown-fields"):
            return None
        kind = schema.get("type")
        if schema.get("format") == "date-time" and kind == "string":
            if not isinstance(value, str):
                return f"json: cannot unmarshal {_json_kind(value)} into Go value of type string"
            layout = gotime.RFC3339_MICRO if path in self.micro_times else gotime.RFC3339
            return gotime.parse_error(value, layout)
        if kind == "string":
            if not isinstance(value, str):
                self._mismatch(value, self._go_type(schema, path), path, struct)
        elif kind == "boolean":
            if not isinstance(value, bool):
                self._mismatch(value, "bool", path, struct)
        elif kind in ("integer", "number"):
            self._number(value, schema, path, struct)
        elif kind == "array":
            if not isinstance(value, list):
                self._mismatch(value, self._go_type(schema, path), path, struct)
                return None
            for item in value:
                found = self._value(item, schema.get("items", {}), path, struct)
                if found:
                    return found
        elif kind == "object":
            if not isinstance(value, Mapping):
                self._mismatch(value, self._go_type(schema, path), path, struct)
                return None
            properties = schema.get("properties")
            inner = self.go_types.get(path, "").split(".")[-1] or struct
            for key, child in value.items():
                child_path = f"{path}.{key}" if path else key
                if isinstance(properties, Mapping) and key in properties:
                    found = self._value(child, properties[key], child_path, inner)
                elif isinstance(schema.get("additionalProperties"), Mapping):
                    found = self._value(child, schema["additionalProperties"], path, inner)
                else:
                    found = None
                if found:
                    return found
        return None

    def _number(self, value: Any, schema: Mapping[str, Any], path: str, struct: str) -> None:
        go_type = self._go_type(schema, path)
        if isinstance(value, bool) or not isinstance(value, int | float):
            self._mismatch(value, go_type, path, struct)
            return
        if schema.get("type") == "number":
            return
        bits = 32 if go_type == "int32" else 64
        out_of_range = isinstance(value, float) or not -(2 ** (bits - 1)) <= value < 2 ** (bits - 1)
        if out_of_range and self.type_error is None:
            self.type_error = (
                f"json: cannot unmarshal number {value!r} into Go struct field "
                f"{struct}.{path} of type {go_type}"
            )


def _json_kind(value: Any) -> str:
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, list):
        return "array"
    if isinstance(value, Mapping):
        return "object"
    return "string"


def decode_error(resource: ResourceType, obj: Mapping[str, Any]) -> str | None:
    """Why the API server could not decode ``obj`` into the built-in kind (Go's words), or
    None. Kinds a CRD defines decode into unstructured objects and never fail here."""
    if not is_builtin(resource) or resource.schema is None:
        return None
    return _Decoder(resource).decode(obj, resource.schema)


def decode_failure(resource: ResourceType, obj: Mapping[str, Any]) -> ApiError | None:
    """The 400 the API server answers a create or update whose body does not decode:
    ``Lease in version "v1" cannot be handled as a Lease: parsing time ...``."""
    error = decode_error(resource, obj)
    if error is None:
        return None
    message = (
        f"{resource.kind} in version {go_quote(resource.version)} cannot be "
        f"handled as a {resource.kind}: {error}"
    )
    return ApiError(400, Reason.BAD_REQUEST, message)


# -- validation (422) -------------------------------------------------------------------------

_STANDARD_FINALIZERS = frozenset({"kubernetes", "orphan", "foregroundDeletion"})


def _namespace_causes(obj: Mapping[str, Any]) -> list[Cause]:
    causes: list[Cause] = []
    for finalizer in nested(obj, "spec", "finalizers") or []:
        if not isinstance(finalizer, str):
            continue
        for message in name_rules.qualified_name_errors(finalizer):
            causes.append(fe.invalid("spec.finalizers", finalizer, message))
        if "/" not in finalizer and finalizer not in _STANDARD_FINALIZERS:
            causes.append(
                fe.invalid(
                    "spec.finalizers",
                    finalizer,
                    "name is neither a standard finalizer name nor is it fully qualified",
                )
            )
    return causes


def _lease_causes(obj: Mapping[str, Any]) -> list[Cause]:
    causes: list[Cause] = []
    spec = obj.get("spec") if isinstance(obj.get("spec"), Mapping) else {}
    assert isinstance(spec, Mapping)
    duration = spec.get("leaseDurationSeconds")
    if isinstance(duration, int) and duration <= 0:
        causes.append(fe.invalid("spec.leaseDurationSeconds", duration, "must be greater than 0"))
    transitions = spec.get("leaseTransitions")
    if isinstance(transitions, int) and transitions < 0:
        causes.append(
            fe.invalid("spec.leaseTransitions", transitions, "must be greater than or equal to 0")
        )
    strategy = spec.get("strategy")
    if isinstance(strategy, str) and strategy:
        if "/" not in strategy:
            if strategy != "OldestEmulationVersion":
                causes.append(
                    fe.not_supported("spec.strategy.strategy", strategy, ["OldestEmulationVersion"])
                )
        else:
            causes.extend(
                fe.invalid("spec.strategy.strategy", strategy, message)
                for message in name_rules.qualified_name_errors(strategy)
            )
    if spec.get("preferredHolder") and not strategy:
        causes.append(
            fe.forbidden("spec.preferredHolder", "may only be specified if `strategy` is defined")
        )
    return causes


# What the API server allows of a ConfigMap: keys of [-._a-zA-Z0-9], at most 253 long and
# not "." or "..", never in both data and binaryData, 1 MiB of data in all; and once immutable,
# neither its data nor that flag changes.
_CONFIG_KEY = re.compile(r"[-._a-zA-Z0-9]+")
_CONFIG_KEY_MESSAGE = (
    "a valid config key must consist of alphanumeric characters, '-', '_' or '.' (e.g. "
    "'key.name',  or 'KEY_NAME',  or 'key-name', regex used for validation is "
    "'[-._a-zA-Z0-9]+')"
)
_CONFIG_MAP_MAX_BYTES = 1024 * 1024


def _config_map_causes(obj: Mapping[str, Any], old: Mapping[str, Any] | None) -> list[Cause]:
    causes: list[Cause] = []
    data = obj.get("data") if isinstance(obj.get("data"), Mapping) else {}
    binary = obj.get("binaryData") if isinstance(obj.get("binaryData"), Mapping) else {}
    assert isinstance(data, Mapping) and isinstance(binary, Mapping)
    size = 0
    for field, values in (("data", data), ("binaryData", binary)):
        for key, value in values.items():
            path = fe.key(field, key)
            if len(key) > 253:
                causes.append(fe.too_long(path, 253))
            if key in (".", "..") or not _CONFIG_KEY.fullmatch(key):
                causes.append(fe.invalid(path, key, _CONFIG_KEY_MESSAGE))
            if field == "binaryData" and key in data:
                causes.append(fe.invalid(path, key, "duplicate of key present in data"))
            size += len(key) + _byte_length(value)
    if size > _CONFIG_MAP_MAX_BYTES:
        causes.append(fe.too_long("[]", _CONFIG_MAP_MAX_BYTES))  # the API server's empty path
    if old is not None and old.get("immutable") is True:
        if obj.get("immutable") is not True:
            causes.append(fe.forbidden("immutable", "field is immutable when `immutable` is set"))
        if data != (old.get("data") or {}) or binary != (old.get("binaryData") or {}):
            causes.append(fe.forbidden("data", "field is immutable when `immutable` is set"))
    return causes


def _byte_length(value: Any) -> int:
    return len(value.encode()) if isinstance(value, str) else 0


def _legacy_event_causes(event: Mapping[str, Any]) -> list[Cause]:
    causes: list[Cause] = []
    namespace = nested(event, "metadata", "namespace") or ""
    involved = nested(event, "involvedObject", "namespace") or ""
    if not event.get("eventTime"):
        if not involved:
            if namespace not in ("", "default"):
                causes.append(
                    fe.invalid(
                        "involvedObject.namespace", involved, "does not match event.namespace"
                    )
                )
        elif namespace != involved:
            causes.append(
                fe.invalid("involvedObject.namespace", involved, "does not match event.namespace")
            )
    else:
        if not involved and namespace not in ("default", "kube-system"):
            causes.append(
                fe.invalid("involvedObject.namespace", involved, "does not match event.namespace")
            )
        controller = event.get("reportingComponent") or ""
        if not controller:
            causes.append(fe.required("reportingController"))
        causes.extend(
            fe.invalid("reportingController", controller, message)
            for message in name_rules.qualified_name_errors(controller)
        )
        for name, limit in (("reportingInstance", 128), ("action", 128), ("reason", 128)):
            value = event.get(name) or ""
            if not value:
                causes.append(fe.required(name))
            if _byte_length(value) > limit:
                causes.append(fe.invalid(name, "", f"can have at most {limit} characters"))
        if _byte_length(event.get("message")) > 1024:
            causes.append(fe.invalid("message", "", "can have at most 1024 characters"))
    causes.extend(
        fe.invalid("namespace", namespace, message)
        for message in name_rules.dns1123_subdomain_errors(namespace)
    )
    return causes


def _series_causes(event: Mapping[str, Any]) -> list[Cause]:
    series = event.get("series")
    if not isinstance(series, Mapping):
        return []
    causes: list[Cause] = []
    if (series.get("count") or 0) < 2:
        causes.append(fe.invalid("series.count", "", "should be at least 2"))
    if not series.get("lastObservedTime"):
        causes.append(fe.required("series.lastObservedTime"))
    return causes


def _events_v1_causes(event: Mapping[str, Any]) -> list[Cause]:
    """What events.k8s.io/v1 adds on create (fields named as in core/v1, as the API server
    names them: it validates the stored form)."""
    causes = _series_causes(event)
    if not event.get("eventTime"):
        causes.append(fe.required("eventTime"))
    if event.get("type") not in ("Normal", "Warning"):
        causes.append(fe.invalid("type", "", f"has invalid value: {event.get('type') or ''}"))
    for name in ("firstTimestamp", "lastTimestamp", "count"):
        if event.get(name):
            causes.append(fe.invalid(name, "", "needs to be unset"))
    if nested(event, "source", "component") or nested(event, "source", "host"):
        causes.append(fe.invalid("source", "", "needs to be unset"))
    return causes


_EVENT_IMMUTABLE = (
    ("involvedObject", "involvedObject"),
    ("reason", "reason"),
    ("message", "message"),
    ("source", "source"),
    ("firstTimestamp", "firstTimestamp"),
    ("lastTimestamp", "lastTimestamp"),
    ("count", "count"),
    ("type", "type"),
    ("eventTime", "eventTime"),
    ("action", "action"),
    ("related", "related"),
    ("reportingController", "reportingComponent"),
    ("reportingInstance", "reportingInstance"),
)


def _event_update_causes(new: Mapping[str, Any], old: Mapping[str, Any]) -> list[Cause]:
    causes: list[Cause] = []
    if new.get("series") != old.get("series"):
        causes.extend(_series_causes(new))
    for field, key in _EVENT_IMMUTABLE:
        if (new.get(key) or None) != (old.get(key) or None):
            causes.append(fe.invalid(field, new.get(key), "field is immutable"))
    return causes


def event_causes(
    resource: ResourceType, obj: Mapping[str, Any], old: Mapping[str, Any] | None
) -> list[Cause]:
    """Event validation: the legacy rules for both APIs; events.k8s.io/v1 is stricter."""
    core = events_api.normalize_core(obj) if resource.group == CORE else events_api.to_core(obj)
    causes = _legacy_event_causes(core)
    if resource.group != EVENTS_GROUP:
        return causes
    if old is None:
        return causes + _events_v1_causes(core)
    return causes + _event_update_causes(core, events_api.to_core(old))


def admission_causes(
    resource: ResourceType, obj: Mapping[str, Any], old: Mapping[str, Any] | None
) -> list[Cause]:
    """What the API server's own validation of a built-in kind finds wrong (422 Invalid);
    empty for kinds CRDs define. Raises the 400 :func:`decode_failure` first when the body
    would not even decode."""
    if not is_builtin(resource):
        return []
    failure = decode_failure(resource, obj)
    if failure is not None:
        raise failure
    if resource.kind == "Namespace":
        return _namespace_causes(obj)
    if resource.kind == "Lease":
        return _lease_causes(obj)
    if resource.kind == "ConfigMap":
        return _config_map_causes(obj, old)
    if resource.kind == "Event":
        return event_causes(resource, obj, old)
    if resource.kind == crd_types.CRD_KIND:
        if old is None:
            return crd_types.validate(obj)
        return crd_types.validate_update(obj, old)
    return []
