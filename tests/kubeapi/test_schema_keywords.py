"""Every schema keyword the admission supports, on small synthetic schemas. Expected messages are
kube-apiserver's (apiextensions-apiserver's validation tests and kube-openapi's formats)."""

from __future__ import annotations

import math
from typing import Any

import pytest

from scalable_topics.kubeapi import cel_rules, embedded, list_types, pruning, schema_check
from scalable_topics.kubeapi.correlation import Correlated
from scalable_topics.kubeapi.defaults import apply_defaults
from scalable_topics.kubeapi.go_values import go_float, go_json, go_quote
from scalable_topics.kubeapi.schema_check import is_json_integer


def errors(schema: dict[str, Any], obj: Any, old: Any = None) -> list[str]:
    """Schema, list-type and CEL errors of ``obj``, as ``field: message`` lines."""
    correlation = Correlated(obj, old, schema) if old is not None else None
    found = schema_check.validate(schema, obj, correlation)
    found += list_types.validate(schema, obj)
    found += embedded.validate(schema, obj)
    found += cel_rules.validate(schema, obj, old, correlation).errors
    return [cause.describe() for cause in found]


def field(schema: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"type": "object", "properties": {"field": schema}, **extra}


NOT_NULLABLE = [
    ("foo", 'field: Invalid value: "string": field in body must be of type object: "string"'),
    (42, 'field: Invalid value: "integer": field in body must be of type object: "integer"'),
    (True, 'field: Invalid value: "boolean": field in body must be of type object: "boolean"'),
    (1.2, 'field: Invalid value: "number": field in body must be of type object: "number"'),
    ([], 'field: Invalid value: "array": field in body must be of type object: "array"'),
    (None, 'field: Invalid value: "null": field in body must be of type object: "null"'),
]


@pytest.mark.parametrize(("value", "message"), NOT_NULLABLE)
def test_type(value: Any, message: str) -> None:
    assert errors(field({"type": "object"}), {"field": value}) == [message]
    assert errors(field({"type": "object"}), {"field": {}}) == []


def test_nullable() -> None:
    assert errors(field({"type": "object", "nullable": True}), {"field": None}) == []
    assert errors(field({"nullable": True}), {"field": 1.2}) == []


@pytest.mark.parametrize(
    ("value", "found"),
    [(None, "null"), (True, "boolean"), (1.2, "number"), ({}, "object"), ([], "array")],
)
def test_int_or_string(value: Any, found: str) -> None:
    schema = field({"x-kubernetes-int-or-string": True})
    assert errors(schema, {"field": 42}) == errors(schema, {"field": "foo"}) == []
    assert errors(schema, {"field": value})[0] == (
        f'field: Invalid value: "{found}": field in body must be of type integer,string: "{found}"'
    )


def test_integers_and_numbers() -> None:
    integer = field({"type": "integer"})
    assert errors(integer, {"field": 3.0}) == []  # a whole float is an integer
    assert errors(integer, {"field": 1.5}) == [
        'field: Invalid value: "number": field in body must be of type integer: "number"',
        '<nil>: Invalid value: "": Checked value must be of type integer (default format) in field',
    ]
    assert errors(field({"type": "number"}), {"field": 3}) == []
    assert is_json_integer(1e6 + 1e-4) and not is_json_integer(0.5)
    assert not is_json_integer(2.0**53)


def test_required() -> None:
    schema = {
        "type": "object",
        "required": ["field"],
        "properties": {
            "field": {"type": "object", "required": ["nested"], "properties": {"nested": {}}}
        },
    }
    assert errors(schema, {"test": "a"}) == ["field: Required value"]
    assert errors(schema, {"field": {}}) == ["field.nested: Required value"]


def test_enum_reports_type_and_value() -> None:
    schema = field(
        {
            "type": "object",
            "required": ["nestedint", "nestedstring"],
            "properties": {
                "nestedint": {"type": "integer", "enum": [1, 2]},
                "nestedstring": {"type": "string", "enum": ["a", "b"]},
            },
        }
    )
    assert errors(schema, {"field": {}}) == [
        "field.nestedint: Required value",
        "field.nestedstring: Required value",
    ]
    assert errors(schema, {"field": {"nestedint": "x", "nestedstring": True}}) == [
        'field.nestedint: Invalid value: "string": field.nestedint in body must be of type integer: "string"',
        'field.nestedint: Unsupported value: "x": supported values: "1", "2"',
        'field.nestedstring: Invalid value: "boolean": field.nestedstring in body must be of type string: "boolean"',
        'field.nestedstring: Unsupported value: true: supported values: "a", "b"',
    ]
    assert errors(schema, {"field": {"nestedint": 2.0, "nestedstring": "b"}}) == []


def test_bounds() -> None:
    assert errors(
        field({"type": "integer", "minimum": 1, "exclusiveMinimum": True}), {"field": 1}
    ) == ["field: Invalid value: 1: field in body should be greater than 1"]
    assert errors(
        field({"type": "number", "maximum": 1e6, "exclusiveMaximum": True}), {"field": 1e6}
    ) == ["field: Invalid value: 1e+06: field in body should be less than 1e+06"]
    assert errors(field({"type": "number", "maximum": 2.5}), {"field": 2.75}) == [
        "field: Invalid value: 2.75: field in body should be less than or equal to 2.5"
    ]
    assert errors(field({"type": "integer", "minimum": 0.5}), {"field": 0}) == [
        '<nil>: Invalid value: "": Minimum boundary value must be of type integer (default format) in field',
        "field: Invalid value: 0: field in body should be greater than or equal to 0.5",
    ]


def test_multiple_of() -> None:
    assert errors(field({"type": "integer", "multipleOf": 5}), {"field": 10}) == []
    assert errors(field({"type": "integer", "multipleOf": 5}), {"field": 7}) == [
        "field: Invalid value: 7: field in body should be a multiple of 5"
    ]
    assert errors(field({"type": "number", "multipleOf": 0.5}), {"field": 1.5}) == []
    assert errors(field({"type": "number", "multipleOf": 0.5}), {"field": 1.25}) == [
        "field: Invalid value: 1.25: field in body should be a multiple of 0.5"
    ]


def test_string_lengths_and_pattern() -> None:
    assert errors(
        {"type": "object", "properties": {"fieldX": {"type": "string", "maxLength": 2}}},
        {"fieldX": "abc"},
    ) == ["fieldX: Too long: may not be more than 2 bytes"]
    assert errors(field({"type": "string", "maxLength": 1}), {"field": "ab"}) == [
        "field: Too long: may not be more than 1 byte"
    ]
    assert errors(field({"type": "string", "minLength": 2}), {"field": "é"}) == [
        'field: Invalid value: "é": field in body should be at least 2 chars long'
    ]
    assert errors(field({"type": "string", "maxLength": 2}), {"field": "éé"}) == []  # runes
    # only the first of maxLength, minLength and pattern is reported
    assert errors(
        field({"type": "string", "maxLength": 2, "pattern": "^a+$"}), {"field": "bbb"}
    ) == ["field: Too long: may not be more than 2 bytes"]
    bad = errors(field({"type": "string", "pattern": "+"}), {"field": "foo"})
    assert bad[0].startswith(
        'field: Invalid value: "foo": field in body should match \'+, but pattern is invalid: error parsing regexp: '
    )


def test_items() -> None:
    schema = {
        "type": "object",
        "properties": {"fieldX": {"type": "array", "maxItems": 2, "minItems": 1}},
    }
    assert errors(schema, {"fieldX": ["a", "b", "c"]}) == [
        "fieldX: Too many: 3: must have at most 2 items"
    ]
    assert errors(schema, {"fieldX": []}) == [
        "fieldX: Invalid value: 0: fieldX in body should have at least 1 items"
    ]
    unique = field({"type": "array", "uniqueItems": True, "items": {"type": "integer"}})
    assert errors(unique, {"field": [1, 2, 1]}) == [
        'field: Invalid value: "": field in body shouldn\'t contain duplicates'
    ]
    assert errors(unique, {"field": [1, 2, 1.5]}) == [
        'field[2]: Invalid value: "number": field[2] in body must be of type integer: "number"',
        '<nil>: Invalid value: "": Checked value must be of type integer (default format) in field[2]',
    ]


def test_properties_counts() -> None:
    schema = {
        "type": "object",
        "properties": {"fieldX": {"type": "object", "maxProperties": 2, "minProperties": 1}},
    }
    assert errors(schema, {"fieldX": {"a": True, "b": True, "c": True}}) == [
        "fieldX: Too many: 3: must have at most 2 items"
    ]
    assert errors(schema, {"fieldX": {}}) == [
        "fieldX: Invalid value: 0: fieldX in body should have at least 1 properties"
    ]


@pytest.mark.parametrize(
    ("fmt", "good", "bad"),
    [
        ("date-time", "2024-05-01T10:00:00.5+02:00", "2024-05-01 10:00"),
        ("date", "2024-02-29", "2023-02-29"),
        ("byte", "aGVsbG8=", "hello!"),
        ("uuid", "123e4567-e89b-12d3-a456-426614174000", "123e4567"),
        ("ipv4", "10.0.0.1", "10.0.0.256"),
        ("ipv6", "fe80::1", "10.0.0.1"),
        ("cidr", "10.0.0.0/8", "10.0.0.0"),
        ("hostname", "example.com", "-bad-"),
        ("duration", "1h30m", "soon"),
        ("k8s-long-name", "a.b-c", "a.-"),
        ("k8s-short-name", "abc-1", "a-"),
        ("mac", "01:23:45:67:89:ab", "01:23"),
    ],
)
def test_string_formats(fmt: str, good: str, bad: str) -> None:
    schema = {"type": "object", "properties": {"fieldX": {"type": "string", "format": fmt}}}
    assert errors(schema, {"fieldX": good}) == []
    assert errors(schema, {"fieldX": bad}) == [
        f"fieldX: Invalid value: {go_quote(bad)}: fieldX in body must be of type {fmt}: {go_quote(bad)}"
    ]


def test_unknown_formats_are_ignored_and_formats_name_wrong_types() -> None:
    assert errors(field({"type": "string", "format": "color"}), {"field": "red"}) == []
    assert errors(field({"type": "string", "format": "date-time"}), {"field": 5}) == [
        'field: Invalid value: "int64": field in body must be of type date-time: "int64"'
    ]


def test_numeric_formats() -> None:
    schema = {
        "type": "object",
        "properties": {
            "intThirtyTwo": {"type": "integer", "format": "int32"},
            "intSixtyFour": {"type": "integer", "format": "int64"},
            "floatThreeTwo": {"type": "number", "format": "float"},
            "floatSixFour": {"type": "number", "format": "double"},
        },
    }
    limits = {
        "intThirtyTwo": 2**31 - 1,
        "intSixtyFour": 2**63 - 1,
        "floatThreeTwo": 3.4028234663852886e38,
        "floatSixFour": 1.7976931348623157e308,
    }
    assert errors(schema, limits) == []
    assert errors(schema, {"intThirtyTwo": 2**31}) == [
        '<nil>: Invalid value: "": Checked value must be of type integer with format int32 in intThirtyTwo'
    ]
    assert errors(schema, {"intSixtyFour": float(2**63) * 1.1}) == [
        'intSixtyFour: Invalid value: "float64": intSixtyFour in body must be of type int64: "float64"',
        '<nil>: Invalid value: "": Checked value must be of type integer with format int64 in intSixtyFour',
    ]
    assert errors(schema, {"floatThreeTwo": -3.4028234663852886e38 * 1.1}) == [
        '<nil>: Invalid value: "": Checked value must be of type number with format float in floatThreeTwo'
    ]


def test_map_values_are_named_with_dots_in_schema_errors() -> None:
    schema = field({"type": "object", "additionalProperties": {"type": "integer", "minimum": 0}})
    assert errors(schema, {"field": {"a.b": -1}}) == [
        "field.a.b: Invalid value: -1: field.a.b in body should be greater than or equal to 0"
    ]


def test_list_type_set_and_map() -> None:
    sets = field({"type": "array", "x-kubernetes-list-type": "set", "items": {"type": "string"}})
    assert errors(sets, {"field": ["a", "b", "a", "a"]}) == ['field[2]: Duplicate value: "a"']
    assert (
        errors(
            field({**sets["properties"]["field"], "items": {"type": "number"}}), {"field": [1, 1.0]}
        )
        == []
    )
    maps = field(
        {
            "type": "array",
            "x-kubernetes-list-type": "map",
            "x-kubernetes-list-map-keys": ["k1", "k2"],
            "items": {
                "type": "object",
                "properties": {"k1": {"type": "string"}, "k2": {"type": "integer"}, "v": {}},
            },
        }
    )
    assert errors(maps, {"field": [{"k1": "a", "k2": 1}, {"k1": "a", "k2": 2}]}) == []
    assert errors(maps, {"field": [{"k1": "a", "k2": 1, "v": 1}, {"k2": 1, "k1": "a"}]}) == [
        'field[1]: Duplicate value: {"k1":"a","k2":1}'
    ]
    nested = {"type": "object", "additionalProperties": sets["properties"]["field"]}
    assert errors({"type": "object", "properties": {"m": nested}}, {"m": {"x": ["a", "a"]}}) == [
        'm[x][1]: Duplicate value: "a"'
    ]


def test_ratcheting_keeps_unchanged_errors_quiet() -> None:
    schema = field(
        {
            "type": "object",
            "properties": {"a": {"type": "integer", "minimum": 5}, "b": {"type": "string"}},
        }
    )
    old = {"field": {"a": 1, "b": "x"}}
    assert errors(schema, {"field": {"a": 1, "b": "y"}}, old) == []
    assert errors(schema, {"field": {"a": 2, "b": "x"}}, old) == [
        "field.a: Invalid value: 2: field.a in body should be greater than or equal to 5"
    ]
    atomic = field({"type": "array", "items": {"type": "integer", "minimum": 5}})
    assert errors(atomic, {"field": [1, 7]}, {"field": [1, 7]}) == []
    assert errors(atomic, {"field": [1, 8]}, {"field": [1, 7]}) == [
        "field[0]: Invalid value: 1: field[0] in body should be greater than or equal to 5"
    ]


def test_pruning() -> None:
    schema = {
        "type": "object",
        "properties": {
            "spec": {
                "type": "object",
                "properties": {
                    "known": {"type": "string"},
                    "free": {
                        "type": "object",
                        "x-kubernetes-preserve-unknown-fields": True,
                        "properties": {"n": {"type": "object", "properties": {}}},
                    },
                    "pod": {
                        "type": "object",
                        "x-kubernetes-embedded-resource": True,
                        "properties": {"spec": {"type": "object"}},
                    },
                    "list": {
                        "type": "array",
                        "items": {"type": "object", "properties": {"a": {"type": "string"}}},
                    },
                },
            }
        },
    }
    obj = {
        "apiVersion": "v1",
        "kind": "K",
        "metadata": {"name": "x", "anything": 1},
        "spec": {
            "known": "k",
            "unknown": 1,
            "free": {"kept": {"deep": 1}, "n": {"dropped": 2}},
            "pod": {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": "p"},
                "spec": {"x": 1},
                "status": {},
            },
            "list": [{"a": "x", "b": "y"}],
        },
        "status": {},
    }
    assert pruning.prune(obj, schema) == [
        "spec.free.n.dropped",
        "spec.list[0].b",
        "spec.pod.spec.x",
        "spec.pod.status",
        "spec.unknown",
        "status",
    ]
    assert obj["metadata"] == {"name": "x", "anything": 1}
    assert obj["spec"]["free"] == {"kept": {"deep": 1}, "n": {}}
    assert obj["spec"]["pod"] == {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p"},
        "spec": {},
    }


def test_embedded_resources_must_be_resources() -> None:
    schema = field(
        {
            "type": "object",
            "x-kubernetes-embedded-resource": True,
            "x-kubernetes-preserve-unknown-fields": True,
        }
    )
    assert errors(schema, {"field": {"apiVersion": "v1", "kind": "Pod"}}) == []
    assert errors(schema, {"field": {"kind": "pod_x"}}) == [
        "field.apiVersion: Required value",
        'field.kind: Invalid value: "pod_x": may have mixed case, but should otherwise match: a DNS-1035 '
        "label must consist of lower case alphanumeric characters or '-', start with an alphabetic "
        "character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used "
        "for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')",
    ]
    assert errors(schema, {"field": {"apiVersion": "a/b/c", "kind": "Pod"}}) == [
        'field.apiVersion: Invalid value: "a/b/c": unexpected GroupVersion string: a/b/c'
    ]


def test_defaults_reach_list_items_and_map_values() -> None:
    schema = {
        "type": "object",
        "properties": {
            "list": {
                "type": "array",
                "items": {"type": "object", "properties": {"a": {"type": "integer", "default": 1}}},
            },
            "map": {
                "type": "object",
                "additionalProperties": {
                    "type": "object",
                    "properties": {"b": {"type": "string", "default": "x"}},
                },
            },
            "nullable": {"type": "string", "nullable": True, "default": "d"},
            "absent": {"type": "object", "properties": {"c": {"type": "integer", "default": 3}}},
            "present": {
                "type": "object",
                "default": {},
                "properties": {"c": {"type": "integer", "default": 3}},
            },
        },
    }
    obj: dict[str, Any] = {"list": [{}, {"a": 5}], "map": {"k": {}}, "nullable": None}
    pruning.prune_nulls(obj, schema)
    apply_defaults(obj, schema)
    assert obj == {
        "list": [{"a": 1}, {"a": 5}],
        "map": {"k": {"b": "x"}},
        "nullable": None,
        "present": {"c": 3},
    }


def test_go_value_rendering() -> None:
    assert [go_float(v) for v in (0.9, 5000.0, 1e6, 1e-5, 123456789.0, -0.0, math.inf)] == [
        "0.9",
        "5000",
        "1e+06",
        "1e-05",
        "1.23456789e+08",
        "-0",
        "+Inf",
    ]
    assert (
        go_json({"b": [1, 2.5, 1e21, 1e-7], "a": "<&>"})
        == '{"a":"\\u003c\\u0026\\u003e","b":[1,2.5,1e+21,1e-7]}'
    )
    assert go_quote('a"\\\n\x01\u200bé') == '"a\\"\\\\\\n\\x01\\u200bé"'
