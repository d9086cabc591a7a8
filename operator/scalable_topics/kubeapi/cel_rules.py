"""x-kubernetes-validations evaluated on custom resources the way apiextensions-apiserver
evaluates them: ``self`` is the value at the rule's node (typed by the schema), transition rules
(``oldSelf``) run only on update and where the stored value correlates, a false rule is reported
at its node (or its fieldPath) with its message, messageExpression and reason, and errors in parts
the update left unchanged become warnings (ratcheting)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from celpy.evaluation import CELEvalError

from scalable_topics.kubeapi import field_errors as fe
from scalable_topics.kubeapi import structural as st
from scalable_topics.kubeapi.cel_compile import OLD_SELF, SELF, compile_expression
from scalable_topics.kubeapi.cel_values import Optional, is_bool, resource_schema, to_cel
from scalable_topics.kubeapi.correlation import Correlated, MapList
from scalable_topics.kubeapi.go_values import go_json
from scalable_topics.kubeapi.status import Cause, CauseType
from scalable_topics.kubeapi.structural import Schema

REASONS: Final = (
    "FieldValueDuplicate",
    "FieldValueForbidden",
    "FieldValueInvalid",
    "FieldValueRequired",
)
MAX_MESSAGE_BYTES: Final = 5 * 1024


@dataclass(frozen=True)
class Rule:
    """One entry of x-kubernetes-validations."""

    rule: str
    message: str = ""
    message_expression: str = ""
    reason: str | None = None
    field_path: str = ""
    optional_old_self: bool | None = None

    @classmethod
    def read(cls, entry: Mapping[str, Any]) -> Rule:
        def text(name: str) -> str:
            value = entry.get(name)
            return value if isinstance(value, str) else ""

        reason = entry.get("reason")
        optional = entry.get("optionalOldSelf")
        return cls(
            rule=text("rule"),
            message=text("message"),
            message_expression=text("messageExpression"),
            reason=reason if isinstance(reason, str) else None,
            field_path=text("fieldPath"),
            optional_old_self=optional if isinstance(optional, bool) else None,
        )

    def describe(self) -> str:
        """ruleErrorString: the message, or else the rule."""
        return self.message.strip() if self.message else self.rule.strip()

    def default_message(self) -> str:
        return self.message.strip() if self.message else f"failed rule: {self.rule.strip()}"

    def go_value(self) -> str:
        """The rule as the CRD validation prints it (json.Marshal of apiextensions.ValidationRule)."""
        parts = [
            ("Rule", go_json(self.rule)),
            ("Message", go_json(self.message)),
            ("MessageExpression", go_json(self.message_expression)),
            ("Reason", go_json(self.reason)),
            ("FieldPath", go_json(self.field_path)),
            ("OptionalOldSelf", go_json(self.optional_old_self)),
        ]
        return "{" + ",".join(f'"{name}":{value}' for name, value in parts) + "}"


class _InvalidPath(ValueError):
    pass


def _tokens(path: str) -> list[str]:
    tokens: list[str] = []
    position = 0
    while position < len(path):
        char = path[position]
        if char == "'":
            end = position + 1
            while end < len(path) and not (path[end] == "'" and path[end - 1] != "\\"):
                end += 1
            tokens.append(path[position : end + 1])
            position = end + 1
        elif char in ".[]":
            tokens.append(char)
            position += 1
        else:
            end = position
            while end < len(path) and path[end] not in ".[]'":
                end += 1
            tokens.append(path[position:end])
            position = end
    return tokens


_UNESCAPES: Final = {
    "a": "\a",
    "b": "\b",
    "f": "\f",
    "n": "\n",
    "r": "\r",
    "t": "\t",
    "v": "\v",
    "'": "'",
    "\\": "\\",
}


def _unescape(quoted: str) -> str:
    out: list[str] = []
    position = 0
    while position < len(quoted):
        if quoted[position] == "\\" and position + 1 < len(quoted):
            escaped = quoted[position + 1]
            if escaped not in _UNESCAPES:
                raise _InvalidPath(f"invalid string literal: invalid escape char \\{escaped}")
            out.append(_UNESCAPES[escaped])
            position += 2
        else:
            out.append(quoted[position])
            position += 1
    return "".join(out)


def normalize_field_path(path: str, schema: Schema) -> str:
    """ValidFieldPath: ``.a.b``, ``['a.b']``, ``.map['key']`` checked against ``schema`` and
    written as a field path (``a.b``, ``map[key]``); raises ValueError when it is not valid."""
    tokens = iter(_tokens(path))
    result = ""
    node: Schema | None = schema

    def step(name: str) -> None:
        nonlocal result, node
        if node is None:
            raise _InvalidPath("does not refer to a valid field")
        if st.declares_properties(node):
            found = st.properties(node).get(name)
            if found is None:
                raise _InvalidPath("does not refer to a valid field")
            result, node = fe.child(result, name), found
        elif st.has_additional(node):
            result, node = fe.key(result, name), st.additional(node)
        else:
            raise _InvalidPath("does not refer to a valid field")

    for token in tokens:
        if token == "[":
            quoted = next(tokens, None)
            if quoted is None:
                raise _InvalidPath("unexpected end of JSON path")
            if len(quoted) < 2 or quoted[0] != "'" or quoted[-1] != "'":
                raise _InvalidPath(f"expected single quoted string but got {quoted}")
            step(_unescape(quoted[1:-1]))
            if next(tokens, None) != "]":
                raise _InvalidPath("expected ] but got something else")
        elif token == ".":
            name = next(tokens, None)
            if name is None:
                raise _InvalidPath("unexpected end of JSON path")
            step(name)
        else:
            raise _InvalidPath(f"expected [ or . but got: {token}")
    return result


@dataclass(frozen=True)
class _Ratchet:
    """The correlated value of a node and of its nearest correlated ancestor (ratchetingOptions)."""

    current: Correlated | None = None
    parent: Correlated | None = None

    def key(self, name: str) -> _Ratchet:
        if self.current is None:
            return self
        if self.parent is None and name in ("apiVersion", "kind"):
            return _Ratchet()
        return _Ratchet(self.current.key(name), self.current)

    def index(self, position: int) -> _Ratchet:
        if self.current is None:
            return self
        return _Ratchet(self.current.index(position), self.current)

    def unchanged(self) -> bool:
        if self.current is not None:
            return self.current.unchanged()
        return self.parent is not None and self.parent.unchanged()


@dataclass
class Outcome:
    errors: list[Cause] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


def validate(
    schema: Schema, new: object, old: object | None, correlation: Correlated | None
) -> Outcome:
    """Evaluate every rule of ``schema`` on ``new`` (a whole resource; ``old`` on update)."""
    outcome = Outcome()
    _walk(schema, new, old, "", _Ratchet(correlation), True, outcome)
    return outcome


def _walk(
    schema: Schema,
    value: object,
    old: object,
    path: str,
    ratchet: _Ratchet,
    resource: bool,
    outcome: Outcome,
) -> None:
    if value is None:
        return
    rules = st.validations(schema)
    if rules:
        _evaluate(
            schema, [Rule.read(r) for r in rules], value, old, path, ratchet, resource, outcome
        )
    if isinstance(value, list):
        item_schema = st.items(schema)
        if item_schema is None:
            return
        old_items = MapList(schema, old) if isinstance(old, list) else None
        for position, item in enumerate(value):
            old_item = old_items.get(item) if old_items is not None else None
            _walk(
                item_schema,
                item,
                old_item,
                fe.index(path, position),
                ratchet.index(position),
                st.embedded_resource(item_schema),
                outcome,
            )
    elif isinstance(value, dict):
        old_map = (
            old
            if isinstance(old, dict) and st.map_type(schema) in ("", "granular", "atomic")
            else {}
        )
        values_schema = st.additional(schema)
        if values_schema is not None:
            for name, item in value.items():
                _walk(
                    values_schema,
                    item,
                    old_map.get(name),
                    fe.key(path, name),
                    ratchet.key(name),
                    st.embedded_resource(values_schema),
                    outcome,
                )
        declared = st.properties(schema)
        for name, item in value.items():
            if name in declared:
                sub = declared[name]
                _walk(
                    sub,
                    item,
                    old_map.get(name),
                    fe.child(path, name),
                    ratchet.key(name),
                    st.embedded_resource(sub),
                    outcome,
                )


def _runtime_error(problem: CELEvalError) -> str:
    """A celpy evaluation error in cel-go's words (``no such key: foo``)."""
    text = str(problem.args[0]) if problem.args else "evaluation error"
    if text.startswith("no such member in mapping: "):
        return "no such key: " + text.removeprefix("no such member in mapping: ").strip("'")
    if text == "no such key" and len(problem.args) > 2 and problem.args[2]:
        return f"no such key: {problem.args[2][0]}"
    if text.startswith(("found no matching overload", "no such overload")):
        return "no such overload"
    if text == "return error for overflow":
        return "integer overflow"
    if text.startswith("undeclared reference to "):
        return text.split(" (in activation", 1)[0]
    if text == "modulus or divide by zero":
        return "division by zero"
    return text


def _evaluate(
    schema: Schema,
    rules: Sequence[Rule],
    value: object,
    old: object,
    path: str,
    ratchet: _Ratchet,
    resource: bool,
    outcome: Outcome,
) -> None:
    node_type = st.declared_type(schema)
    typed = resource_schema(schema) if resource else schema
    self_value = to_cel(value, typed)
    old_value = to_cel(old, typed) if old is not None else None
    activation: dict[str, Any] = {SELF: self_value}
    if old is not None:
        activation[OLD_SELF] = old_value
    optional_activation: dict[str, Any] = {
        SELF: self_value,
        OLD_SELF: Optional(old_value, present=old is not None),
    }
    for rule in rules:
        if not rule.rule.strip():
            continue
        compiled = compile_expression(rule.rule, bool(rule.optional_old_self))
        if compiled.runner is None:
            outcome.errors.append(
                fe.invalid(path, node_type, f"rule compile error: {compiled.error}")
            )
            continue
        if compiled.uses_old_self and old is None and not rule.optional_old_self:
            continue  # a transition rule needs a value to compare with
        result: object
        try:
            result = compiled.runner.evaluate(
                optional_activation if rule.optional_old_self else activation
            )
        except CELEvalError as problem:
            result = problem
        if isinstance(result, CELEvalError):
            detail = _runtime_error(result)
            if detail == "no such overload":
                message = (
                    f"'{detail}': call arguments did not match a supported operator, function "
                    f"or macro signature for rule: {rule.describe()}"
                )
            else:
                message = f"{detail} evaluating rule: {rule.describe()}"
            outcome.errors.append(fe.invalid(path, node_type, message))
            continue
        if is_bool(result) and bool(result):
            continue
        if not is_bool(result):
            outcome.errors.append(
                fe.invalid(path, node_type, f"rule did not evaluate to a bool: {rule.describe()}")
            )
            continue
        where = path
        if rule.field_path:
            try:
                normalized = normalize_field_path(rule.field_path, schema)
            except ValueError:
                normalized = ""
            if normalized:
                where = fe.child(path, normalized)
        detail = _message(rule, activation) or rule.default_message()
        shown: object = fe.OMITTED if node_type in ("object", "array") else value
        cause = _rule_cause(rule.reason, where, shown, detail)
        if not compiled.uses_old_self and ratchet.unchanged():
            outcome.warnings.append(f"{cause.field}: {cause.message}")
        else:
            outcome.errors.append(cause)


def _message(rule: Rule, activation: dict[str, Any]) -> str:
    """The evaluated messageExpression, or "" when there is none or it fails."""
    if not rule.message_expression:
        return ""
    compiled = compile_expression(rule.message_expression)
    if compiled.runner is None:
        return ""
    try:
        result = compiled.runner.evaluate(activation)
    except CELEvalError:
        return ""
    if not isinstance(result, str):
        return ""
    text = str(result).strip()
    if not text or "\n" in text or len(text.encode()) > MAX_MESSAGE_BYTES:
        return ""
    return text


def _rule_cause(reason: str | None, path: str, shown: object, detail: str) -> Cause:
    if reason == CauseType.FORBIDDEN.value:
        return fe.forbidden(path, detail)
    if reason == CauseType.REQUIRED.value:
        return fe.required(path, detail)
    if reason == CauseType.DUPLICATE.value:
        return fe.duplicate(path, shown)
    return fe.invalid(path, shown, detail)
