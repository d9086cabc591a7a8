"""A custom resource's values as CEL sees them in x-kubernetes-validations (apiserver's
UnstructuredToVal): typed by the schema, not by the JSON (a ``number`` is a double even when
written ``5``; ``date-time`` strings are timestamps), object fields under their escaped names,
nulls of object fields absent, and list-type map/set lists compared regardless of order."""

from __future__ import annotations

import base64
import binascii
import datetime
import re
from typing import Any, Final

from celpy import celtypes
from celpy.evaluation import CELEvalError

from scalable_topics.kubeapi import structural as st
from scalable_topics.kubeapi.structural import Schema

_RESERVED: Final = frozenset(
    [
        "true",
        "false",
        "null",
        "in",
        "as",
        "break",
        "const",
        "continue",
        "else",
        "for",
        "function",
        "if",
        "import",
        "let",
        "loop",
        "package",
        "namespace",
        "return",
        "var",
        "void",
        "while",
    ]
)
_EXPAND = re.compile(r"(__|[-./]|[^a-zA-Z0-9\-./_])")
_IDENTIFIER_CHARS = re.compile(r"[a-zA-Z0-9_]*")
_EXPANSIONS: Final = {"__": "__underscores__", ".": "__dot__", "-": "__dash__", "/": "__slash__"}
# How Go's %T names the type of a decoded JSON value, for "invalid data" errors.
_GO_TYPES: Final = {
    "boolean": "bool",
    "integer": "int64",
    "number": "float64",
    "string": "string",
    "array": "[]interface {}",
    "object": "map[string]interface {}",
    "null": "<nil>",
}


def escape(name: str) -> str | None:
    """A property name as a CEL field name (``foo-bar`` -> ``foo__dash__bar``, ``namespace`` ->
    ``__namespace__``), or None when CEL cannot name it."""
    if not name or name[0].isdigit():
        return None
    if name in _RESERVED:
        return f"__{name}__"
    if _IDENTIFIER_CHARS.fullmatch(name) and "__" not in name:
        return name
    if not all(c.isascii() and (c.isalnum() or c in "_-./") for c in name):
        return None
    return _EXPAND.sub(lambda m: _EXPANSIONS[m.group(0)], name)


def error(message: str) -> CELEvalError:
    return CELEvalError(message)


def _invalid(expected: str, value: object) -> CELEvalError:
    return error(
        f"invalid data, expected {expected}, got {_GO_TYPES.get(st.json_kind(value), 'unknown')}"
    )


def resource_schema(schema: Schema) -> Schema:
    """A resource's schema as CEL types it (WithTypeAndObjectMeta): apiVersion and kind are
    strings, and of its metadata only name and generateName can be read."""
    declared = dict(st.properties(schema))
    declared["apiVersion"] = {"type": "string"}
    declared["kind"] = {"type": "string"}
    declared["metadata"] = {
        "type": "object",
        "properties": {"name": {"type": "string"}, "generateName": {"type": "string"}},
    }
    widened = dict(schema)
    widened["properties"] = declared
    return widened


class Optional:
    """A CEL optional value (``oldSelf`` of an ``optionalOldSelf`` rule, ``optional.of(x)``)."""

    __slots__ = ("value",)

    def __init__(self, value: Any = None, *, present: bool = False) -> None:
        self.value = value if present else _ABSENT

    @property
    def present(self) -> bool:
        return self.value is not _ABSENT

    def __repr__(self) -> str:
        return f"optional.of({self.value!r})" if self.present else "optional.none()"


_ABSENT: Final = object()


def is_bool(value: object) -> bool:
    """A CEL bool (celpy's BoolType is an int, not a bool)."""
    return isinstance(value, (bool, celtypes.BoolType))


def is_number(value: object) -> bool:
    return isinstance(value, (int, float)) and not is_bool(value)


def _identity(value: object) -> object:
    """A key for a CEL value under CEL equality (``1 == 1.0``, but ``1 != true``)."""
    if is_bool(value):
        return ("bool", bool(value))
    if isinstance(value, (int, float)):
        return ("number", float(value))
    if isinstance(value, (list, dict)):
        return ("compound", repr(value))
    return (type(value).__name__, value)


class MapListValue(celtypes.ListType):
    """An ``x-kubernetes-list-type: map`` list: equal to a list with the same items in any
    order, items matched by their keys."""

    def __init__(self, items: list[Any], keys: list[str]) -> None:
        super().__init__(items)
        self.keys = [celtypes.StringType(k) for k in keys]

    def key_of(self, item: object) -> object:
        if not isinstance(item, dict):
            return ("not an object", id(item))
        return tuple(_identity(item[k]) if k in item else ("missing",) for k in self.keys)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, list) or len(self) != len(other):
            return False
        mine = {self.key_of(item): item for item in self}
        seen = set()
        for item in other:
            key = self.key_of(item)
            if key not in mine or not cel_equal(mine[key], item):
                return False
            seen.add(key)
        return len(seen) == len(mine)

    def __ne__(self, other: object) -> bool:
        return not self.__eq__(other)


class SetListValue(celtypes.ListType):
    """An ``x-kubernetes-list-type: set`` list: equal to a list of the same items in any order."""

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, list) or len(self) != len(other):
            return False
        return {_identity(item) for item in self} == {_identity(item) for item in other}

    def __ne__(self, other: object) -> bool:
        return not self.__eq__(other)


def cel_equal(a: object, b: object) -> bool:
    """CEL's ``==`` (heterogeneous: values of different types are unequal, numbers compare by
    value across int, uint and double)."""
    if a is None or b is None:
        return a is None and b is None
    if is_bool(a) or is_bool(b):
        return is_bool(a) and is_bool(b) and bool(a) == bool(b)
    if is_number(a) or is_number(b):
        if not (is_number(a) and is_number(b)):
            return False
        assert isinstance(a, (int, float)) and isinstance(b, (int, float))
        if isinstance(a, int) and isinstance(b, int):
            return int(a) == int(b)
        return float(a) == float(b)
    if isinstance(a, Optional) or isinstance(b, Optional):
        if not (isinstance(a, Optional) and isinstance(b, Optional)):
            return False
        if not a.present or not b.present:
            return a.present == b.present
        return cel_equal(a.value, b.value)
    if isinstance(a, (MapListValue, SetListValue)):
        return a.__eq__(b)
    if isinstance(b, (MapListValue, SetListValue)):
        return b.__eq__(a)
    if isinstance(a, list) or isinstance(b, list):
        if not (isinstance(a, list) and isinstance(b, list)) or len(a) != len(b):
            return False
        return all(cel_equal(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict) or isinstance(b, dict):
        if not (isinstance(a, dict) and isinstance(b, dict)) or len(a) != len(b):
            return False
        return all(k in b and cel_equal(v, b[k]) for k, v in a.items())
    if isinstance(a, str) or isinstance(b, str):
        return isinstance(a, str) and isinstance(b, str) and str(a) == str(b)
    if type(a) is not type(b):
        return False
    return bool(a == b)


def _go_duration(text: str) -> datetime.timedelta | None:
    """time.ParseDuration (or strfmt's looser "3 days") as a timedelta."""
    units = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "μs": 1e-6, "ms": 1e-3, "s": 1, "m": 60, "h": 3600}
    match = re.fullmatch(r"([-+]?)((?:(?:\d+\.?\d*|\.\d+)(?:ns|us|µs|μs|ms|s|m|h))+|0)", text)
    if match:
        seconds = sum(
            float(number) * units[unit]
            for number, unit in re.findall(r"(\d+\.?\d*|\.\d+)(ns|us|µs|μs|ms|s|m|h)", match[2])
        )
        return datetime.timedelta(seconds=-seconds if match[1] == "-" else seconds)
    loose = {
        "ns": 1e-9,
        "us": 1e-6,
        "ms": 1e-3,
        "s": 1,
        "m": 60,
        "h": 3600,
        "d": 86400,
        "w": 604800,
    }
    total, matched = 0.0, False
    for count, unit in re.findall(r"(\d+)\s*([A-Za-zµ]+)", text):
        unit = unit.lower()
        for variants, scale in (
            (("ns", "nano"), loose["ns"]),
            (("us", "µs", "micro"), loose["us"]),
            (("ms", "milli"), loose["ms"]),
            (("s", "sec"), loose["s"]),
            (("m", "min"), loose["m"]),
            (("h", "hr", "hour"), loose["h"]),
            (("d", "day"), loose["d"]),
            (("w", "wk", "week"), loose["w"]),
        ):
            for position, variant in enumerate(variants):
                if (position == len(variants) - 1 and unit.startswith(variant)) or variant == unit:
                    total += int(count) * scale
                    matched = True
    return datetime.timedelta(seconds=total) if matched else None


def _timestamp(text: str, date_only: bool) -> celtypes.TimestampType | CELEvalError:
    try:
        if date_only:
            if not re.fullmatch(r"\d{4}-\d{2}-\d{2}", text):
                raise ValueError(text)
            moment = datetime.datetime.fromisoformat(text).replace(tzinfo=datetime.UTC)
        else:
            moment = datetime.datetime.fromisoformat(text.replace("z", "Z"))
            if moment.tzinfo is None:
                moment = moment.replace(tzinfo=datetime.UTC)
    except ValueError as problem:
        kind = "date" if date_only else "date-time"
        return error(f"Invalid {kind} formatted string {text}: {problem}")
    return celtypes.TimestampType(moment)


def _string(value: str, schema: Schema) -> Any:
    fmt = schema.get("format")
    if fmt == "duration":
        duration = _go_duration(value)
        if duration is None:
            return error(f"Invalid duration {value}: time: invalid duration {value!r}")
        return celtypes.DurationType(duration)
    if fmt == "date":
        return _timestamp(value, date_only=True)
    if fmt == "date-time":
        return _timestamp(value, date_only=False)
    if fmt == "byte":
        try:
            return celtypes.BytesType(base64.urlsafe_b64decode(value))
        except (binascii.Error, ValueError) as problem:
            return error(f"Invalid byte formatted string {value}: {problem}")
    return celtypes.StringType(value)


def to_cel(value: object, schema: Schema, *, resource: bool = False) -> Any:
    """``value`` as a CEL value of ``schema``'s type; a CELEvalError (as a value) where the data
    cannot be one, as apiserver's UnstructuredToVal returns an error value."""
    if value is None:
        return (
            None
            if st.nullable(schema)
            else error("invalid data, got null for schema with nullable=false")
        )
    if st.int_or_string(schema):
        if isinstance(value, str):
            return celtypes.StringType(value)
        if isinstance(value, int) and not isinstance(value, bool):
            return celtypes.IntType(value)
        return error("invalid data, expected XIntOrString value to be either a string or integer")
    kind = st.declared_type(schema)
    if kind == "object":
        return _object(value, schema, resource=resource)
    if kind == "array":
        return _array(value, schema)
    if kind == "string":
        return _string(value, schema) if isinstance(value, str) else _invalid("string", value)
    if kind == "number":
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return celtypes.DoubleType(float(value))
        return _invalid("float", value)
    if kind == "integer":
        if isinstance(value, int) and not isinstance(value, bool):
            return celtypes.IntType(value)
        return _invalid("int", value)
    if kind == "boolean":
        return celtypes.BoolType(value) if isinstance(value, bool) else _invalid("bool", value)
    if st.preserves_unknown_fields(schema):
        return celpy_json(value)
    return error(
        "invalid type, expected object, array, number, integer, boolean or string, or no type "
        "with x-kubernetes-int-or-string or x-kubernetes-preserve-unknown-fields is true, got "
        + kind
    )


def celpy_json(value: object) -> Any:
    """A schemaless JSON value as CEL (for x-kubernetes-preserve-unknown-fields)."""
    if value is None:
        return None
    if isinstance(value, bool):
        return celtypes.BoolType(value)
    if isinstance(value, int):
        return celtypes.IntType(value)
    if isinstance(value, float):
        return celtypes.DoubleType(value)
    if isinstance(value, str):
        return celtypes.StringType(value)
    if isinstance(value, list):
        return celtypes.ListType([celpy_json(v) for v in value])
    if isinstance(value, dict):
        return celtypes.MapType({celtypes.StringType(k): celpy_json(v) for k, v in value.items()})
    return error("unsupported value")


def _object(value: object, schema: Schema, *, resource: bool) -> Any:
    if not isinstance(value, dict):
        return error("invalid data, expected a map for the provided schema with type=object")
    if resource or st.embedded_resource(schema):
        schema = resource_schema(schema)
    result = celtypes.MapType()
    if st.declares_properties(schema):
        declared = st.properties(schema)
        for name, item in value.items():
            field_name = escape(name)
            if name in declared and field_name is not None and item is not None:
                result[celtypes.StringType(field_name)] = to_cel(item, declared[name])
        return result
    values_schema = st.additional(schema)
    if values_schema is not None:
        for name, item in value.items():
            result[celtypes.StringType(name)] = to_cel(item, values_schema)
    return result


def _array(value: object, schema: Schema) -> Any:
    if not isinstance(value, list):
        return error("invalid data, expected an array for the provided schema with type=array")
    item_schema = st.items(schema)
    if item_schema is None:
        return error("invalid array type, expected Items with a non-empty Schema")
    items = [to_cel(item, item_schema) for item in value]
    kind = st.list_type(schema)
    if kind == "map":
        keys = [escape(k) or k for k in st.list_map_keys(schema)]
        return MapListValue(items, keys)
    if kind == "set":
        return SetListValue(items)
    if kind in ("", "atomic"):
        return celtypes.ListType(items)
    return error(
        f"invalid x-kubernetes-list-type, expected 'map', 'set' or 'atomic' but got {kind}"
    )
