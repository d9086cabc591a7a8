"""Reading a structural openAPIV3Schema (as a CRD declares it) and the JSON values it describes,
the way apiextensions-apiserver reads them."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final, TypeAlias

Schema: TypeAlias = Mapping[str, Any]

EMPTY: Final[Schema] = {}


def nested(value: Any, *path: str) -> Any:
    """The value at ``path`` in nested objects, or None where an object or a key is missing."""
    for key in path:
        if not isinstance(value, Mapping):
            return None
        value = value.get(key)
    return value


# The fields a resource (the root, or an x-kubernetes-embedded-resource) always has.
META_FIELDS: Final = frozenset({"apiVersion", "kind", "metadata"})

# String formats a CRD schema may use (apiextensions-apiserver validation/formats.go), with
# go-openapi's normalisation (dashes removed); others are ignored.
_STRING_FORMATS: Final = frozenset(
    f.replace("-", "")
    for f in [
        "bsonobjectid",
        "uri",
        "email",
        "hostname",
        "ipv4",
        "ipv6",
        "cidr",
        "mac",
        "uuid",
        "uuid3",
        "uuid4",
        "uuid5",
        "isbn",
        "isbn10",
        "isbn13",
        "creditcard",
        "ssn",
        "hexcolor",
        "rgbcolor",
        "byte",
        "password",
        "date",
        "duration",
        "datetime",
        "k8s-short-name",
        "k8s-long-name",
    ]
)


def properties(schema: Schema) -> Mapping[str, Schema]:
    found = schema.get("properties")
    return found if isinstance(found, Mapping) else EMPTY


def declares_properties(schema: Schema) -> bool:
    """Whether the schema is an object with named fields (``properties`` given, even empty)."""
    return isinstance(schema.get("properties"), Mapping)


def items(schema: Schema) -> Schema | None:
    found = schema.get("items")
    return found if isinstance(found, Mapping) else None


def has_additional(schema: Schema) -> bool:
    """``additionalProperties`` is given (a schema, or true): the object is a map."""
    found = schema.get("additionalProperties")
    return isinstance(found, Mapping) or found is True


def additional(schema: Schema) -> Schema | None:
    """The schema of a map's values, when ``additionalProperties`` is one."""
    found = schema.get("additionalProperties")
    return found if isinstance(found, Mapping) else None


def field_schema(schema: Schema | None, name: str) -> Schema | None:
    """The schema of field ``name`` of an object: its property, else the map value schema."""
    if schema is None:
        return None
    found = properties(schema).get(name)
    return found if found is not None else additional(schema)


def flag(schema: Schema | None, name: str) -> bool:
    return bool(schema is not None and schema.get(name) is True)


def nullable(schema: Schema | None) -> bool:
    return flag(schema, "nullable")


def preserves_unknown_fields(schema: Schema | None) -> bool:
    return flag(schema, "x-kubernetes-preserve-unknown-fields")


def embedded_resource(schema: Schema | None) -> bool:
    return flag(schema, "x-kubernetes-embedded-resource")


def int_or_string(schema: Schema | None) -> bool:
    return flag(schema, "x-kubernetes-int-or-string")


def declared_type(schema: Schema) -> str:
    found = schema.get("type")
    return found if isinstance(found, str) else ""


def types(schema: Schema) -> tuple[str, ...]:
    """The JSON types a value may have, as kube-openapi sees them (int-or-string is both)."""
    if int_or_string(schema):
        return ("integer", "string")
    declared = declared_type(schema)
    return (declared,) if declared else ()


def list_type(schema: Schema) -> str:
    found = schema.get("x-kubernetes-list-type")
    return found if isinstance(found, str) else ""


def list_map_keys(schema: Schema) -> Sequence[str]:
    found = schema.get("x-kubernetes-list-map-keys")
    return [k for k in found if isinstance(k, str)] if isinstance(found, list) else []


def map_type(schema: Schema) -> str:
    found = schema.get("x-kubernetes-map-type")
    return found if isinstance(found, str) else ""


def validations(schema: Schema) -> Sequence[Mapping[str, Any]]:
    found = schema.get("x-kubernetes-validations")
    return [r for r in found if isinstance(r, Mapping)] if isinstance(found, list) else []


def effective_format(schema: Schema) -> str:
    """The format validation honours: formats a CRD may not use are dropped, as the API server
    drops them (``int32`` on an integer, ``date-time`` on a string, nothing on a boolean)."""
    declared = schema.get("format")
    if not isinstance(declared, str) or not declared:
        return ""
    kinds = types(schema)
    kind = kinds[0] if len(kinds) == 1 else ""
    if kind in ("", "string"):
        return declared if declared.replace("-", "") in _STRING_FORMATS else ""
    if kind == "integer":
        return declared if declared in ("int32", "int64") else ""
    if kind == "number":
        return declared if declared in ("float", "double") else ""
    return ""


def json_kind(value: object) -> str:
    """The JSON type of a decoded value: null, boolean, integer, number, string, array, object."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict):
        return "object"
    return "unknown"


def deep_equal(a: object, b: object) -> bool:
    """``reflect.DeepEqual`` on decoded JSON: ``1`` and ``1.0`` differ, as do ``1`` and ``true``."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        assert isinstance(b, dict)
        return a.keys() == b.keys() and all(deep_equal(v, b[k]) for k, v in a.items())
    if isinstance(a, list):
        assert isinstance(b, list)
        return len(a) == len(b) and all(deep_equal(x, y) for x, y in zip(a, b, strict=True))
    return a == b


def scalar_key(value: object) -> tuple[str, object] | None:
    """A hashable identity for a scalar that keeps JSON types apart (``1``, ``1.0``, ``true``)."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return (json_kind(value), value)
    return None
