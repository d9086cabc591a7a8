"""Field causes in the API server's words."""

from __future__ import annotations

from typing import Any

import pytest

from scalable_topics.kubeapi import fielderrors
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
    ],
)
def test_values_render_as_go_renders_them(value: Any, shown: str) -> None:
    assert fielderrors.go_value(value) == shown


def test_cause_wording() -> None:
    assert fielderrors.required("spec.a").message == "Required value"
    assert fielderrors.required("spec.a", "must be set").message == "Required value: must be set"
    cause = fielderrors.invalid("spec.a", "x", "is bad")
    assert (cause.reason, cause.field, cause.message) == (
        CauseType.INVALID,
        "spec.a",
        'Invalid value: "x": is bad',
    )
    assert fielderrors.not_supported("spec.a", "z", ["x", "y"]).message == (
        'Unsupported value: "z": supported values: "x", "y"'
    )
    assert fielderrors.forbidden("spec.a", "no").message == "Forbidden: no"
    assert fielderrors.too_many("spec.a", 9, 8).message == "Too many: 9: must have at most 8 items"


def test_name_rules() -> None:
    assert fielderrors.dns1035_label_errors("widgets") == []
    assert fielderrors.dns1035_label_errors("1widget") == [
        "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an "
        "alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', "
        "regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')"
    ]
    assert (
        fielderrors.dns1123_subdomain_errors("a" * 254)[0] == "must be no more than 253 characters"
    )
    assert fielderrors.dns1123_label_errors("a.b") == ["must not contain dots"]
    assert fielderrors.qualified_name_errors("example.com/ok") == []
    assert fielderrors.qualified_name_errors("/x") == ["prefix part must be non-empty"]
