"""The name rules, in k8s.io/apimachinery's words."""

from __future__ import annotations

from scalable_topics.kubeapi import name_rules

_QUALIFIED_NAME_REGEX = (
    "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an "
    "alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for "
    "validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"
)


def test_name_rules() -> None:
    assert name_rules.dns1035_label_errors("widgets") == []
    assert name_rules.dns1035_label_errors("1widget") == [
        "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an "
        "alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', "
        "regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')"
    ]
    assert (
        name_rules.dns1123_subdomain_errors("a" * 254)[0] == "must be no more than 253 characters"
    )
    assert name_rules.dns1123_label_errors("a.b") == ["must not contain dots"]
    assert name_rules.qualified_name_errors("example.com/ok") == []
    assert name_rules.qualified_name_errors("/x") == ["prefix part must be non-empty"]


def test_dns1123_messages() -> None:
    assert name_rules.dns1123_label_errors("Bad_Name") == [
        "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', "
        "and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', "
        "regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')"
    ]
    assert name_rules.dns1123_subdomain_errors("Bad_Name") == [
        "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' "
        "or '.', and must start and end with an alphanumeric character (e.g. 'example.com', "
        "regex used for validation is "
        "'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
    ]
    assert name_rules.dns1123_label_errors("a" * 64) == ["must be no more than 63 characters"]


def test_qualified_names_are_label_keys() -> None:
    """content.IsLabelKey: lengths in bytes, an empty name also fails the regex, and more than
    one '/' is one message of its own."""
    assert name_rules.qualified_name_errors("example.com/") == [
        "name part must be non-empty",
        "name part " + _QUALIFIED_NAME_REGEX,
    ]
    assert name_rules.qualified_name_errors("a" * 64) == ["name part must be no more than 63 bytes"]
    assert name_rules.qualified_name_errors(("a" * 254) + "/x") == [
        "prefix part must be no more than 253 bytes"
    ]
    assert name_rules.qualified_name_errors("a/b/c") == [
        "a valid label key "
        + _QUALIFIED_NAME_REGEX
        + " with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"
    ]


def test_label_values() -> None:
    assert name_rules.label_value_errors("") == []
    assert name_rules.label_value_errors("my_value.1") == []
    assert name_rules.label_value_errors("a" * 64) == ["must be no more than 63 bytes"]
    assert name_rules.label_value_errors("bad value") == [
        "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' "
        "or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or "
        "'my_value',  or '12345', regex used for validation is "
        "'(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"
    ]


def test_lengths_are_go_lengths_in_bytes() -> None:
    assert "must be no more than 63 characters" in name_rules.dns1123_label_errors("é" * 32)
    assert "must be no more than 63 bytes" in name_rules.label_value_errors("é" * 32)
