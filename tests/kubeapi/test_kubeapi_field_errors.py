"""Field causes in the API server's words, and values rendered as its Go code renders them."""

from __future__ import annotations

from typing import Any

import pytest

from scalable_topics.kubeapi import field_errors as fe
from scalable_topics.kubeapi.go_values import go_json, go_quote, go_scalar
from scalable_topics.kubeapi.status import CauseType


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        ('a"b', '"a\\"b"'),
        ("tab\there", '"tab\\there"'),
        (0, "0"),
        (2.5, "2.5"),
        (True, "true"),
        (None, "null"),
        (["b", "a"], '["b","a"]'),
        ({"b": 1, "a": 2}, '{"a":2,"b":1}'),
        # json.Marshal: whole floats bare, no exponent below 1e21, "e-7" not "e-07".
        ({"a": 3.0, "b": 1e16, "c": 1e-7}, '{"a":3,"b":10000000000000000,"c":1e-7}'),
        # json.Marshal escapes U+2028/U+2029; a lone surrogate was U+FFFD once Go decoded it.
        (["\u2028", "a\ud800"], '["\\u2028","a\\ufffd"]'),
    ],
)
def test_values_render_as_go_renders_them(value: Any, shown: str) -> None:
    assert go_scalar(value) == shown


def test_strings_quote_as_strconv_quote() -> None:
    assert go_quote("a\ud800") == '"a\ufffd"'
    assert go_quote("\x7f\x1b\u00a0") == '"\\x7f\\x1b\\u00a0"'
    assert go_json("<&>") == '"\\u003c\\u0026\\u003e"'


def test_cause_wording() -> None:
    assert fe.required("spec.a").message == "Required value"
    assert fe.required("spec.a", "must be set").message == "Required value: must be set"
    cause = fe.invalid("spec.a", "x", "is bad")
    assert (cause.reason, cause.field, cause.message) == (
        CauseType.INVALID,
        "spec.a",
        'Invalid value: "x": is bad',
    )
    assert fe.not_supported("spec.a", "z", ["x", "y"]).message == (
        'Unsupported value: "z": supported values: "x", "y"'
    )
    assert fe.forbidden("spec.a", "no").message == "Forbidden: no"
    assert fe.too_many("spec.a", 9, 8).message == "Too many: 9: must have at most 8 items"
    assert fe.too_long("spec.a", 128).message == "Too long: may not be more than 128 bytes"
    assert fe.duplicate("spec.a", {"k": 1}).message == 'Duplicate value: {"k":1}'
    assert fe.type_invalid("spec.a", 1, "must be a string").message == (
        "Invalid value: 1: must be a string"
    )


def test_paths() -> None:
    assert fe.child(fe.index(fe.child("spec", "subscriptions"), 0), "name") == (
        "spec.subscriptions[0].name"
    )
    assert fe.key("spec.properties", "tier") == "spec.properties[tier]"
    assert fe.required("").field == "<nil>"
