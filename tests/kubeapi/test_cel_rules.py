"""x-kubernetes-validations: evaluated with celpy on synthetic schemas (messages, reasons,
fieldPath, messageExpression, transition rules, ratcheting, runtime errors, the CEL libraries) and
checked when a CRD is applied (compilation errors, uncorrelatable oldSelf, rule fields)."""

from __future__ import annotations

from typing import Any

import pytest

from scalable_topics.kubeapi import cel_rules, crd_rules
from scalable_topics.kubeapi.correlation import Correlated
from scalable_topics.kubeapi.status import CauseType

SCHEMA_PATH = "spec.versions[0].schema.openAPIV3Schema"
PROPERTIES: dict[str, Any] = {
    "x": {"type": "integer"},
    "s": {"type": "string"},
    "n": {"type": "number"},
    "l": {"type": "array", "items": {"type": "string"}},
    "m": {"type": "object", "additionalProperties": {"type": "integer"}},
    "a": {"type": "object", "properties": {"b": {"type": "string"}}},
    "t": {"type": "string", "format": "date-time"},
    "d": {"type": "string", "format": "duration"},
    "foo-bar": {"type": "string"},
}


def rule(text: str, **extra: Any) -> dict[str, Any]:
    return {"rule": text, **extra}


def node(*rules: dict[str, Any], **schema: Any) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": PROPERTIES,
        "x-kubernetes-validations": list(rules),
        **schema,
    }


def run(schema: dict[str, Any], obj: Any, old: Any = None) -> cel_rules.Outcome:
    correlation = Correlated(obj, old, schema) if old is not None else None
    return cel_rules.validate(schema, obj, old, correlation)


def messages(schema: dict[str, Any], obj: Any, old: Any = None) -> list[str]:
    return [cause.describe() for cause in run(schema, obj, old).errors]


def under_spec(*rules: dict[str, Any]) -> dict[str, Any]:
    return {"type": "object", "properties": {"spec": node(*rules)}}


def test_a_false_rule_names_its_node_and_leaves_out_objects_values() -> None:
    assert messages(under_spec(rule("self.x > 0")), {"spec": {"x": 0}}) == [
        "spec: Invalid value: failed rule: self.x > 0"
    ]
    assert messages(node(rule("self.x > 0")), {"x": 0}) == [
        "<nil>: Invalid value: failed rule: self.x > 0"
    ]
    scalar = {
        "type": "object",
        "properties": {"s": {"type": "string", "x-kubernetes-validations": [rule("self == 'x'")]}},
    }
    assert messages(scalar, {"s": "y"}) == ["s: Invalid value: \"y\": failed rule: self == 'x'"]


def test_message_reason_and_field_path() -> None:
    forbid = rule(
        "self.x > 0", message=" x must be positive ", reason="FieldValueForbidden", fieldPath=".x"
    )
    assert [
        (c.field, c.reason, c.message) for c in run(under_spec(forbid), {"spec": {"x": 0}}).errors
    ] == [("spec.x", CauseType.FORBIDDEN, "Forbidden: x must be positive")]
    required = rule("has(self.s)", reason="FieldValueRequired", fieldPath="['s']")
    assert messages(under_spec(required), {"spec": {}}) == [
        "spec.s: Required value: failed rule: has(self.s)"
    ]
    duplicate = rule("self.x > 0", reason="FieldValueDuplicate", fieldPath=".m['k']")
    assert messages(under_spec(duplicate), {"spec": {"x": 0}}) == ["spec.m[k]: Duplicate value"]
    unknown_path = rule("self.x > 0", fieldPath=".nope")
    assert messages(under_spec(unknown_path), {"spec": {"x": 0}}) == [
        "spec: Invalid value: failed rule: self.x > 0"
    ]


def test_message_expression() -> None:
    evaluated = rule("self.x > 0", messageExpression="'x is ' + string(self.x) + ', not positive'")
    assert messages(under_spec(evaluated), {"spec": {"x": -2}}) == [
        "spec: Invalid value: x is -2, not positive"
    ]
    failing = rule("self.x > 0", message="fallback", messageExpression="self.s")
    assert messages(under_spec(failing), {"spec": {"x": 0}}) == ["spec: Invalid value: fallback"]
    blank = rule("self.x > 0", messageExpression="'  '")
    assert messages(under_spec(blank), {"spec": {"x": 0}}) == [
        "spec: Invalid value: failed rule: self.x > 0"
    ]


def test_runtime_errors_in_kube_apiservers_words() -> None:
    cases = {
        "self.s == 'x'": "spec: Invalid value: \"object\": no such key: s evaluating rule: self.s == 'x'",
        "has(self.a.b)": 'spec: Invalid value: "object": no such key: a evaluating rule: has(self.a.b)',
        "self.m['k'] == 1": "spec: Invalid value: \"object\": no such key: k evaluating rule: self.m['k'] == 1",
        "self.l[3] == 'a'": "spec: Invalid value: \"object\": index out of bounds: 3 evaluating rule: self.l[3] == 'a'",
        "self.x / 0 == 1": 'spec: Invalid value: "object": division by zero evaluating rule: self.x / 0 == 1',
        "self.x % 0 == 1": 'spec: Invalid value: "object": modulus by zero evaluating rule: self.x % 0 == 1',
        "9223372036854775807 + self.x > 0": 'spec: Invalid value: "object": integer overflow evaluating '
        "rule: 9223372036854775807 + self.x > 0",
    }
    for text, expected in cases.items():
        assert messages(under_spec(rule(text)), {"spec": {"x": 1, "l": [], "m": {}}}) == [expected]
    described = rule("self.s == 'x'", message="s must be x")
    assert messages(under_spec(described), {"spec": {}}) == [
        'spec: Invalid value: "object": no such key: s evaluating rule: s must be x'
    ]
    dyn = {
        "type": "object",
        "properties": {
            "f": {
                "x-kubernetes-int-or-string": True,
                "x-kubernetes-validations": [rule("self + 1 > 0")],
            }
        },
    }
    assert messages(dyn, {"f": "a"}) == [
        "f: Invalid value: \"\": 'no such overload': call arguments did not match a supported operator, "
        "function or macro signature for rule: self + 1 > 0"
    ]


def test_values_are_typed_by_the_schema() -> None:
    assert (
        messages(node(rule("self.n > 1 && self.n == 5 && double(self.n) == 5.0")), {"n": 5}) == []
    )
    assert messages(node(rule("self.x < 2.5 && self.x == 2")), {"x": 2}) == []  # cross-type numbers
    assert messages(node(rule("self.x == 3")), {"x": 3.0}) == [
        '<nil>: Invalid value: "object": invalid data, expected int, got float64 evaluating rule: self.x == 3'
    ]
    assert (
        messages(
            node(rule("self.t > timestamp('2020-01-01T00:00:00Z')")), {"t": "2024-05-01T10:00:00Z"}
        )
        == []
    )
    assert messages(node(rule("self.d < duration('1h')")), {"d": "30m"}) == []
    assert messages(node(rule("self.foo__dash__bar == 'y'")), {"foo-bar": "y"}) == []
    assert messages(node(rule("!has(self.a) || has(self.a.b)")), {}) == []
    nullable = {
        "type": "object",
        "properties": {"o": {"type": "string", "nullable": True}},
        "x-kubernetes-validations": [rule("!has(self.o)")],
    }
    assert messages(nullable, {"o": None}) == []  # a null field is absent


def test_the_resource_root_sees_its_name() -> None:
    schema = node(rule("self.metadata.name.startsWith('a') && self.kind == 'K'"))
    assert messages(schema, {"apiVersion": "v1", "kind": "K", "metadata": {"name": "alice"}}) == []
    assert (
        len(messages(schema, {"apiVersion": "v1", "kind": "K", "metadata": {"name": "bob"}})) == 1
    )


@pytest.mark.parametrize(
    "text",
    [
        "self.s.lowerAscii() == 'abc' && self.s.upperAscii() == 'ABC' && self.s.charAt(1) == 'B'",
        "self.s.indexOf('B') == 1 && self.s.lastIndexOf('C') == 2 && self.s.substring(1) == 'BC'",
        "self.s.replace('B', '-') == 'A-C' && self.s.split('B') == ['A', 'C'] && ' a '.trim() == 'a'",
        "['a', 'b'].join('-') == 'a-b' && [1, 2, 3].isSorted() && [1, 2].sum() == 3",
        "[3, 1, 2].min() == 1 && [3, 1, 2].max() == 3 && [1, 2, 3].indexOf(2) == 1",
        "[[1], [2, 3]].flatten() == [1, 2, 3] && [1, 2, 3].slice(1, 2) == [2]",
        "'abc123'.find('[0-9]+') == '123' && 'a1b2'.findAll('[0-9]') == ['1', '2']",
        "sets.contains([1, 2, 3], [2]) && sets.equivalent([1, 2], [2, 1]) && sets.intersects([1], [1, 5])",
        "optional.none().orValue(5) == 5 && optional.of(1).value() == 1 && !optional.none().hasValue()",
        "self.l.all(i, i.size() < 3) && self.l.exists(i, i == 'a') && self.l.exists_one(i, i == 'b')",
        "self.l.map(i, i + '!') == ['a!', 'b!'] && self.l.filter(i, i != 'a') == ['b']",
        "self.m.all(k, self.m[k] > 0) && 'k' in self.m && size(self.m) == 1",
        "1 == 1.0 && 1 != 'a' && [1, 'a'] != [1, 'b'] && type(self.s) == string",
    ],
)
def test_library_functions(text: str) -> None:
    assert messages(node(rule(text)), {"s": "ABC", "l": ["a", "b"], "m": {"k": 1}}) == []


def test_transition_rules_run_only_on_update() -> None:
    schema = {
        "type": "object",
        "properties": {
            "field": {"type": "string", "x-kubernetes-validations": [rule("self == oldSelf")]}
        },
    }
    assert messages(schema, {"field": "y"}) == []
    assert messages(schema, {"field": "x"}, {"field": "x"}) == []
    assert messages(schema, {"field": "y"}, {"field": "x"}) == [
        'field: Invalid value: "y": failed rule: self == oldSelf'
    ]
    assert messages(schema, {"field": "y"}, {"other": 1}) == []  # nothing to compare with


def test_transition_rules_under_a_list_map_correlate_by_keys() -> None:
    schema = {
        "type": "object",
        "properties": {
            "field": {
                "type": "array",
                "x-kubernetes-list-type": "map",
                "x-kubernetes-list-map-keys": ["k1", "k2"],
                "items": {
                    "type": "object",
                    "properties": {
                        "k1": {"type": "string"},
                        "k2": {"type": "string"},
                        "v1": {
                            "type": "number",
                            "x-kubernetes-validations": [rule("self >= oldSelf")],
                        },
                    },
                },
            }
        },
    }
    old = {"field": [{"k1": "a", "k2": "b", "v1": 1.0}]}
    assert messages(schema, {"field": [{"k1": "a", "k2": "b", "v1": 1.2}]}, old) == []
    assert messages(schema, {"field": [{"k1": "a", "k2": "b", "v1": 0.9}]}, old) == [
        "field[0].v1: Invalid value: 0.9: failed rule: self >= oldSelf"
    ]
    moved = {"field": [{"k1": "z", "k2": "z", "v1": 0}, {"k1": "a", "k2": "b", "v1": 0.5}]}
    assert messages(schema, moved, old) == [
        "field[1].v1: Invalid value: 0.5: failed rule: self >= oldSelf"
    ]


def test_rules_under_uncorrelatable_lists_still_run() -> None:
    schema = {
        "type": "object",
        "properties": {
            "field": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {
                        "x": {"type": "string", "x-kubernetes-validations": [rule("self == 'x'")]}
                    },
                },
            }
        },
    }
    assert messages(schema, {"field": [{"x": "x"}]}) == []
    assert messages(schema, {"field": [{"x": "y"}]}) == [
        "field[0].x: Invalid value: \"y\": failed rule: self == 'x'"
    ]


def test_optional_old_self() -> None:
    schema = {
        "type": "object",
        "properties": {
            "n": {
                "type": "integer",
                "x-kubernetes-validations": [
                    rule(
                        "!oldSelf.hasValue() || self >= oldSelf.value()",
                        optionalOldSelf=True,
                        message="may only grow",
                    )
                ],
            }
        },
    }
    assert messages(schema, {"n": 1}) == []  # evaluated on create too
    assert messages(schema, {"n": 3}, {"n": 2}) == []
    assert messages(schema, {"n": 1}, {"n": 2}) == ["n: Invalid value: 1: may only grow"]


def test_list_types_compare_as_cel_values_do() -> None:
    def immutable(list_schema: dict[str, Any]) -> dict[str, Any]:
        return {
            "type": "object",
            "properties": {
                "l": {**list_schema, "x-kubernetes-validations": [rule("self == oldSelf")]}
            },
        }

    keyed = immutable(
        {
            "type": "array",
            "x-kubernetes-list-type": "map",
            "x-kubernetes-list-map-keys": ["name"],
            "items": {
                "type": "object",
                "properties": {"name": {"type": "string"}, "v": {"type": "integer"}},
            },
        }
    )
    old = {"l": [{"name": "a", "v": 1}, {"name": "b", "v": 2}]}
    assert messages(keyed, {"l": [{"name": "b", "v": 2}, {"name": "a", "v": 1}]}, old) == []
    assert len(messages(keyed, {"l": [{"name": "b", "v": 3}, {"name": "a", "v": 1}]}, old)) == 1
    sets = immutable(
        {"type": "array", "x-kubernetes-list-type": "set", "items": {"type": "integer"}}
    )
    assert messages(sets, {"l": [2, 1]}, {"l": [1, 2]}) == []
    atomic = immutable({"type": "array", "items": {"type": "integer"}})
    assert messages(atomic, {"l": [2, 1]}, {"l": [1, 2]}) == [
        "l: Invalid value: failed rule: self == oldSelf"
    ]


def test_unchanged_values_ratchet_rule_errors_into_warnings() -> None:
    schema = under_spec(rule("self.x > 0"), rule("self.s == oldSelf.s"))
    old = {"spec": {"x": 0, "s": "a"}}
    ratcheted = run(schema, {"spec": {"x": 0, "s": "a"}}, old)
    assert ratcheted.errors == []
    assert ratcheted.warnings == ["spec: Invalid value: failed rule: self.x > 0"]
    changed = run(schema, {"spec": {"x": -1, "s": "b"}}, old)
    assert [c.describe() for c in changed.errors] == [
        "spec: Invalid value: failed rule: self.x > 0",
        "spec: Invalid value: failed rule: self.s == oldSelf.s",
    ]


def test_a_rule_that_does_not_compile_is_reported_where_it_runs() -> None:
    assert messages(under_spec(rule("self.x >")), {"spec": {}}) == [
        'spec: Invalid value: "object": rule compile error: compilation failed: ERROR: <input>:1:9: '
        "Syntax error: mismatched input '<EOF>'\n | self.x >\n | ........^"
    ]


def checked(*rules: dict[str, Any], schema: dict[str, Any] | None = None) -> list[str]:
    return [cause.describe() for cause in crd_rules.check_rules(schema or under_spec(*rules))]


RULE_PATH = f"{SCHEMA_PATH}.properties[spec].x-kubernetes-validations[0]"


def test_check_rules_accepts_good_rules() -> None:
    assert checked(rule("self.x > 0 && self.a.b != '' && self.m.all(k, self.m[k] > 0)")) == []
    assert checked(rule("self.s == oldSelf.s", message="s is immutable", fieldPath=".s")) == []


def test_check_rules_reports_compilation_failures() -> None:
    assert checked(rule("self.nope > 0")) == [
        f'{RULE_PATH}.rule: Invalid value: {{"Rule":"self.nope \\u003e 0","Message":"","MessageExpression":"",'
        '"Reason":null,"FieldPath":"","OptionalOldSelf":null}: compilation failed: ERROR: <input>:1:5: '
        "undefined field 'nope'\n | self.nope > 0\n | ....^"
    ]
    undeclared = checked(rule("foo == 1"))
    assert undeclared[0].endswith(
        "compilation failed: ERROR: <input>:1:1: undeclared reference to 'foo' (in container '')\n | foo == 1\n | ^"
    )
    assert checked(rule("self.l.all(i, i.size() > 0 && i.b == 1)"))[0].endswith(
        "compilation failed: ERROR: <input>:1:32: type 'string' does not support field selection\n"
        " | self.l.all(i, i.size() > 0 && i.b == 1)\n"
        " | ...............................^"
    )
    assert "cel expression must evaluate to a bool" in checked(rule("self.x + 1"))[0]
    assert (
        "messageExpression must evaluate to a string"
        in checked(rule("self.x > 0", messageExpression="1 + 2"))[0]
    )
    assert "this API server does not provide" in checked(rule("quantity('1') > 0"))[0]
    assert "Syntax error" in checked(rule("self.?s == 'a'"))[0]


def test_check_rules_reports_bad_rule_fields() -> None:
    assert checked(rule("self.x > 0", message=" ", reason="Bogus", fieldPath=".nope")) == [
        f'{RULE_PATH}.message: Invalid value: " ": must be non-empty if specified',
        f'{RULE_PATH}.reason: Unsupported value: "Bogus": supported values: "FieldValueDuplicate", '
        '"FieldValueForbidden", "FieldValueInvalid", "FieldValueRequired"',
        f'{RULE_PATH}.fieldPath: Invalid value: ".nope": must be a valid path',
    ]
    assert checked(rule("  ")) == [f"{RULE_PATH}.rule: Required value: rule is not specified"]
    assert checked(rule("self.x > 0 &&\nself.x < 5")) == [
        f"{RULE_PATH}.message: Required value: message must be specified if rule contains line breaks"
    ]
    assert checked(rule("self.x > 0", optionalOldSelf=True)) == [
        f"{RULE_PATH}.optionalOldSelf: Invalid value: true: may not be set if oldSelf is not used in rule"
    ]


def test_check_rules_refuses_old_self_where_nothing_correlates() -> None:
    schema = {
        "type": "object",
        "properties": {
            "list": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {"a": {"type": "string"}},
                    "x-kubernetes-validations": [rule("self.a == oldSelf.a")],
                },
            }
        },
    }
    assert checked(schema=schema) == [
        f"{SCHEMA_PATH}.properties[list].items.x-kubernetes-validations[0].rule: Invalid value: "
        f'"self.a == oldSelf.a": oldSelf cannot be used on the uncorrelatable portion of the schema '
        f"within {SCHEMA_PATH}.properties[list]"
    ]
    schema["properties"]["list"]["x-kubernetes-list-type"] = "map"
    schema["properties"]["list"]["x-kubernetes-list-map-keys"] = ["a"]
    assert checked(schema=schema) == []


def test_field_paths_normalize_as_kube_apiserver_writes_them() -> None:
    schema = node()
    assert cel_rules.normalize_field_path(".a.b", schema) == "a.b"
    assert cel_rules.normalize_field_path("['foo-bar']", schema) == "foo-bar"
    assert cel_rules.normalize_field_path(".m['k.1']", schema) == "m[k.1]"
    for bad in (".nope", "a", ".a.b.c", "[a]", ".m['k'].x"):
        with pytest.raises(ValueError, match=r"."):
            cel_rules.normalize_field_path(bad, schema)
