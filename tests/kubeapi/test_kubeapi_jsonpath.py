"""Kubernetes JSONPath as printer columns use it (client-go's util/jsonpath semantics)."""

from __future__ import annotations

from typing import Any

import pytest

from scalable_topics.kubeapi import jsonpath
from scalable_topics.kubeapi.go_values import go_float

OBJ: dict[str, Any] = {
    "metadata": {"name": "orders", "labels": {"app.kubernetes.io/name": "st"}},
    "spec": {"ids": [10, 11, 12, 13]},
    "status": {
        "phase": None,
        "conditions": [
            {"type": "Ready", "status": "True", "generation": 3},
            {"type": "Scaling", "status": "False"},
        ],
    },
}


def first(path: str, obj: Any = OBJ) -> list[Any]:
    return jsonpath.parse_column_path(path).find_results(obj)[0]


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        (".metadata.name", ["orders"]),
        (".status.phase", [None]),  # present but null: found
        (".status.missing", []),  # missing keys are allowed
        (".status.conditions[0].type", ["Ready"]),
        (".status.conditions[-1].type", ["Scaling"]),
        (".spec.ids[1:3]", [11, 12]),
        (".spec.ids[::2]", [10, 12]),
        (".spec.ids[*]", [10, 11, 12, 13]),
        (".spec.ids[0,3]", [10, 13]),
        ('.status.conditions[?(@.type=="Ready")].status', ["True"]),
        (".status.conditions[?(@.type=='Scaling')].status", ["False"]),
        ('.status.conditions[?(@.type!="Ready")].type', ["Scaling"]),
        (".status.conditions[?(@.generation)].type", ["Ready"]),
        (".status.conditions[?(@.generation>=3)].type", ["Ready"]),
        (".metadata.labels.app\\.kubernetes\\.io/name", ["st"]),
        ("..type", ["Ready", "Scaling"]),
        (".status.conditions[*].type", ["Ready", "Scaling"]),
    ],
)
def test_paths(path: str, expected: list[Any]) -> None:
    assert first(path) == expected


@pytest.mark.parametrize(
    "path",
    [
        ".spec.ids[9]",  # out of bounds
        ".metadata.name[0]",  # not an array
        ".status.conditions[?(@.generation>2.5)].type",  # an integer and a float do not compare
        ".status.conditions[?(@.type>1)].type",  # nor a string and a number
    ],
)
def test_evaluation_errors(path: str) -> None:
    with pytest.raises(jsonpath.JSONPathError):
        first(path)


@pytest.mark.parametrize("path", [".spec[", ".spec[?(@.a==1]", ".spec[a-b]", "range"])
def test_parse_errors(path: str) -> None:
    with pytest.raises(jsonpath.JSONPathError):
        jsonpath.parse_column_path(path).find_results({"spec": {}, "a": {}})


def test_missing_keys_can_be_errors() -> None:
    template = jsonpath.parse_column_path(".status.missing")
    with pytest.raises(jsonpath.JSONPathError, match="missing is not found"):
        template.find_results(OBJ, allow_missing_keys=False)


def test_templates_with_text() -> None:
    template = jsonpath.parse("{.metadata.name}/{.status.conditions[0].type}")
    assert template.find_results(OBJ) == [["orders"], ["/"], ["Ready"]]


@pytest.mark.parametrize(
    ("value", "printed"),
    [
        ("x", "x"),
        (3, "3"),
        (2.5, "2.5"),
        (3.0, "3"),
        (True, "true"),
        (None, "<no value>"),
        ({"b": 1, "a": "<"}, '{"a":"\\u003c","b":1}'),
        ([1, "a"], '[1,"a"]'),
    ],
)
def test_print_value(value: Any, printed: str) -> None:
    assert jsonpath.print_value(value) == printed


@pytest.mark.parametrize(
    ("value", "printed"),
    [
        (100000.0, "100000"),
        (1e6, "1e+06"),
        (1234567.0, "1.234567e+06"),
        (0.0001, "0.0001"),
        (0.00001, "1e-05"),
        (-2.5, "-2.5"),
        (float("inf"), "+Inf"),
    ],
)
def test_go_float(value: float, printed: str) -> None:
    assert go_float(value) == printed
