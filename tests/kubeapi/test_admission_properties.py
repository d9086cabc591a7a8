"""Property: objects drawn from a schema (every keyword the admission supports) are admitted, and
admitting the admitted object changes nothing; breaking one constraint of such an object yields a
cause naming the broken field."""

from __future__ import annotations

import copy
import datetime
import re
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scalable_topics.kubeapi.admission import Admitted, FieldValidation, admit
from scalable_topics.kubeapi.status import ApiError

SPEC: dict[str, Any] = {
    "type": "object",
    "required": ["name", "size"],
    "properties": {
        "name": {
            "type": "string",
            "minLength": 1,
            "maxLength": 20,
            "pattern": "^[a-z][a-z0-9-]{0,15}$",
        },
        "size": {"type": "integer", "minimum": 1, "maximum": 100},
        "ratio": {"type": "number", "minimum": 0, "maximum": 1, "exclusiveMaximum": True},
        "step": {"type": "integer", "multipleOf": 5},
        "mode": {"type": "string", "enum": ["Fast", "Slow"], "default": "Fast"},
        "enabled": {"type": "boolean"},
        "since": {"type": "string", "format": "date-time"},
        "amount": {"x-kubernetes-int-or-string": True},
        "labels": {
            "type": "object",
            "maxProperties": 4,
            "additionalProperties": {"type": "string", "maxLength": 10},
        },
        "tags": {
            "type": "array",
            "maxItems": 4,
            "x-kubernetes-list-type": "set",
            "items": {"type": "string", "maxLength": 5},
        },
        "ports": {
            "type": "array",
            "maxItems": 3,
            "x-kubernetes-list-type": "map",
            "x-kubernetes-list-map-keys": ["port"],
            "items": {
                "type": "object",
                "required": ["port"],
                "properties": {
                    "port": {"type": "integer", "minimum": 1, "maximum": 65535},
                    "protocol": {"type": "string", "enum": ["TCP", "UDP"], "default": "TCP"},
                },
            },
        },
        "range": {
            "type": "object",
            "required": ["low", "high"],
            "properties": {"low": {"type": "integer"}, "high": {"type": "integer"}},
            "x-kubernetes-validations": [
                {"rule": "self.low <= self.high", "message": "low must not exceed high"}
            ],
        },
    },
    "x-kubernetes-validations": [
        {"rule": "self.size == oldSelf.size", "message": "size is immutable"}
    ],
}
SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["spec"],
    "properties": {
        "apiVersion": {"type": "string"},
        "kind": {"type": "string"},
        "metadata": {"type": "object"},
        "spec": SPEC,
    },
}
WORDS = st.text(alphabet="abcdefghij", min_size=1, max_size=5)


def values(schema: dict[str, Any]) -> st.SearchStrategy[Any]:
    """Values that satisfy ``schema`` (for the keywords SPEC uses)."""
    if "enum" in schema:
        return st.sampled_from(schema["enum"])
    if schema.get("x-kubernetes-int-or-string"):
        return st.one_of(st.integers(-1000, 1000), WORDS)
    kind = schema.get("type")
    if kind == "integer":
        if "multipleOf" in schema:
            return st.integers(-100, 100).map(lambda k: k * schema["multipleOf"])
        return st.integers(schema.get("minimum", -(2**40)), schema.get("maximum", 2**40))
    if kind == "number":
        return st.floats(schema["minimum"], schema["maximum"], exclude_max=True, allow_nan=False)
    if kind == "boolean":
        return st.booleans()
    if kind == "string":
        if schema.get("format") == "date-time":
            moments = st.datetimes(datetime.datetime(2000, 1, 1), datetime.datetime(2100, 1, 1))
            return moments.map(lambda m: m.replace(microsecond=0).isoformat() + "Z")
        if "pattern" in schema:
            return st.from_regex(schema["pattern"], fullmatch=True)
        return st.text(alphabet="abcxyz-", max_size=schema.get("maxLength", 8))
    if kind == "array":
        items = values(schema["items"])
        unique: Callable[[Any], Any] | None = None
        if schema.get("x-kubernetes-list-type") == "set":
            unique = repr
        elif schema.get("x-kubernetes-list-type") == "map":
            keys = schema["x-kubernetes-list-map-keys"]
            unique = lambda item: tuple(item.get(k) for k in keys)  # noqa: E731
        return st.lists(items, max_size=schema.get("maxItems", 3), unique_by=unique)
    if "additionalProperties" in schema:
        return st.dictionaries(
            WORDS, values(schema["additionalProperties"]), max_size=schema.get("maxProperties", 3)
        )
    declared = schema["properties"]
    required = schema.get("required", [])
    result = st.fixed_dictionaries(
        {name: values(declared[name]) for name in required},
        optional={name: values(sub) for name, sub in declared.items() if name not in required},
    )
    if set(declared) == {"low", "high"}:
        return result.map(lambda r: {"low": min(r.values()), "high": max(r.values())})
    return result


def resources() -> st.SearchStrategy[dict[str, Any]]:
    return values(SPEC).map(
        lambda spec: {
            "apiVersion": "example.dev/v1",
            "kind": "Widget",
            "metadata": {"name": "w", "labels": {"a": "b"}},
            "spec": spec,
        }
    )


def admitted(obj: dict[str, Any], old: dict[str, Any] | None = None) -> Admitted:
    return admit(
        SCHEMA,
        obj,
        old,
        field_validation=FieldValidation.STRICT,
        kind="Widget",
        name="w",
        group="example.dev",
        version="v1",
    )


@given(obj=resources())
@settings(max_examples=120, deadline=None)
def test_valid_objects_are_admitted_and_admission_is_idempotent(obj: dict[str, Any]) -> None:
    first = admitted(obj)
    assert first.warnings == ()
    assert first.object["spec"]["mode"] in ("Fast", "Slow")  # defaulted when absent
    assert all("protocol" in port for port in first.object["spec"].get("ports", []))
    again = admitted(first.object)
    assert again.object == first.object
    update = admitted(first.object, first.object)  # an update that changes nothing
    assert update.object == first.object


def _set(path: list[str | int], value: Any) -> Callable[[dict[str, Any]], None]:
    def change(spec: dict[str, Any]) -> None:
        node: Any = spec
        for part in path[:-1]:
            node = node[part]
        node[path[-1]] = value

    return change


def _delete(name: str) -> Callable[[dict[str, Any]], None]:
    def change(spec: dict[str, Any]) -> None:
        del spec[name]

    return change


def _long_label(spec: dict[str, Any]) -> None:
    spec["labels"] = {"k": "x" * 11}


def _repeated_tag(spec: dict[str, Any]) -> None:
    spec["tags"] = ["a", "b", "a"]


def _port_zero(spec: dict[str, Any]) -> None:
    spec["ports"] = [{"port": 80}, {"port": 0}]


def _repeated_port(spec: dict[str, Any]) -> None:
    spec["ports"] = [{"port": 80}, {"port": 80, "protocol": "UDP"}]


def _inverted_range(spec: dict[str, Any]) -> None:
    spec["range"] = {"low": 5, "high": 4}


# (how the spec is broken, the field the refusal must name)
BREAKAGES: list[tuple[Callable[[dict[str, Any]], None], str]] = [
    (_set(["size"], 0), "spec.size"),
    (_set(["size"], 101), "spec.size"),
    (_set(["size"], "big"), "spec.size"),
    (_set(["size"], 2.5), "spec.size"),
    (_delete("size"), "spec.size"),
    (_delete("name"), "spec.name"),
    (_set(["name"], ""), "spec.name"),
    (_set(["name"], "Bad"), "spec.name"),
    (_set(["name"], "a" * 21), "spec.name"),
    (_set(["ratio"], 1.0), "spec.ratio"),
    (_set(["ratio"], -0.5), "spec.ratio"),
    (_set(["step"], 7), "spec.step"),
    (_set(["mode"], "Medium"), "spec.mode"),
    (_set(["enabled"], "yes"), "spec.enabled"),
    (_set(["since"], "never"), "spec.since"),
    (_set(["amount"], 1.5), "spec.amount"),
    (_set(["tags"], "a"), "spec.tags"),
    (_long_label, "spec.labels.k"),
    (_repeated_tag, "spec.tags[2]"),
    (_port_zero, "spec.ports[1].port"),
    (_repeated_port, "spec.ports[1]"),
    (_inverted_range, "spec.range"),
]


@given(obj=resources(), breakage=st.sampled_from(BREAKAGES))
@settings(max_examples=150, deadline=None)
def test_breaking_one_constraint_names_the_broken_field(
    obj: dict[str, Any], breakage: tuple[Callable[[dict[str, Any]], None], str]
) -> None:
    change, broken = breakage
    bad = copy.deepcopy(obj)
    change(bad["spec"])
    with pytest.raises(ApiError) as raised:
        admitted(bad)
    fields = [cause.field for cause in raised.value.causes]
    assert broken in fields, (fields, raised.value.message)
    assert re.match(r'^Widget\.example\.dev "w" is invalid: ', raised.value.message)


@given(obj=resources(), size=st.integers(1, 100))
@settings(max_examples=40, deadline=None)
def test_a_transition_rule_holds_across_updates(obj: dict[str, Any], size: int) -> None:
    stored = admitted(obj).object
    update = copy.deepcopy(stored)
    update["spec"]["size"] = size
    if size == stored["spec"]["size"]:
        assert admitted(update, stored).object == update
        return
    with pytest.raises(ApiError) as raised:
        admitted(update, stored)
    assert [c.describe() for c in raised.value.causes] == ["spec: Invalid value: size is immutable"]
