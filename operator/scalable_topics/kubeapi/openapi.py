"""The OpenAPI documents: ``/openapi/v2`` (Swagger 2.0, every kind) and ``/openapi/v3`` (an index
of one document per group-version).

kubectl reads the v3 documents: ``kubectl explain`` finds the resource's path
(``/apis/<g>/<v>/namespaces/{namespace}/<plural>``), takes the kind from its operations'
``x-kubernetes-group-version-kind`` and shows the ``components.schemas`` entry whose own
``x-kubernetes-group-version-kind`` lists that kind, following ``$ref``s. ``kubectl apply``
(and create, replace, edit) leaves validation to the server, sending ``fieldValidation=Strict``,
only when the PATCH operation of the kind's item path lists a ``fieldValidation`` query
parameter; otherwise (a kind no CRD defines, a ``kind: List``) it validates client-side against
``/openapi/v2``, which it asks for in protobuf only (see openapi_protobuf). And it builds a
strategic merge patch only for kinds whose PATCH accepts
``application/strategic-merge-patch+json`` (the built-in ones; kinds CRDs define get JSON merge
patches).

Definitions are named as the API server names them: ``io.k8s.api.coordination.v1.Lease``,
``dev.scalabletopics.v1alpha1.ScalableTopic`` (the group reversed), with the
``io.k8s.apimachinery.pkg.apis.meta.v1`` types they reference.
"""

from __future__ import annotations

import copy
import functools
import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from . import openapi_protobuf
from .discovery import groups
from .resources import ResourceType
from .tables import not_acceptable, parse_accept

Object = dict[str, Any]
JSON = "application/json"
V2_PROTOBUF = "application/com.github.proto-openapi.spec.v2.v1.0+protobuf"

META = "io.k8s.apimachinery.pkg.apis.meta.v1"
_BUILTIN_PACKAGES = {
    "": "io.k8s.api.core",
    "events.k8s.io": "io.k8s.api.events",
    "coordination.k8s.io": "io.k8s.api.coordination",
    "apiextensions.k8s.io": "io.k8s.apiextensions-apiserver.pkg.apis.apiextensions",
}
_REF = "x-ref"  # a reference to another definition, written out as v2 or v3 wants it

PATCH_TYPES = (
    "application/apply-patch+yaml",
    "application/json-patch+json",
    "application/merge-patch+json",
)
STRATEGIC_MERGE_PATCH = "application/strategic-merge-patch+json"


def definition_name(resource: ResourceType, kind: str | None = None) -> str:
    package = _BUILTIN_PACKAGES.get(resource.group)
    if package is None:
        package = ".".join(reversed(resource.group.split(".")))
    return f"{package}.{resource.version}.{kind or resource.kind}"


def _ref(name: str, description: str | None = None, **extra: Any) -> Object:
    schema: Object = {_REF: name, **extra}
    if description:
        schema["description"] = description
    return schema


def _meta(name: str) -> str:
    return f"{META}.{name}"


def _string(description: str, **extra: Any) -> Object:
    return {"type": "string", "description": description, **extra}


def _strings(description: str, **extra: Any) -> Object:
    return {
        "type": "array",
        "items": {"type": "string", "default": ""},
        "description": description,
        **extra,
    }


# -- io.k8s.apimachinery meta types -------------------------------------------------------------

META_DEFINITIONS: dict[str, Object] = {
    _meta("Time"): {
        "type": "string",
        "format": "date-time",
        "description": "Time is a wrapper around time.Time which supports correct marshaling to "
        "YAML and JSON: RFC 3339, to the second.",
    },
    _meta("MicroTime"): {
        "type": "string",
        "format": "date-time",
        "description": "MicroTime is version of Time with microsecond level precision: exactly "
        "six fractional digits.",
    },
    _meta("FieldsV1"): {
        "type": "object",
        "description": "FieldsV1 stores a set of fields in a data structure like a Trie, in JSON format.",
    },
    _meta("ManagedFieldsEntry"): {
        "type": "object",
        "description": "ManagedFieldsEntry is a workflow-id, a FieldSet and the group version of "
        "the resource that the fieldset applies to.",
        "properties": {
            "apiVersion": _string(
                "APIVersion defines the version of this resource that this field set applies to."
            ),
            "fieldsType": _string(
                "FieldsType is the discriminator for the different fields format and version."
            ),
            "fieldsV1": _ref(
                _meta("FieldsV1"),
                'FieldsV1 holds the first JSON version format as described in the "FieldsV1" type.',
            ),
            "manager": _string("Manager is an identifier of the workflow managing these fields."),
            "operation": _string(
                "Operation is the type of operation which lead to this ManagedFieldsEntry being created: Apply or "
                "Update."
            ),
            "subresource": _string(
                "Subresource is the name of the subresource used to update that object, or empty string if the object "
                "was updated through the main resource."
            ),
            "time": _ref(
                _meta("Time"), "Time is the timestamp of when the ManagedFields entry was added."
            ),
        },
    },
    _meta("OwnerReference"): {
        "type": "object",
        "description": "OwnerReference contains enough information to let you identify an owning "
        "object. An owning object must be in the same namespace as the dependent, or be "
        "cluster-scoped, so there is no namespace field.",
        "required": ["apiVersion", "kind", "name", "uid"],
        "properties": {
            "apiVersion": _string("API version of the referent."),
            "blockOwnerDeletion": {
                "type": "boolean",
                "description": (
                    'If true, AND if the owner has the "foregroundDeletion" finalizer, then the owner cannot be '
                    "deleted from the key-value store until this reference is removed."
                ),
            },
            "controller": {
                "type": "boolean",
                "description": "If true, this reference points to the managing controller.",
            },
            "kind": _string("Kind of the referent."),
            "name": _string("Name of the referent."),
            "uid": _string("UID of the referent."),
        },
        "x-kubernetes-map-type": "atomic",
    },
    _meta("ObjectMeta"): {
        "type": "object",
        "description": "ObjectMeta is metadata that all persisted resources must have, which "
        "includes all objects users must create.",
        "properties": {
            "annotations": {
                "type": "object",
                "additionalProperties": {"type": "string", "default": ""},
                "description": "Annotations is an unstructured key value map stored with a "
                "resource that may be set by external tools to store and retrieve arbitrary "
                "metadata. They are not queryable.",
            },
            "creationTimestamp": _ref(
                _meta("Time"),
                "CreationTimestamp is a timestamp representing the server time when this "
                "object was created. Populated by the system. Read-only.",
            ),
            "deletionGracePeriodSeconds": {
                "type": "integer",
                "format": "int64",
                "description": (
                    "Number of seconds allowed for this object to gracefully terminate before it will be removed from "
                    "the system. Only set when deletionTimestamp is also set."
                ),
            },
            "deletionTimestamp": _ref(
                _meta("Time"),
                "DeletionTimestamp is RFC 3339 date and time at which this resource will be "
                "deleted. Set by the server when a graceful deletion is requested by the user; "
                "the object stays until its finalizers are removed.",
            ),
            "finalizers": _strings(
                "Must be empty before the object is deleted from the registry. Each entry is an "
                "identifier for the responsible component that will remove the entry from the list.",
                **{"x-kubernetes-list-type": "set", "x-kubernetes-patch-strategy": "merge"},
            ),
            "generateName": _string(
                "GenerateName is an optional prefix, used by the server, to generate a unique "
                "name ONLY IF the Name field has not been provided."
            ),
            "generation": {
                "type": "integer",
                "format": "int64",
                "description": (
                    "A sequence number representing a specific generation of the desired state. Populated by the "
                    "system. Read-only."
                ),
            },
            "labels": {
                "type": "object",
                "additionalProperties": {"type": "string", "default": ""},
                "description": "Map of string keys and values that can be used to organize and "
                "categorize (scope and select) objects.",
            },
            "managedFields": {
                "type": "array",
                "items": _ref(_meta("ManagedFieldsEntry"), default={}),
                "description": "ManagedFields maps workflow-id and version to the set of fields "
                "that are managed by that workflow.",
                "x-kubernetes-list-type": "atomic",
            },
            "name": _string(
                "Name must be unique within a namespace. Is required when creating resources, "
                "although some resources may allow a client to request the generation of an "
                "appropriate name automatically. Cannot be updated."
            ),
            "namespace": _string(
                "Namespace defines the space within which each name must be unique. An empty "
                'namespace is equivalent to the "default" namespace. Cannot be updated.'
            ),
            "ownerReferences": {
                "type": "array",
                "items": _ref(_meta("OwnerReference"), default={}),
                "description": "List of objects depended by this object. If ALL objects in the "
                "list have been deleted, this object will be garbage collected.",
                "x-kubernetes-list-map-keys": ["uid"],
                "x-kubernetes-list-type": "map",
                "x-kubernetes-patch-merge-key": "uid",
                "x-kubernetes-patch-strategy": "merge",
            },
            "resourceVersion": _string(
                "An opaque value that represents the internal version of this object that can "
                "be used by clients to determine when objects have changed. Populated by the "
                "system. Read-only."
            ),
            "selfLink": _string(
                "Deprecated: selfLink is a legacy read-only field that is no longer populated by the system."
            ),
            "uid": _string(
                "UID is the unique in time and space value for this object. Populated by the system. Read-only."
            ),
        },
    },
    _meta("ListMeta"): {
        "type": "object",
        "description": "ListMeta describes metadata that synthetic resources must have, "
        "including lists and various status objects.",
        "properties": {
            "continue": _string(
                "continue may be set if the user set a limit on the number of items returned, and indicates that the "
                "server has more data available."
            ),
            "remainingItemCount": {
                "type": "integer",
                "format": "int64",
                "description": (
                    "remainingItemCount is the number of subsequent items in the list which are not included in this "
                    "list response."
                ),
            },
            "resourceVersion": _string(
                "String that identifies the server's internal version of this object that can be used by clients to "
                "determine when objects have changed."
            ),
            "selfLink": _string(
                "Deprecated: selfLink is a legacy read-only field that is no longer populated by the system."
            ),
        },
    },
    _meta("StatusCause"): {
        "type": "object",
        "description": "StatusCause provides more information about an api.Status failure, "
        "including cases when multiple errors are encountered.",
        "properties": {
            "field": _string(
                "The field of the resource that has caused this error, as named by its JSON serialization."
            ),
            "message": _string("A human-readable description of the cause of the error."),
            "reason": _string("A machine-readable description of the cause of the error."),
        },
    },
    _meta("StatusDetails"): {
        "type": "object",
        "description": "StatusDetails is a set of additional properties that MAY be set by the "
        "server to provide additional information about a response.",
        "properties": {
            "causes": {
                "type": "array",
                "items": _ref(_meta("StatusCause"), default={}),
                "description": "The Causes array includes more details associated with the StatusReason failure.",
                "x-kubernetes-list-type": "atomic",
            },
            "group": _string(
                "The group attribute of the resource associated with the status StatusReason."
            ),
            "kind": _string(
                "The kind attribute of the resource associated with the status StatusReason."
            ),
            "name": _string(
                "The name attribute of the resource associated with the status StatusReason."
            ),
            "retryAfterSeconds": {
                "type": "integer",
                "format": "int32",
                "description": "If specified, the time in seconds before the operation should be retried.",
            },
            "uid": _string("UID of the resource."),
        },
    },
    _meta("Status"): {
        "type": "object",
        "description": "Status is a return value for calls that don't return other objects.",
        "properties": {
            "apiVersion": _string(
                "APIVersion defines the versioned schema of this representation of an object."
            ),
            "code": {
                "type": "integer",
                "format": "int32",
                "description": "Suggested HTTP return code for this status, 0 if not set.",
            },
            "details": _ref(_meta("StatusDetails"), "Extended data associated with the reason."),
            "kind": _string(
                "Kind is a string value representing the REST resource this object represents."
            ),
            "message": _string("A human-readable description of the status of this operation."),
            "metadata": _ref(_meta("ListMeta"), "Standard list metadata.", default={}),
            "reason": _string(
                'A machine-readable description of why this operation is in the "Failure" status.'
            ),
            "status": _string('Status of the operation. One of: "Success" or "Failure".'),
        },
        "x-kubernetes-group-version-kind": [{"group": "", "kind": "Status", "version": "v1"}],
    },
    _meta("Preconditions"): {
        "type": "object",
        "description": "Preconditions must be fulfilled before an operation (update, delete, etc.) is carried out.",
        "properties": {
            "resourceVersion": _string("Specifies the target ResourceVersion"),
            "uid": _string("Specifies the target UID."),
        },
    },
    _meta("DeleteOptions"): {
        "type": "object",
        "description": "DeleteOptions may be provided when deleting an API object.",
        "properties": {
            "apiVersion": _string(
                "APIVersion defines the versioned schema of this representation of an object."
            ),
            "dryRun": _strings(
                "When present, indicates that modifications should not be persisted.",
                **{"x-kubernetes-list-type": "atomic"},
            ),
            "gracePeriodSeconds": {
                "type": "integer",
                "format": "int64",
                "description": "The duration in seconds before the object should be deleted.",
            },
            "kind": _string(
                "Kind is a string value representing the REST resource this object represents."
            ),
            "orphanDependents": {
                "type": "boolean",
                "description": "Deprecated: please use the PropagationPolicy.",
            },
            "preconditions": _ref(
                _meta("Preconditions"), "Must be fulfilled before a deletion is carried out."
            ),
            "propagationPolicy": _string(
                "Whether and how garbage collection will be performed: Orphan, Background or Foreground."
            ),
        },
    },
    _meta("Patch"): {
        "type": "object",
        "description": "Patch is provided to give a concrete name and type to the Kubernetes PATCH request body.",
    },
    _meta("WatchEvent"): {
        "type": "object",
        "description": "Event represents a single event to a watched resource.",
        "required": ["type", "object"],
        "properties": {
            "object": {
                "type": "object",
                "description": (
                    "Object is the object of the event: the resource for ADDED, MODIFIED and DELETED, a Status for "
                    "ERROR, and an object with only its resourceVersion for BOOKMARK."
                ),
            },
            "type": _string("ADDED, MODIFIED, DELETED, BOOKMARK or ERROR", default=""),
        },
    },
}

API_VERSION_DESCRIPTION = (
    "APIVersion defines the versioned schema of this representation of an object. Servers "
    "should convert recognized schemas to the latest internal value, and may reject "
    "unrecognized values."
)
KIND_DESCRIPTION = (
    "Kind is a string value representing the REST resource this object represents. Servers "
    "may infer this from the endpoint the client submits requests to. Cannot be updated. In "
    "CamelCase."
)
METADATA_DESCRIPTION = "Standard object's metadata."
LIST_METADATA_DESCRIPTION = "Standard list metadata."


def _gvk(resource: ResourceType, kind: str | None = None) -> Object:
    return {"group": resource.group, "kind": kind or resource.kind, "version": resource.version}


def kind_schema(resource: ResourceType) -> Object:
    """The resource's schema as a definition: its openAPIV3Schema, with apiVersion, kind and
    metadata spelled out and the ``x-kubernetes-group-version-kind`` it is found by."""
    base = resource.schema if resource.schema is not None else {}
    schema: Object = copy.deepcopy(dict(base))
    schema.setdefault("type", "object")
    if not resource.schema:
        schema["x-kubernetes-preserve-unknown-fields"] = True
    schema.setdefault(
        "description",
        f"{resource.kind} is the Schema for the {resource.plural} API.",
    )
    properties = schema.setdefault("properties", {})
    properties["apiVersion"] = {
        **properties.get("apiVersion", {}),
        "type": "string",
        "description": API_VERSION_DESCRIPTION,
    }
    properties["kind"] = {
        **properties.get("kind", {}),
        "type": "string",
        "description": KIND_DESCRIPTION,
    }
    properties["metadata"] = _ref(_meta("ObjectMeta"), METADATA_DESCRIPTION, default={})
    schema["x-kubernetes-group-version-kind"] = [_gvk(resource)]
    return schema


def list_schema(resource: ResourceType) -> Object:
    return {
        "type": "object",
        "description": f"{resource.list_kind} is a list of {resource.kind}",
        "required": ["items"],
        "properties": {
            "apiVersion": {"type": "string", "description": API_VERSION_DESCRIPTION},
            "items": {
                "type": "array",
                "items": _ref(definition_name(resource)),
                "description": f"List of {resource.plural}.",
            },
            "kind": {"type": "string", "description": KIND_DESCRIPTION},
            "metadata": _ref(_meta("ListMeta"), LIST_METADATA_DESCRIPTION, default={}),
        },
        "x-kubernetes-group-version-kind": [_gvk(resource, resource.list_kind)],
    }


def definitions(resources: Iterable[ResourceType]) -> dict[str, Object]:
    """Every definition the resources need, by name (meta types first)."""
    found: dict[str, Object] = dict(META_DEFINITIONS)
    for resource in resources:
        found[definition_name(resource)] = kind_schema(resource)
        found[definition_name(resource, resource.list_kind)] = list_schema(resource)
    return found


def _render_refs(node: Any, prefix: str, *, v3: bool) -> Any:
    """Write the abstract references out: ``{"$ref": ...}`` (v2, beside the description) or
    ``{"allOf": [{"$ref": ...}]}`` (v3, as the API server does when a reference has siblings)."""
    if isinstance(node, list):
        return [_render_refs(item, prefix, v3=v3) for item in node]
    if not isinstance(node, Mapping):
        return node
    out = {key: _render_refs(value, prefix, v3=v3) for key, value in node.items() if key != _REF}
    if _REF in node:
        target = prefix + node[_REF]
        out = {"allOf": [{"$ref": target}], **out} if v3 and out else {"$ref": target, **out}
    return out


# -- parameters and operations ----------------------------------------------------------------

_PARAMETERS: dict[str, tuple[str, str]] = {
    "allowWatchBookmarks": (
        "boolean",
        'allowWatchBookmarks requests watch events with type "BOOKMARK".',
    ),
    "continue": (
        "string",
        "The continue option should be set when retrieving more results from the server.",
    ),
    "dryRun": (
        "string",
        "When present, indicates that modifications should not be persisted. Valid value: All.",
    ),
    "fieldManager": (
        "string",
        "fieldManager is a name associated with the actor or entity that is making these changes.",
    ),
    "fieldSelector": (
        "string",
        "A selector to restrict the list of returned objects by their fields. Defaults to everything.",
    ),
    "fieldValidation": (
        "string",
        "fieldValidation instructs the server on how to handle objects in the request "
        "(POST/PUT/PATCH) containing unknown or duplicate fields. Valid values are: - Ignore: "
        "unknown fields are dropped silently. - Warn: each unknown or duplicate field is "
        "reported in a warning header. - Strict: the request fails with a BadRequest error "
        "naming every unknown or duplicate field.",
    ),
    "force": (
        "boolean",
        'Force is going to "force" Apply requests. It means user will re-acquire conflicting fields owned by other '
        "people.",
    ),
    "gracePeriodSeconds": (
        "integer",
        "The duration in seconds before the object should be deleted.",
    ),
    "labelSelector": (
        "string",
        "A selector to restrict the list of returned objects by their labels. Defaults to everything.",
    ),
    "limit": (
        "integer",
        "limit is a maximum number of responses to return for a list call; continue gets the rest.",
    ),
    "orphanDependents": ("boolean", "Deprecated: please use the PropagationPolicy."),
    "pretty": ("string", "If 'true', then the output is pretty printed."),
    "propagationPolicy": (
        "string",
        "Whether and how garbage collection will be performed: Orphan, Background or Foreground.",
    ),
    "resourceVersion": (
        "string",
        "resourceVersion sets a constraint on what resource versions a request may be served from.",
    ),
    "resourceVersionMatch": (
        "string",
        "resourceVersionMatch determines how resourceVersion is applied to list calls.",
    ),
    "sendInitialEvents": (
        "boolean",
        "`sendInitialEvents=true` may be set together with `watch=true`: the stream begins with synthetic events for "
        "the current state.",
    ),
    "timeoutSeconds": ("integer", "Timeout for the list/watch call."),
    "watch": (
        "boolean",
        "Watch for changes to the described resources and return them as a stream of add, update, and remove "
        "notifications.",
    ),
}
_LIST = (
    "allowWatchBookmarks",
    "continue",
    "fieldSelector",
    "labelSelector",
    "limit",
    "resourceVersion",
    "resourceVersionMatch",
    "sendInitialEvents",
    "timeoutSeconds",
    "watch",
)
_WRITE = ("dryRun", "fieldManager", "fieldValidation")
_DELETE = ("dryRun", "gracePeriodSeconds", "orphanDependents", "propagationPolicy")
_DELETE_COLLECTION = (
    *_DELETE,
    "continue",
    "fieldSelector",
    "labelSelector",
    "limit",
    "resourceVersion",
    "resourceVersionMatch",
    "sendInitialEvents",
    "timeoutSeconds",
)


def _query(name: str, *, v3: bool) -> Object:
    kind, description = _PARAMETERS[name]
    if v3:
        return {
            "name": name,
            "in": "query",
            "description": description,
            "schema": {"type": kind, "uniqueItems": True},
        }
    return {
        "name": name,
        "in": "query",
        "description": description,
        "type": kind,
        "uniqueItems": True,
    }


def _path_parameter(name: str, description: str, *, v3: bool) -> Object:
    if v3:
        return {
            "name": name,
            "in": "path",
            "description": description,
            "required": True,
            "schema": {"type": "string", "uniqueItems": True},
        }
    return {
        "name": name,
        "in": "path",
        "description": description,
        "required": True,
        "type": "string",
        "uniqueItems": True,
    }


def _camel(resource: ResourceType) -> str:
    group = "".join(part[:1].upper() + part[1:] for part in (resource.group or "core").split("."))
    return group + resource.version[:1].upper() + resource.version[1:]


class _Builder:
    def __init__(self, *, v3: bool) -> None:
        self.v3 = v3
        self.prefix = "#/components/schemas/" if v3 else "#/definitions/"

    def ref(self, name: str) -> Object:
        return {"$ref": self.prefix + name}

    def body(self, schema_name: str) -> Object:
        if self.v3:
            return {
                "content": {
                    JSON: {"schema": self.ref(schema_name)},
                    "application/yaml": {"schema": self.ref(schema_name)},
                },
                "required": True,
            }
        return {"name": "body", "in": "body", "required": True, "schema": self.ref(schema_name)}

    def patch_body(self, builtin: bool) -> Object:
        types = (*PATCH_TYPES, STRATEGIC_MERGE_PATCH) if builtin else PATCH_TYPES
        if self.v3:
            return {
                "content": {t: {"schema": self.ref(_meta("Patch"))} for t in types},
                "required": True,
            }
        return {"name": "body", "in": "body", "required": True, "schema": self.ref(_meta("Patch"))}

    def responses(self, schema_name: str, codes: Sequence[str]) -> Object:
        described = {"200": "OK", "201": "Created", "202": "Accepted"}
        out: Object = {}
        for code in codes:
            if self.v3:
                out[code] = {
                    "description": described[code],
                    "content": {
                        JSON: {"schema": self.ref(schema_name)},
                        "application/yaml": {"schema": self.ref(schema_name)},
                    },
                }
            else:
                out[code] = {"description": described[code], "schema": self.ref(schema_name)}
        out["401"] = {"description": "Unauthorized"}
        return out

    def operation(
        self,
        resource: ResourceType,
        action: str,
        operation_id: str,
        description: str,
        query: Sequence[str],
        responses: Object,
        *,
        body: Object | None = None,
        builtin: bool,
    ) -> Object:
        op: Object = {
            "tags": [_camel(resource)[:1].lower() + _camel(resource)[1:]],
            "description": description,
            "operationId": operation_id,
            "parameters": [_query(name, v3=self.v3) for name in query],
            "responses": responses,
            "x-kubernetes-action": action,
            "x-kubernetes-group-version-kind": _gvk(resource),
        }
        if body is not None:
            if self.v3:
                op["requestBody"] = body
            else:
                op["parameters"].insert(0, body)
        if not self.v3:
            op["consumes"] = (
                ["*/*"]
                if action != "patch"
                else list((*PATCH_TYPES, STRATEGIC_MERGE_PATCH) if builtin else PATCH_TYPES)
            )
            op["produces"] = [JSON, "application/yaml"]
            op["schemes"] = ["https"]
        return op

    def paths(self, resource: ResourceType, builtin: bool) -> dict[str, Object]:
        base = (
            f"/api/{resource.version}"
            if not resource.group
            else f"/apis/{resource.group}/{resource.version}"
        )
        scope = "Namespaced" if resource.namespaced else ""
        collection = (
            f"{base}/namespaces/{{namespace}}/{resource.plural}"
            if resource.namespaced
            else f"{base}/{resource.plural}"
        )
        item = collection + "/{name}"
        kind_name = definition_name(resource)
        list_name = definition_name(resource, resource.list_kind)
        status = _meta("Status")
        camel = _camel(resource)
        common = [_query("pretty", v3=self.v3)]
        namespace = (
            [
                _path_parameter(
                    "namespace",
                    "object name and auth scope, such as for teams and projects",
                    v3=self.v3,
                )
            ]
            if resource.namespaced
            else []
        )
        name = [_path_parameter("name", f"name of the {resource.kind}", v3=self.v3)]
        op = self.operation

        def read_write(subresource: str) -> Object:
            """get, put and patch of the object (``""``) or of its status (``"Status"``)."""
            what = f"{'status of ' if subresource else ''}the specified {resource.kind}"
            operation = f"{camel}{scope}{resource.kind}{subresource}"
            return {
                "get": op(
                    resource,
                    "get",
                    f"read{operation}",
                    f"read {what}",
                    (),
                    self.responses(kind_name, ["200"]),
                    builtin=builtin,
                ),
                "put": op(
                    resource,
                    "put",
                    f"replace{operation}",
                    f"replace {what}",
                    _WRITE,
                    self.responses(kind_name, ["200", "201"]),
                    body=self.body(kind_name),
                    builtin=builtin,
                ),
                "patch": op(
                    resource,
                    "patch",
                    f"patch{operation}",
                    f"partially update {what}",
                    (*_WRITE, "force"),
                    self.responses(kind_name, ["200", "201"]),
                    body=self.patch_body(builtin),
                    builtin=builtin,
                ),
            }

        paths: dict[str, Object] = {
            collection: {
                "get": op(
                    resource,
                    "list",
                    f"list{camel}{scope}{resource.kind}",
                    f"list or watch objects of kind {resource.kind}",
                    _LIST,
                    self.responses(list_name, ["200"]),
                    builtin=builtin,
                ),
                "post": op(
                    resource,
                    "post",
                    f"create{camel}{scope}{resource.kind}",
                    f"create a {resource.kind}",
                    _WRITE,
                    self.responses(kind_name, ["200", "201", "202"]),
                    body=self.body(kind_name),
                    builtin=builtin,
                ),
                "delete": op(
                    resource,
                    "deletecollection",
                    f"deletecollection{camel}{scope}{resource.kind}",
                    f"delete collection of {resource.kind}",
                    _DELETE_COLLECTION,
                    self.responses(status, ["200"]),
                    body=self.body(_meta("DeleteOptions")),
                    builtin=builtin,
                ),
                "parameters": [*namespace, *common],
            },
            item: {
                **read_write(""),
                "delete": op(
                    resource,
                    "delete",
                    f"delete{camel}{scope}{resource.kind}",
                    f"delete a {resource.kind}",
                    _DELETE,
                    self.responses(status, ["200", "202"]),
                    body=self.body(_meta("DeleteOptions")),
                    builtin=builtin,
                ),
                "parameters": [*name, *namespace, *common],
            },
        }
        if resource.status_subresource:
            paths[item + "/status"] = {
                **read_write("Status"),
                "parameters": [*name, *namespace, *common],
            }
        if resource.namespaced:
            paths[f"{base}/{resource.plural}"] = {
                "get": op(
                    resource,
                    "list",
                    f"list{camel}{resource.kind}ForAllNamespaces",
                    f"list or watch objects of kind {resource.kind}",
                    (),
                    self.responses(list_name, ["200"]),
                    builtin=builtin,
                ),
                "parameters": [_query(p, v3=self.v3) for p in (*_LIST, "pretty")],
            }
        return paths


def _is_builtin(resource: ResourceType) -> bool:
    return resource.group in _BUILTIN_PACKAGES


# -- documents --------------------------------------------------------------------------------


def _referenced(schemas: Mapping[str, Object], roots: Iterable[str]) -> dict[str, Object]:
    """The named schemas and every meta type they (transitively) reference."""
    wanted: dict[str, Object] = {}
    pending = list(roots)
    while pending:
        name = pending.pop()
        if name in wanted or name not in schemas:
            continue
        wanted[name] = schemas[name]
        pending.extend(_refs_in(schemas[name]))
    return dict(sorted(wanted.items()))


def _refs_in(node: Any) -> Iterable[str]:
    if isinstance(node, Mapping):
        if _REF in node:
            yield node[_REF]
        for value in node.values():
            yield from _refs_in(value)
    elif isinstance(node, list):
        for item in node:
            yield from _refs_in(item)


_ALWAYS = (_meta("Status"), _meta("DeleteOptions"), _meta("Patch"))


def v2_document(
    resources: Sequence[ResourceType], *, title: str = "Kubernetes", version: str = "v1.37.0"
) -> Object:
    """``/openapi/v2``: Swagger 2.0 with every resource's paths and definitions."""
    builder = _Builder(v3=False)
    found = definitions(resources)
    roots = [*_ALWAYS]
    paths: dict[str, Object] = {}
    for resource in resources:
        roots += [definition_name(resource), definition_name(resource, resource.list_kind)]
        paths.update(builder.paths(resource, _is_builtin(resource)))
    return {
        "swagger": "2.0",
        "info": {"title": title, "version": version},
        "paths": dict(sorted(paths.items())),
        "definitions": _render_refs(_referenced(found, roots), builder.prefix, v3=False),
    }


def v3_document(
    resources: Sequence[ResourceType],
    group: str,
    version: str,
    *,
    title: str = "Kubernetes",
    api_version: str = "v1.37.0",
) -> Object | None:
    """``/openapi/v3/apis/<group>/<version>`` (``api/v1`` for the core group), or None."""
    served = [r for r in resources if r.group == group and r.version == version]
    if not served:
        return None
    builder = _Builder(v3=True)
    found = definitions(served)
    roots = [*_ALWAYS]
    paths: dict[str, Object] = {}
    for resource in served:
        roots += [definition_name(resource), definition_name(resource, resource.list_kind)]
        paths.update(builder.paths(resource, _is_builtin(resource)))
    return {
        "openapi": "3.0.0",
        "info": {"title": title, "version": api_version},
        "paths": dict(sorted(paths.items())),
        "components": {
            "schemas": _render_refs(_referenced(found, roots), builder.prefix, v3=True),
        },
    }


def canonical_bytes(document: Mapping[str, Any]) -> bytes:
    return json.dumps(document, sort_keys=True, separators=(",", ":")).encode()


def document_hash(document: Mapping[str, Any]) -> str:
    """The ``hash`` of a v3 document's URL: SHA-512 of its content, upper-case hex, as the
    API server computes it (clients cache documents by this URL)."""
    return hashlib.sha512(canonical_bytes(document)).hexdigest().upper()


def _gv_path(group: str, version: str) -> str:
    return f"api/{version}" if not group else f"apis/{group}/{version}"


def v3_index(resources: Sequence[ResourceType]) -> Object:
    """``/openapi/v3``: where each group-version's document is."""
    paths: dict[str, Object] = {}
    for group, versions in groups(resources).items():
        for version in versions:
            document = v3_document(resources, group, version)
            if document is None:
                continue
            key = _gv_path(group, version)
            paths[key] = {"serverRelativeURL": f"/openapi/v3/{key}?hash={document_hash(document)}"}
    return {"paths": dict(sorted(paths.items()))}


def _accepts_json(accept: str | None) -> bool:
    if not accept or not accept.strip():
        return True
    return any(
        (c.type, c.subtype) in (("application", "json"), ("application", "*"), ("*", "*"))
        for c in parse_accept(accept)
    )


# What /openapi/v2 offers, in kube-openapi's order: (subtype asked for, Content-Type answered).
_V2_MEDIA_TYPES = (
    ("json", JSON),
    ("com.github.proto-openapi.spec.v2@v1.0+protobuf", V2_PROTOBUF),
    ("com.github.proto-openapi.spec.v2.v1.0+protobuf", V2_PROTOBUF),
)


def _v2_media_type(accept: str | None) -> str:
    """As kube-openapi negotiates: the first media range (best first) that one of
    ``_V2_MEDIA_TYPES`` matches, wildcards included; no Accept is ``*/*``; none is 406."""
    for clause in parse_accept(accept or "*/*"):
        for subtype, content_type in _V2_MEDIA_TYPES:
            if clause.type in ("application", "*") and clause.subtype in (subtype, "*"):
                return content_type
    raise not_acceptable()


@functools.lru_cache(maxsize=1)
def _v2_protobuf(document: bytes) -> bytes:
    """The JSON ``document`` in protobuf, encoded again only when it changes (a CRD applied or
    deleted), as kube-apiserver keeps it: the encoding takes several times longer than building
    the document."""
    return openapi_protobuf.encode_document(json.loads(document))


def serve(
    path: str,
    query: Mapping[str, str] | None,
    resources: Sequence[ResourceType],
    *,
    accept: str | None = None,
) -> tuple[str, Object | bytes] | None:
    """(Content-Type, body) for ``/openapi/v2``, ``/openapi/v3`` and
    ``/openapi/v3/<api/v1 | apis/<group>/<version>>`` (any ``?hash=`` is accepted), or None
    when ``path`` is not one of them.

    ``/openapi/v2`` is JSON or, for a client that asks for it, protobuf (bytes): kubectl asks
    for protobuf alone when it validates a manifest client-side. The v3 documents are JSON
    only."""
    path = path.rstrip("/")
    if path == "/openapi/v2":
        content_type = _v2_media_type(accept)
        swagger = v2_document(resources)
        if content_type == V2_PROTOBUF:
            return content_type, _v2_protobuf(json.dumps(swagger).encode())
        return content_type, swagger
    is_v3 = path == "/openapi/v3" or path.startswith("/openapi/v3/")
    if is_v3 and not _accepts_json(accept):
        raise not_acceptable()
    if path == "/openapi/v3":
        return JSON, v3_index(resources)
    prefix = "/openapi/v3/"
    if not path.startswith(prefix):
        return None
    parts = path[len(prefix) :].split("/")
    document: Object | None = None
    if len(parts) == 2 and parts[0] == "api":
        document = v3_document(resources, "", parts[1])
    elif len(parts) == 3 and parts[0] == "apis":
        document = v3_document(resources, parts[1], parts[2])
    return None if document is None else (JSON, document)
