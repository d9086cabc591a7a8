"""CustomResourceDefinitions (apiextensions.k8s.io/v1): the resources one defines, the
validation the API server applies to it, and the status it writes once it accepts it.

Validation follows apiextensions-apiserver, in its words and field paths, including one of its
quirks: the API server validates the internal form, into which a v1 CRD whose versions all
carry the same schema (or subresources, or printer columns) is converted with those hoisted to
``spec.validation`` (``spec.subresources``, ``spec.additionalPrinterColumns``); a single-version
CRD's schema errors therefore read ``spec.validation.openAPIV3Schema.properties[spec].type``.

Not checked here: CEL rules (``x-kubernetes-validations`` compile and cost), that defaults
validate against their schema, webhook conversion settings (this server converts nothing, so
``strategy: Webhook`` is refused), and the protected-group approval annotation.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from . import ages, jsonpath, name_rules
from .field_errors import forbidden, invalid, not_supported, required
from .resources import ResourceType
from .status import Cause
from .structural import nested

Object = dict[str, Any]

CRD_GROUP = "apiextensions.k8s.io"
CRD_VERSION = "v1"
CRD_KIND = "CustomResourceDefinition"
CRD_PLURAL = "customresourcedefinitions"
CRD_PATH = (CRD_GROUP, CRD_VERSION, CRD_PLURAL)

PRINTER_COLUMN_TYPES = ("boolean", "date", "integer", "number", "string")
PRINTER_COLUMN_FORMATS = (
    "byte",
    "date",
    "date-time",
    "double",
    "float",
    "int32",
    "int64",
    "password",
)
OPENAPI_TYPES = ("array", "boolean", "integer", "number", "object", "string")

# JSONSchemaProps fields in Go's declaration order, and those the root of a schema may use when
# the status subresource is on (the API server walks them in this order and stops at the first).
_SCHEMA_FIELDS = (
    ("id", "ID"),
    ("$schema", "Schema"),
    ("$ref", "Ref"),
    ("description", "Description"),
    ("type", "Type"),
    ("format", "Format"),
    ("title", "Title"),
    ("default", "Default"),
    ("maximum", "Maximum"),
    ("exclusiveMaximum", "ExclusiveMaximum"),
    ("minimum", "Minimum"),
    ("exclusiveMinimum", "ExclusiveMinimum"),
    ("maxLength", "MaxLength"),
    ("minLength", "MinLength"),
    ("pattern", "Pattern"),
    ("maxItems", "MaxItems"),
    ("minItems", "MinItems"),
    ("uniqueItems", "UniqueItems"),
    ("multipleOf", "MultipleOf"),
    ("enum", "Enum"),
    ("maxProperties", "MaxProperties"),
    ("minProperties", "MinProperties"),
    ("required", "Required"),
    ("items", "Items"),
    ("allOf", "AllOf"),
    ("oneOf", "OneOf"),
    ("anyOf", "AnyOf"),
    ("not", "Not"),
    ("properties", "Properties"),
    ("additionalProperties", "AdditionalProperties"),
    ("patternProperties", "PatternProperties"),
    ("dependencies", "Dependencies"),
    ("additionalItems", "AdditionalItems"),
    ("definitions", "Definitions"),
    ("externalDocs", "ExternalDocs"),
    ("example", "Example"),
    ("nullable", "Nullable"),
    ("x-kubernetes-preserve-unknown-fields", "XPreserveUnknownFields"),
    ("x-kubernetes-embedded-resource", "XEmbeddedResource"),
    ("x-kubernetes-int-or-string", "XIntOrString"),
    ("x-kubernetes-list-map-keys", "XListMapKeys"),
    ("x-kubernetes-list-type", "XListType"),
    ("x-kubernetes-map-type", "XMapType"),
    ("x-kubernetes-validations", "XValidations"),
)
_ALLOWED_AT_ROOT = (
    "Description",
    "Type",
    "Format",
    "Title",
    "Maximum",
    "ExclusiveMaximum",
    "Minimum",
    "ExclusiveMinimum",
    "MaxLength",
    "MinLength",
    "Pattern",
    "MaxItems",
    "MinItems",
    "UniqueItems",
    "MultipleOf",
    "Required",
    "Items",
    "Properties",
    "ExternalDocs",
    "Example",
    "XPreserveUnknownFields",
    "XValidations",
)


def _versions(crd: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    versions = nested(crd, "spec", "versions")
    return [v for v in versions if isinstance(v, Mapping)] if isinstance(versions, list) else []


# -- defaults and the resources a CRD defines -------------------------------------------------


def with_defaults(crd: Mapping[str, Any]) -> Object:
    """The CRD as the API server stores it: ``names.singular`` (lowercased kind) and
    ``names.listKind`` (kind + List) filled in, ``conversion.strategy: None``, and
    ``status.storedVersions`` started with the storage version."""
    out = copy.deepcopy(dict(crd))
    spec = out.setdefault("spec", {})
    if not isinstance(spec, dict):
        return out
    names = spec.setdefault("names", {})
    if isinstance(names, dict):
        kind = names.get("kind")
        if not names.get("singular") and isinstance(kind, str):
            names["singular"] = kind.lower()
        if not names.get("listKind") and isinstance(kind, str) and kind:
            names["listKind"] = kind + "List"
    if not spec.get("conversion"):
        spec["conversion"] = {"strategy": "None"}
    status = out.get("status")
    if not isinstance(status, dict):
        status = out["status"] = {}
    if not status.get("storedVersions"):
        storage = storage_version(out)
        if storage:
            status["storedVersions"] = [storage]
    return out


def storage_version(crd: Mapping[str, Any]) -> str:
    for version in _versions(crd):
        if version.get("storage"):
            return str(version.get("name", ""))
    return ""


def resource_types(crd: Mapping[str, Any]) -> list[ResourceType]:
    """One ResourceType per served version, stored under the CRD's kind."""
    spec = crd.get("spec") or {}
    names = spec.get("names") or {}
    kind = str(names.get("kind", ""))
    types = []
    for version in _versions(crd):
        if not version.get("served"):
            continue
        schema = nested(version, "schema", "openAPIV3Schema")
        types.append(
            ResourceType(
                group=str(spec.get("group", "")),
                version=str(version.get("name", "")),
                kind=kind,
                plural=str(names.get("plural", "")),
                singular=str(names.get("singular") or kind.lower()),
                namespaced=spec.get("scope") == "Namespaced",
                short_names=tuple(names.get("shortNames") or ()),
                categories=tuple(names.get("categories") or ()),
                status_subresource=isinstance(nested(version, "subresources", "status"), Mapping),
                schema=schema if isinstance(schema, Mapping) else None,
                printer_columns=tuple(version.get("additionalPrinterColumns") or ()),
                store_kind=kind,
            )
        )
    return types


def created_at(obj: Mapping[str, Any]) -> str:
    """The default Table's ``Created At`` cell: the creation time itself, in UTC, to the second."""
    moment = ages.parse_timestamp(nested(obj, "metadata", "creationTimestamp"))
    if moment is None:
        return "0001-01-01T00:00:00Z"
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


# -- status -----------------------------------------------------------------------------------


def _accepted_names(names: Mapping[str, Any]) -> Object:
    accepted: Object = {}
    for key in ("plural", "singular", "shortNames", "kind", "listKind", "categories"):
        if names.get(key):
            accepted[key] = copy.deepcopy(names[key])
    return accepted


def _condition(
    kind: str, status: str, reason: str, message: str, old: Iterable[Any], now: str
) -> Object:
    for existing in old:
        if isinstance(existing, Mapping) and existing.get("type") == kind:
            if existing.get("status") == status and existing.get("lastTransitionTime"):
                now = existing["lastTransitionTime"]
            break
    return {
        "type": kind,
        "status": status,
        "lastTransitionTime": now,
        "reason": reason,
        "message": message,
    }


def crd_status(
    crd: Mapping[str, Any],
    others: Iterable[ResourceType] = (),
    *,
    now: datetime | None = None,
) -> Object:
    """The status the API server's controllers give an accepted CRD: ``NamesAccepted`` and
    ``Established`` True, ``acceptedNames``, ``storedVersions`` (every storage version ever
    used, the current one included). Names another resource of the group already uses
    (``others``: what else is served) are not accepted, and the CRD is not Established.
    Conditions keep their transition time while their status holds, so this is stable."""
    crd = with_defaults(crd)
    moment = (now or datetime.now(UTC)).astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    group = nested(crd, "spec", "group")
    names = nested(crd, "spec", "names") or {}
    old_status = crd.get("status") or {}
    old_conditions = old_status.get("conditions") or []
    accepted = dict(old_status.get("acceptedNames") or {})
    requested = _accepted_names(names)

    used: set[str] = set()
    kinds: set[str] = set()
    own = crd.get("metadata", {}).get("name")
    for other in others:
        if other.group != group or f"{other.plural}.{other.group}" == own:
            continue
        used.update((other.plural, other.singular, *other.short_names))
        kinds.update((other.kind, other.list_kind))

    reason, message = "NoConflicts", "no conflicts found"

    def fresh(name: Any, was: Any, taken: set[str]) -> bool:
        return name == was or name not in taken

    new_names: Object = {}
    checks = (
        ("plural", used, "PluralConflict"),
        ("singular", used, "SingularConflict"),
        ("kind", kinds, "KindConflict"),
        ("listKind", kinds, "ListKindConflict"),
    )
    conflict = False
    for key, taken, why in checks[:2]:
        if fresh(requested.get(key), accepted.get(key), taken):
            new_names[key] = requested.get(key)
        else:
            conflict, reason, message = True, why, f'"{requested.get(key)}" is already in use'
    short = requested.get("shortNames") or []
    clashes = [
        f'"{s}" is already in use'
        for s in short
        if s not in (accepted.get("shortNames") or []) and s in used
    ]
    if clashes:
        conflict, reason = True, "ShortNamesConflict"
        message = clashes[0] if len(clashes) == 1 else "[" + ", ".join(clashes) + "]"
    else:
        new_names["shortNames"] = short
    for key, taken, why in checks[2:]:
        if fresh(requested.get(key), accepted.get(key), taken):
            new_names[key] = requested.get(key)
        else:
            conflict, reason, message = True, why, f'"{requested.get(key)}" is already in use'
    new_names["categories"] = requested.get("categories")
    final = {**accepted, **{k: v for k, v in new_names.items() if v}}
    for key in list(final):
        if not final[key]:
            del final[key]

    if conflict:
        names_accepted = _condition(
            "NamesAccepted", "False", reason, message, old_conditions, moment
        )
        established = _condition(
            "Established",
            "False",
            "NotAccepted",
            "not all names are accepted",
            old_conditions,
            moment,
        )
    else:
        names_accepted = _condition(
            "NamesAccepted", "True", reason, message, old_conditions, moment
        )
        established = _condition(
            "Established",
            "True",
            "InitialNamesAccepted",
            "the initial names have been accepted",
            old_conditions,
            moment,
        )
    stored = [v for v in old_status.get("storedVersions") or [] if isinstance(v, str)]
    storage = storage_version(crd)
    if storage and storage not in stored:
        stored.append(storage)
    return {
        "conditions": [names_accepted, established],
        "acceptedNames": _order_names(final),
        "storedVersions": stored,
    }


def _order_names(names: Mapping[str, Any]) -> Object:
    order = ("plural", "singular", "shortNames", "kind", "listKind", "categories")
    return {key: names[key] for key in order if key in names}


def is_established(crd: Mapping[str, Any]) -> bool:
    for condition in nested(crd, "status", "conditions") or []:
        if isinstance(condition, Mapping) and condition.get("type") == "Established":
            return condition.get("status") == "True"
    return False


# -- validation -------------------------------------------------------------------------------


def validate(crd: Mapping[str, Any]) -> list[Cause]:
    """What the API server finds wrong with a CRD being created (after defaulting)."""
    crd = with_defaults(crd)
    causes = _name_causes(crd)
    causes += _spec_causes(crd)
    causes += _names_causes(nested(crd, "status", "acceptedNames") or {}, "status.acceptedNames")
    causes += _stored_versions_causes(crd)
    causes += _preserve_unknown_causes(crd)
    return causes


def validate_update(crd: Mapping[str, Any], old: Mapping[str, Any]) -> list[Cause]:
    """What the API server finds wrong with an update of ``old`` to ``crd``."""
    crd = with_defaults(crd)
    causes = _spec_causes(crd)
    spec, old_spec = crd.get("spec") or {}, old.get("spec") or {}
    if is_established(old):
        for path in (("scope",), ("names", "kind")):
            causes += _immutable(
                "spec." + ".".join(path), nested(spec, *path), nested(old_spec, *path)
            )
    for path in (("group",), ("names", "plural")):
        causes += _immutable("spec." + ".".join(path), nested(spec, *path), nested(old_spec, *path))
    causes += _names_causes(nested(crd, "status", "acceptedNames") or {}, "status.acceptedNames")
    causes += _stored_versions_causes(crd)
    if not nested(old, "spec", "preserveUnknownFields"):
        causes += _preserve_unknown_causes(crd)
    return causes


def _immutable(field: str, new: Any, old: Any) -> list[Cause]:
    return [] if new == old else [invalid(field, new, "field is immutable")]


def _name_causes(crd: Mapping[str, Any]) -> list[Cause]:
    name = nested(crd, "metadata", "name")
    plural = nested(crd, "spec", "names", "plural") or ""
    group = nested(crd, "spec", "group") or ""
    if isinstance(name, str) and name and name != f"{plural}.{group}":
        return [invalid("metadata.name", name, 'must be spec.names.plural+"."+spec.group')]
    return []


def _preserve_unknown_causes(crd: Mapping[str, Any]) -> list[Cause]:
    if nested(crd, "spec", "preserveUnknownFields") is True:
        return [
            invalid(
                "spec.preserveUnknownFields",
                True,
                "cannot set to true, set x-kubernetes-preserve-unknown-fields to true in "
                "spec.versions[*].schema instead",
            )
        ]
    return []


def _stored_versions_causes(crd: Mapping[str, Any]) -> list[Cause]:
    stored = nested(crd, "status", "storedVersions")
    stored = stored if isinstance(stored, list) else []
    path = "status.storedVersions"
    if not stored:
        return [invalid(path, None, "must have at least one stored version")]
    causes = []
    remaining = {v: i for i, v in enumerate(stored)}
    for version in _versions(crd):
        name = version.get("name")
        if version.get("storage") and name not in remaining:
            causes.append(invalid(path, stored, f"must have the storage version {name}"))
        remaining.pop(name, None)
    for name, index in remaining.items():
        causes.append(
            invalid(
                f"{path}[{index}]",
                name,
                f"missing from spec.versions; {name} was previously a storage version, and "
                f"must remain in spec.versions until a storage migration ensures no data "
                f"remains persisted in {name} and removes {name} from status.storedVersions",
            )
        )
    return causes


def _names_causes(names: Mapping[str, Any], path: str) -> list[Cause]:
    causes: list[Cause] = []
    for key in ("plural", "singular"):
        value = names.get(key)
        if isinstance(value, str) and value:
            errors = name_rules.dns1035_label_errors(value)
            if errors:
                causes.append(invalid(f"{path}.{key}", value, ",".join(errors)))
    for key in ("kind", "listKind"):
        value = names.get(key)
        if isinstance(value, str) and value:
            errors = name_rules.dns1035_label_errors(value.lower())
            if errors:
                causes.append(
                    invalid(
                        f"{path}.{key}",
                        value,
                        "may have mixed case, but should otherwise match: " + ",".join(errors),
                    )
                )
    for i, short in enumerate(names.get("shortNames") or []):
        errors = name_rules.dns1035_label_errors(str(short))
        if errors:
            causes.append(invalid(f"{path}.shortNames[{i}]", short, ",".join(errors)))
    if names.get("kind") and names.get("kind") == names.get("listKind"):
        causes.append(
            invalid(f"{path}.listKind", names["listKind"], "kind and listKind may not be the same")
        )
    for i, category in enumerate(names.get("categories") or []):
        errors = name_rules.dns1035_label_errors(str(category))
        if errors:
            causes.append(invalid(f"{path}.categories[{i}]", category, ",".join(errors)))
    return causes


def _go_versions(versions: Sequence[Mapping[str, Any]], hoisted: set[str]) -> list[Object]:
    """spec.versions as the API server renders it in a message: its internal Go struct."""
    rendered = []
    for v in versions:
        rendered.append(
            {
                "Name": v.get("name", ""),
                "Served": bool(v.get("served")),
                "Storage": bool(v.get("storage")),
                "Deprecated": bool(v.get("deprecated")),
                "DeprecationWarning": v.get("deprecationWarning"),
                "Schema": None if "schema" in hoisted else v.get("schema"),
                "Subresources": None if "subresources" in hoisted else v.get("subresources"),
                "AdditionalPrinterColumns": None
                if "additionalPrinterColumns" in hoisted
                else v.get("additionalPrinterColumns"),
                "SelectableFields": None
                if "selectableFields" in hoisted
                else v.get("selectableFields"),
            }
        )
    return rendered


def _spec_causes(crd: Mapping[str, Any]) -> list[Cause]:
    spec = crd.get("spec") if isinstance(crd.get("spec"), Mapping) else {}
    assert isinstance(spec, Mapping)
    causes: list[Cause] = []
    group = spec.get("group") or ""
    if not group:
        causes.append(required("spec.group"))
    elif errors := name_rules.dns1123_subdomain_errors(group):
        causes.append(invalid("spec.group", group, ",".join(errors)))
    elif len(group.split(".")) < 2:
        causes.append(invalid("spec.group", group, "should be a domain with at least one dot"))

    scope = spec.get("scope") or ""
    if not scope:
        causes.append(required("spec.scope"))
    elif scope not in ("Cluster", "Namespaced"):
        causes.append(not_supported("spec.scope", scope, ["Cluster", "Namespaced"]))

    versions = _versions(crd)
    # Per-version fields identical in every version are validated where the API server's
    # internal form keeps them: at the top of spec.
    hoisted = {
        key
        for key in ("schema", "subresources", "additionalPrinterColumns", "selectableFields")
        if versions and all(v.get(key) == versions[0].get(key) for v in versions)
    }
    schema_hoisted = (
        "schema" in hoisted and nested(versions[0], "schema", "openAPIV3Schema") is not None
    )
    for i, version in enumerate(versions):
        missing = nested(version, "schema", "openAPIV3Schema") is None
        if missing and not schema_hoisted:
            causes.append(required(f"spec.versions[{i}].schema.openAPIV3Schema"))
    any_status = any(isinstance(nested(v, "subresources", "status"), Mapping) for v in versions)

    storage_count = 0
    seen: set[str] = set()
    unique = True
    for i, version in enumerate(versions):
        path = f"spec.versions[{i}]"
        name = str(version.get("name") or "")
        if version.get("storage"):
            storage_count += 1
        if name in seen:
            unique = False
        seen.add(name)
        if errors := name_rules.dns1035_label_errors(name):
            causes.append(invalid(f"{path}.name", name, ",".join(errors)))
        warning = version.get("deprecationWarning")
        if warning is not None:
            for message in _deprecation_warning_errors(bool(version.get("deprecated")), warning):
                causes.append(invalid(f"{path}.deprecationWarning", warning, message))
        if "schema" not in hoisted:
            status_on = (
                isinstance(nested(version, "subresources", "status"), Mapping)
                if "subresources" not in hoisted
                else any_status
            )
            causes += _validation_causes(version.get("schema"), status_on, f"{path}.schema")
        if "subresources" not in hoisted:
            causes += _subresources_causes(version.get("subresources"), f"{path}.subresources")
        if "additionalPrinterColumns" not in hoisted:
            for j, column in enumerate(version.get("additionalPrinterColumns") or []):
                causes += column_causes(column, f"{path}.additionalPrinterColumns[{j}]")

    if not unique:
        causes.append(
            invalid(
                "spec.versions",
                _go_versions(versions, hoisted),
                "must contain unique version names",
            )
        )
    if storage_count != 1:
        causes.append(
            invalid(
                "spec.versions",
                _go_versions(versions, hoisted),
                "must have exactly one version marked as storage version",
            )
        )
    if versions:
        first = str(versions[0].get("name") or "")
        if first and (errors := name_rules.dns1035_label_errors(first)):
            causes.append(invalid("spec.version", first, ",".join(errors)))

    names = spec.get("names") if isinstance(spec.get("names"), Mapping) else {}
    assert isinstance(names, Mapping)
    for key in ("plural", "singular", "kind", "listKind"):
        if not names.get(key):
            causes.append(required(f"spec.names.{key}"))
    causes += _names_causes(names, "spec.names")

    if "schema" in hoisted and versions:
        causes += _validation_causes(versions[0].get("schema"), any_status, "spec.validation")
    if "subresources" in hoisted and versions:
        causes += _subresources_causes(versions[0].get("subresources"), "spec.subresources")
    if "additionalPrinterColumns" in hoisted and versions:
        for j, column in enumerate(versions[0].get("additionalPrinterColumns") or []):
            causes += column_causes(column, f"spec.additionalPrinterColumns[{j}]")

    strategy = nested(spec, "conversion", "strategy") or ""
    if not strategy:
        causes.append(required("spec.conversion.strategy"))
    elif strategy not in ("None", "Webhook"):
        causes.append(not_supported("spec.conversion.strategy", strategy, ["None", "Webhook"]))
    elif strategy == "Webhook":
        causes.append(
            forbidden(
                "spec.conversion.strategy",
                "this API server does not call conversion webhooks; use None",
            )
        )
    return causes


def _deprecation_warning_errors(deprecated: bool, warning: Any) -> list[str]:
    if not deprecated:
        return ["can only be set for deprecated versions"]
    errors = []
    text = str(warning)
    if len(text.encode()) > 256:
        errors.append("must be <= 256 characters long")
    if not text:
        errors.append("must not be an empty string")
    for i, char in enumerate(text):
        if not char.isprintable():
            errors.append(
                "must only contain printable UTF-8 characters; non-printable character found "
                f"at index {len(text[:i].encode())}"
            )
            break
    return errors


def _subresources_causes(subresources: Any, path: str) -> list[Cause]:
    if not isinstance(subresources, Mapping):
        return []
    scale = subresources.get("scale")
    if not isinstance(scale, Mapping):
        return []
    causes: list[Cause] = []
    for key, prefixes, where in (
        ("specReplicasPath", (".spec.",), "under .spec"),
        ("statusReplicasPath", (".status.",), "under .status"),
    ):
        value = scale.get(key) or ""
        field = f"{path}.scale.{key}"
        if not value:
            causes.append(required(field))
        elif errors := _simple_json_path_causes(value, field):
            causes += errors
        elif not value.startswith(prefixes):
            causes.append(invalid(field, value, f"should be a json path {where}"))
    selector = scale.get("labelSelectorPath")
    if selector:
        field = f"{path}.scale.labelSelectorPath"
        if errors := _simple_json_path_causes(selector, field):
            causes += errors
        elif not selector.startswith((".spec.", ".status.")):
            causes.append(
                invalid(field, selector, "should be a json path under either .spec or .status")
            )
    return causes


def _simple_json_path_causes(path: Any, field: str) -> list[Cause]:
    if not isinstance(path, str) or not path:
        return [invalid(field, path or "", "must not be empty")]
    if not path.startswith("."):
        return [invalid(field, path, "must be a simple json path starting with .")]
    return []


def column_causes(column: Any, path: str) -> list[Cause]:
    """One additionalPrinterColumn. The API server only requires the path to start with a
    dot, and serves a path its JSONPath parser refuses as a table without that column; here
    such a path is refused (422) instead, since what the author meant could not be shown."""
    if not isinstance(column, Mapping):
        return [invalid(path, column, "must be an object")]
    causes: list[Cause] = []
    if not column.get("name"):
        causes.append(required(f"{path}.name"))
    kind = column.get("type") or ""
    if not kind:
        causes.append(required(f"{path}.type", "must be one of " + ",".join(PRINTER_COLUMN_TYPES)))
    elif kind not in PRINTER_COLUMN_TYPES:
        causes.append(
            invalid(f"{path}.type", kind, "must be one of " + ",".join(PRINTER_COLUMN_TYPES))
        )
    column_format = column.get("format") or ""
    if column_format and column_format not in PRINTER_COLUMN_FORMATS:
        causes.append(
            invalid(
                f"{path}.format",
                column_format,
                "must be one of " + ",".join(PRINTER_COLUMN_FORMATS),
            )
        )
    json_path = column.get("jsonPath") or ""
    if not json_path:
        causes.append(required(f"{path}.JSONPath"))
    elif errors := _simple_json_path_causes(json_path, f"{path}.JSONPath"):
        causes += errors
    else:
        try:
            jsonpath.parse_column_path(json_path)
        except jsonpath.JSONPathError as error:
            causes.append(
                invalid(f"{path}.JSONPath", json_path, f"unrecognized column definition: {error}")
            )
    return causes


# -- schema validation -------------------------------------------------------------------------


def _key(path: str, child: str, key: str) -> str:
    return f"{path}.{child}[{key}]"


def _validation_causes(validation: Any, status_enabled: bool, path: str) -> list[Cause]:
    if not isinstance(validation, Mapping):
        return []
    schema = validation.get("openAPIV3Schema")
    if not isinstance(schema, Mapping):
        return []
    causes: list[Cause] = []
    root = f"{path}.openAPIV3Schema"
    if status_enabled:
        for key, go_name in _SCHEMA_FIELDS:
            if _is_zero(key, schema.get(key)):
                continue
            if go_name == "Type":
                if schema["type"] != "object":
                    causes.append(
                        invalid(
                            f"{path}.openAPIV3Schema.type",
                            schema["type"],
                            'only "object" is allowed as the type at the root of the schema '
                            "if the status subresource is enabled",
                        )
                    )
                    break
                continue
            if go_name not in _ALLOWED_AT_ROOT:
                causes.append(
                    invalid(
                        root,
                        dict(schema),
                        f"only [{' '.join(_ALLOWED_AT_ROOT)}] fields are allowed at the root "
                        "of the schema if the status subresource is enabled",
                    )
                )
                break
    if schema.get("nullable"):
        causes.append(forbidden(f"{root}.nullable", "nullable cannot be true at the root"))
    structural = _structural_causes(schema, root)
    causes += sorted(structural, key=lambda c: f"{c.field}: {c.message}")
    causes += _openapi_causes(schema, root, is_root=True, in_meta=False, defaults=None)
    return causes


# Go's zero values for JSONSchemaProps fields: plain booleans and strings are unset when false or
# empty; pointers, slices and maps are set once present.
_PLAIN_BOOLS = frozenset(
    {
        "exclusiveMaximum",
        "exclusiveMinimum",
        "uniqueItems",
        "nullable",
        "x-kubernetes-embedded-resource",
        "x-kubernetes-int-or-string",
    }
)
_PLAIN_STRINGS = frozenset(
    {"id", "$schema", "$ref", "description", "type", "format", "title", "pattern"}
)


def _is_zero(key: str, value: Any) -> bool:
    if value is None:
        return True
    if key in _PLAIN_BOOLS:
        return value is False
    if key in _PLAIN_STRINGS:
        return bool(value == "")
    return False


_ROOT, _ITEM, _FIELD = "root", "item", "field"
_INT_OR_STRING = [{"type": "integer"}, {"type": "string"}]


def _structural_causes(schema: Mapping[str, Any], root: str) -> list[Cause]:
    causes = _invariants(schema, _ROOT, root)
    causes += _completeness(schema, schema, root, root)
    return causes


def _invariants(s: Any, level: str, path: str) -> list[Cause]:
    if not isinstance(s, Mapping):
        return []
    causes: list[Cause] = []
    kind = s.get("type") or ""
    if kind == "array" and not isinstance(s.get("items"), Mapping):
        causes.append(required(f"{path}.items", "must be specified"))
    causes += _invariants(s.get("items"), _ITEM, f"{path}.items")
    for name, child in (s.get("properties") or {}).items():
        causes += _invariants(child, _FIELD, _key(path, "properties", name))
    additional = s.get("additionalProperties")
    if additional is not None and additional is not False:
        if level == _ROOT:
            causes.append(forbidden(f"{path}.additionalProperties", "must not be used at the root"))
        causes += _invariants(additional, _FIELD, f"{path}.additionalProperties")
    int_or_string = bool(s.get("x-kubernetes-int-or-string"))
    preserve = bool(s.get("x-kubernetes-preserve-unknown-fields"))
    embedded = bool(s.get("x-kubernetes-embedded-resource"))
    if int_or_string and preserve:
        causes.append(
            invalid(
                f"{path}.x-kubernetes-preserve-unknown-fields",
                True,
                "must be false if x-kubernetes-int-or-string is true",
            )
        )
    if int_or_string and embedded:
        causes.append(
            invalid(
                f"{path}.x-kubernetes-embedded-resource",
                True,
                "must be false if x-kubernetes-int-or-string is true",
            )
        )
    any_of = s.get("anyOf") or []
    all_of = s.get("allOf") or []
    skip_any_of = _strip(any_of) == _INT_OR_STRING
    skip_first = (
        bool(all_of)
        and isinstance(all_of[0], Mapping)
        and _strip(all_of[0].get("anyOf") or []) == _INT_OR_STRING
    )
    causes += _value_validation(s, skip_any_of, skip_first, level, path)
    if embedded and kind != "object":
        if not kind:
            causes.append(
                required(f"{path}.type", "must be object if x-kubernetes-embedded-resource is true")
            )
        else:
            causes.append(
                invalid(
                    f"{path}.type", kind, "must be object if x-kubernetes-embedded-resource is true"
                )
            )
    elif not kind and not int_or_string and not preserve:
        where = {
            _ROOT: "at the root",
            _ITEM: "for specified array items",
            _FIELD: "for specified object fields",
        }[level]
        causes.append(required(f"{path}.type", f"must not be empty {where}"))
    if embedded and additional is not None:
        causes.append(
            forbidden(
                f"{path}.additionalProperties",
                "must not be used if x-kubernetes-embedded-resource is set",
            )
        )
    if level == _ROOT and kind and kind != "object":
        causes.append(invalid(f"{path}.type", kind, "must be object at the root"))
    properties = s.get("properties") or {}
    check_metadata = level == _ROOT or embedded
    for name in ("kind", "apiVersion"):
        if name in properties and check_metadata:
            child_type = (properties[name] or {}).get("type") or ""
            if child_type != "string":
                causes.append(
                    invalid(f"{_key(path, 'properties', name)}.type", child_type, "must be string")
                )
    if "metadata" in properties:
        metadata = properties["metadata"] if isinstance(properties["metadata"], Mapping) else {}
        meta_path = _key(path, "properties", "metadata")
        if check_metadata and metadata.get("type") != "object":
            causes.append(
                invalid(f"{meta_path}.type", metadata.get("type") or "", "must be object")
            )
        if level == _ROOT:
            rest = {k: v for k, v in metadata.items() if k not in ("type", "default")}
            inner = rest.get("properties")
            if isinstance(inner, Mapping) and set(inner) <= {"name", "generateName"} and inner:
                del rest["properties"]
            if rest:
                causes.append(
                    forbidden(
                        meta_path,
                        "must not specify anything other than name and generateName, but "
                        "metadata is implicitly specified",
                    )
                )
    if embedded and not preserve and not properties:
        causes.append(
            required(
                f"{path}.properties",
                "must not be empty if x-kubernetes-embedded-resource is true without "
                "x-kubernetes-preserve-unknown-fields",
            )
        )
    return causes


def _strip(alternatives: Any) -> Any:
    return [dict(a) for a in alternatives] if isinstance(alternatives, list) else alternatives


def _value_validation(
    v: Mapping[str, Any], skip_any_of: bool, skip_first: bool, level: str, path: str
) -> list[Cause]:
    causes: list[Cause] = []
    if not skip_any_of:
        for i, alt in enumerate(v.get("anyOf") or []):
            causes += _nested(alt, level, f"{path}.anyOf[{i}]", skip_any_of=False)
    for i, alt in enumerate(v.get("allOf") or []):
        causes += _nested(alt, level, f"{path}.allOf[{i}]", skip_any_of=skip_first and i == 0)
    for i, alt in enumerate(v.get("oneOf") or []):
        causes += _nested(alt, level, f"{path}.oneOf[{i}]", skip_any_of=False)
    causes += _nested(v.get("not"), level, f"{path}.not", skip_any_of=False)
    pattern = v.get("pattern")
    if isinstance(pattern, str) and pattern:
        try:
            re.compile(pattern)
        except re.error as error:
            causes.append(
                invalid(
                    f"{path}.pattern",
                    pattern,
                    f"must be a valid regular expression, but isn't: {error}",
                )
            )
    return causes


def _nested(v: Any, level: str, path: str, *, skip_any_of: bool) -> list[Cause]:
    if not isinstance(v, Mapping):
        return []
    causes = _value_validation(v, skip_any_of, False, level, path)
    causes += _nested(v.get("items"), level, f"{path}.items", skip_any_of=False)
    for name, child in (v.get("properties") or {}).items():
        causes += _nested(child, _FIELD, _key(path, "properties", name), skip_any_of=False)
    if v.get("type"):
        causes.append(forbidden(f"{path}.type", "must be empty to be structural"))
    if v.get("additionalProperties") not in (None, True):
        causes.append(
            forbidden(f"{path}.additionalProperties", "must be undefined to be structural")
        )
    if "default" in v:
        causes.append(forbidden(f"{path}.default", "must be undefined to be structural"))
    for key in ("title", "description"):
        if v.get(key):
            causes.append(forbidden(f"{path}.{key}", "must be empty to be structural"))
    if v.get("nullable"):
        causes.append(forbidden(f"{path}.nullable", "must be false to be structural"))
    for key in (
        "x-kubernetes-preserve-unknown-fields",
        "x-kubernetes-embedded-resource",
        "x-kubernetes-int-or-string",
    ):
        if v.get(key):
            causes.append(forbidden(f"{path}.{key}", "must be false to be structural"))
    if v.get("x-kubernetes-list-map-keys"):
        causes.append(
            forbidden(f"{path}.x-kubernetes-list-map-keys", "must be empty to be structural")
        )
    for key in ("x-kubernetes-list-type", "x-kubernetes-map-type"):
        if v.get(key) is not None:
            causes.append(forbidden(f"{path}.{key}", "must be undefined to be structural"))
    if v.get("x-kubernetes-validations"):
        causes.append(
            forbidden(f"{path}.x-kubernetes-validations", "must be empty to be structural")
        )
    if "metadata" in (v.get("properties") or {}):
        causes.append(
            forbidden(
                _key(path, "properties", "metadata"), "must not be specified in a nested context"
            )
        )
    return causes


def _completeness(v: Mapping[str, Any], s: Any, s_path: str, v_path: str) -> list[Cause]:
    causes: list[Cause] = []
    for junctor in ("allOf", "anyOf", "oneOf"):
        for i, alt in enumerate(v.get(junctor) or []):
            causes += _nested_completeness(alt, s, s_path, f"{v_path}.{junctor}[{i}]")
    causes += _nested_completeness(v.get("not"), s, s_path, f"{v_path}.not")
    return causes


def _nested_completeness(v: Any, s: Any, s_path: str, v_path: str) -> list[Cause]:
    if not isinstance(v, Mapping):
        return []
    if not isinstance(s, Mapping):
        return [required(s_path, f"because it is defined in {v_path}")]
    causes = _completeness(v, s, s_path, v_path)
    causes += _nested_completeness(
        v.get("items"), s.get("items"), f"{s_path}.items", f"{v_path}.items"
    )
    structural = s.get("properties") or {}
    for name, child in (v.get("properties") or {}).items():
        if name not in structural:
            causes.append(
                required(
                    _key(s_path, "properties", name),
                    f"because it is defined in {_key(v_path, 'properties', name)}",
                )
            )
        else:
            causes += _nested_completeness(
                child,
                structural[name],
                _key(s_path, "properties", name),
                _key(v_path, "properties", name),
            )
    return causes


def _openapi_causes(
    s: Any, path: str, *, is_root: bool, in_meta: bool, defaults: str | None
) -> list[Cause]:
    """ValidateCustomResourceDefinitionOpenAPISchema: what OpenAPI v3 features a CRD schema
    may not use, and the x-kubernetes-* extensions' own rules."""
    if not isinstance(s, Mapping):
        return []
    causes: list[Cause] = []
    kind = s.get("type") or ""
    if kind and kind not in OPENAPI_TYPES:
        causes.append(not_supported(f"{path}.type", kind, OPENAPI_TYPES))
    if "default" in s and defaults is not None:
        causes.append(forbidden(f"{path}.default", f"must not be set {defaults}".rstrip()))
    for key, message in (
        ("id", "id is not supported"),
        ("additionalItems", "additionalItems is not supported"),
        ("patternProperties", "patternProperties is not supported"),
        ("definitions", "definitions is not supported"),
        ("dependencies", "dependencies is not supported"),
        ("$ref", "$ref is not supported"),
    ):
        if s.get(key) not in (None, "", {}, []):
            causes.append(forbidden(f"{path}.{key}", message))
    if kind == "null":
        causes.append(
            forbidden(f"{path}.type", "type cannot be set to null, use nullable as an alternative")
        )
    if isinstance(s.get("items"), list):
        causes.append(forbidden(f"{path}.items", "items must be a schema object and not an array"))
    if in_meta and s.get("x-kubernetes-embedded-resource"):
        causes.append(
            forbidden(
                f"{path}.x-kubernetes-embedded-resource", "must not be used inside of resource meta"
            )
        )
    if s.get("uniqueItems") is True:
        causes.append(
            forbidden(
                f"{path}.uniqueItems",
                "uniqueItems cannot be set to true since the runtime complexity becomes quadratic",
            )
        )
    additional = s.get("additionalProperties")
    properties = s.get("properties") or {}
    if additional is not None:
        if properties and (additional is False or isinstance(additional, Mapping)):
            causes.append(
                forbidden(
                    f"{path}.additionalProperties",
                    "additionalProperties and properties are mutual exclusive",
                )
            )
        child_defaults = (
            "inside additionalProperties applying to object metadata" if in_meta else defaults
        )
        causes += _openapi_causes(
            additional,
            f"{path}.additionalProperties",
            is_root=False,
            in_meta=in_meta,
            defaults=child_defaults,
        )
    for name, child in properties.items():
        child_meta, child_defaults = in_meta, defaults
        if (is_root or s.get("x-kubernetes-embedded-resource")) and name in (
            "metadata",
            "kind",
            "apiVersion",
        ):
            child_meta = True
            if is_root:
                child_defaults = f"in top-level {name}"
        causes += _openapi_causes(
            child,
            _key(path, "properties", name),
            is_root=False,
            in_meta=child_meta,
            defaults=child_defaults,
        )
    causes += _openapi_causes(
        s.get("not"), f"{path}.not", is_root=False, in_meta=in_meta, defaults=defaults
    )
    for junctor in ("allOf", "oneOf", "anyOf"):
        for i, alt in enumerate(s.get(junctor) or []):
            causes += _openapi_causes(
                alt, f"{path}.{junctor}[{i}]", is_root=False, in_meta=in_meta, defaults=defaults
            )
    if isinstance(s.get("items"), Mapping):
        causes += _openapi_causes(
            s["items"], f"{path}.items", is_root=False, in_meta=in_meta, defaults=defaults
        )
    if s.get("x-kubernetes-preserve-unknown-fields") is False:
        causes.append(
            invalid(
                f"{path}.x-kubernetes-preserve-unknown-fields", False, "must be true or undefined"
            )
        )
    map_type = s.get("x-kubernetes-map-type")
    if map_type is not None and kind != "object":
        if not kind:
            causes.append(
                required(f"{path}.type", "must be object if x-kubernetes-map-type is specified")
            )
        else:
            causes.append(
                invalid(
                    f"{path}.type", kind, "must be object if x-kubernetes-map-type is specified"
                )
            )
    if map_type is not None and map_type not in ("atomic", "granular"):
        causes.append(
            not_supported(f"{path}.x-kubernetes-map-type", map_type, ["atomic", "granular"])
        )
    list_type = s.get("x-kubernetes-list-type")
    items = s.get("items") if isinstance(s.get("items"), Mapping) else None
    if list_type is not None and kind != "array":
        if not kind:
            causes.append(
                required(f"{path}.type", "must be array if x-kubernetes-list-type is specified")
            )
        else:
            causes.append(
                invalid(
                    f"{path}.type", kind, "must be array if x-kubernetes-list-type is specified"
                )
            )
    elif list_type == "set" and items is not None:
        if items.get("type") == "array" and items.get("x-kubernetes-list-type") not in (
            None,
            "atomic",
        ):
            causes.append(
                invalid(
                    f"{path}.items.x-kubernetes-list-type",
                    items.get("x-kubernetes-list-type"),
                    "must be atomic as item of a list with x-kubernetes-list-type=set",
                )
            )
        if items.get("type") == "object" and items.get("x-kubernetes-map-type") != "atomic":
            causes.append(
                invalid(
                    f"{path}.items.x-kubernetes-map-type",
                    items.get("x-kubernetes-list-type"),
                    "must be atomic as item of a list with x-kubernetes-list-type=set",
                )
            )
    if list_type is not None and list_type not in ("atomic", "set", "map"):
        causes.append(
            not_supported(f"{path}.x-kubernetes-list-type", list_type, ["atomic", "set", "map"])
        )
    keys = s.get("x-kubernetes-list-map-keys") or []
    if keys:
        if list_type is None:
            causes.append(
                required(
                    f"{path}.x-kubernetes-list-type",
                    "must be map if x-kubernetes-list-map-keys is non-empty",
                )
            )
        elif list_type != "map":
            causes.append(
                invalid(
                    f"{path}.x-kubernetes-list-type",
                    list_type,
                    "must be map if x-kubernetes-list-map-keys is non-empty",
                )
            )
    if list_type == "map":
        causes += _list_map_causes(s, items, keys, path)
    if list_type in ("set", "map") and items is not None and items.get("nullable"):
        causes.append(
            forbidden(
                f"{path}.items.nullable",
                f"cannot be nullable when x-kubernetes-list-type is {list_type}",
            )
        )
    if list_type == "map" and items is not None:
        required_keys = set(items.get("required") or [])
        for key in keys:
            prop = (items.get("properties") or {}).get(key)
            if not isinstance(prop, Mapping):
                continue
            if key not in required_keys and "default" not in prop:
                causes.append(
                    required(
                        f"{_key(f'{path}.items', 'properties', key)}.default",
                        "this property is in x-kubernetes-list-map-keys, so it must have a default or be a required "
                        "property",
                    )
                )
            if prop.get("nullable"):
                causes.append(
                    forbidden(
                        f"{_key(f'{path}.items', 'properties', key)}.nullable",
                        "this property is in x-kubernetes-list-map-keys, so it cannot be nullable",
                    )
                )
    for i, rule in enumerate(s.get("x-kubernetes-validations") or []):
        causes += _rule_causes(rule, f"{path}.x-kubernetes-validations[{i}]")
    return causes


def _list_map_causes(
    s: Mapping[str, Any], items: Mapping[str, Any] | None, keys: list[Any], path: str
) -> list[Cause]:
    causes: list[Cause] = []
    if not keys:
        causes.append(
            required(
                f"{path}.x-kubernetes-list-map-keys",
                "must not be empty if x-kubernetes-list-type is map",
            )
        )
    if s.get("items") is None:
        causes.append(
            required(f"{path}.items", "must have a schema if x-kubernetes-list-type is map")
        )
    elif items is None:
        causes.append(
            invalid(
                f"{path}.items",
                s.get("items"),
                "must only have a single schema if x-kubernetes-list-type is map",
            )
        )
    if items is not None and items.get("type") != "object":
        causes.append(
            invalid(
                f"{path}.items.type",
                items.get("type") or "",
                "must be object if parent array's x-kubernetes-list-type is map",
            )
        )
    if items is not None and items.get("type") == "object":
        seen: set[Any] = set()
        properties = items.get("properties") or {}
        for key in keys:
            if key in properties:
                if (properties[key] or {}).get("type") in ("array", "object"):
                    causes.append(
                        invalid(
                            f"{_key(f'{path}.items', 'properties', key)}.type",
                            items.get("type"),
                            "must be a scalar type if parent array's x-kubernetes-list-type is map",
                        )
                    )
            else:
                causes.append(
                    invalid(
                        f"{path}.x-kubernetes-list-map-keys",
                        keys,
                        "entries must all be names of item properties",
                    )
                )
            if key in seen:
                causes.append(
                    invalid(
                        f"{path}.x-kubernetes-list-map-keys",
                        keys,
                        "must not contain duplicate entries",
                    )
                )
            seen.add(key)
    return causes


def _rule_causes(rule: Any, path: str) -> list[Cause]:
    if not isinstance(rule, Mapping):
        return []
    causes: list[Cause] = []
    text = str(rule.get("rule") or "").strip()
    message = rule.get("message")
    if not text:
        causes.append(required(f"{path}.rule", "rule is not specified"))
    elif message and not str(message).strip():
        causes.append(invalid(f"{path}.message", message, "must be non-empty if specified"))
    elif message and re.search(r"[\n\r]", str(message).strip()):
        causes.append(invalid(f"{path}.message", message, "must not contain line breaks"))
    elif re.search(r"[\n\r]", text) and not str(message or "").strip():
        causes.append(
            required(f"{path}.message", "message must be specified if rule contains line breaks")
        )
    expression = rule.get("messageExpression")
    if expression is not None and expression != "" and not str(expression).strip():
        causes.append(
            required(
                f"{path}.messageExpression", "messageExpression must be non-empty if specified"
            )
        )
    reason = rule.get("reason")
    supported = [
        "FieldValueDuplicate",
        "FieldValueForbidden",
        "FieldValueInvalid",
        "FieldValueRequired",
    ]
    if reason is not None and reason not in supported:
        causes.append(not_supported(f"{path}.reason", reason, supported))
    field_path = rule.get("fieldPath")
    if field_path is not None and field_path != "" and not str(field_path).strip():
        causes.append(invalid(f"{path}.fieldPath", field_path, "must be non-empty if specified"))
    if isinstance(field_path, str) and re.search(r"[\n\r]", field_path):
        causes.append(invalid(f"{path}.fieldPath", field_path, "must not contain line breaks"))
    return causes
