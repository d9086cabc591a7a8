"""x-kubernetes-validations: CEL rules compiled once (celpy, never parsed by hand), checked when a
CRD is applied, and evaluated on custom resources the way apiextensions-apiserver evaluates
them: ``self`` is the value at the rule's node, transition rules (``oldSelf``) only where the
stored value correlates, errors in unchanged parts become warnings (ratcheting)."""

from __future__ import annotations

import copy
import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

import celpy
import lark
from celpy.celparser import CELParseError
from celpy.evaluation import CELEvalError

from scalable_topics.kubeapi import cel_library as lib
from scalable_topics.kubeapi import field_errors as fe
from scalable_topics.kubeapi import structural as st
from scalable_topics.kubeapi.cel_library import Tree
from scalable_topics.kubeapi.cel_values import Optional, escape, is_bool, resource_schema, to_cel
from scalable_topics.kubeapi.correlation import Correlated, MapList
from scalable_topics.kubeapi.go_values import go_json
from scalable_topics.kubeapi.status import Cause, CauseType
from scalable_topics.kubeapi.structural import Schema

SELF: Final = "self"
OLD_SELF: Final = "oldSelf"
REASONS: Final = (
    "FieldValueDuplicate",
    "FieldValueForbidden",
    "FieldValueInvalid",
    "FieldValueRequired",
)
MAX_MESSAGE_BYTES: Final = 5 * 1024

_ENVIRONMENT: Final = celpy.Environment()
# What calls evaluate to, for telling a rule that cannot be a bool (or a message that cannot be a
# string) from one that may be.
_BOOL_CALLS: Final = (
    "all",
    "exists",
    "exists_one",
    "matches",
    "startsWith",
    "endsWith",
    "contains",
    "has",
    "isSorted",
    "hasValue",
    "bool",
    "sets.contains",
    "sets.equivalent",
    "sets.intersects",
)
_STRING_CALLS: Final = (
    "string",
    "lowerAscii",
    "upperAscii",
    "replace",
    "substring",
    "trim",
    "join",
    "charAt",
    "find",
)
_OTHER_CALLS: Final = (
    "map",
    "filter",
    "size",
    "indexOf",
    "lastIndexOf",
    "split",
    "sum",
    "int",
    "uint",
    "double",
    "bytes",
    "duration",
    "timestamp",
    "slice",
    "flatten",
    "findAll",
)
_CALL_KINDS: Final = {
    **dict.fromkeys(_BOOL_CALLS, "bool"),
    **dict.fromkeys(_STRING_CALLS, "string"),
    **dict.fromkeys(_OTHER_CALLS, "other"),
}
_CEL_TYPE_NAMES: Final = {
    "string": "string",
    "integer": "int",
    "number": "double",
    "boolean": "bool",
}
_SCHEMA_KINDS: Final = {"boolean": "bool", "string": "string"}
_WRAPPERS: Final = frozenset(
    {
        "expr",
        "conditionalor",
        "conditionaland",
        "relation",
        "addition",
        "multiplication",
        "unary",
        "member",
        "primary",
        "paren_expr",
    }
)


# -- compiling ---------------------------------------------------------------------------------


def _location(text: str, position: int) -> tuple[int, int]:
    """1-based line and column of character ``position`` of ``text``."""
    line = text.count("\n", 0, position) + 1
    column = position - (text.rfind("\n", 0, position) + 1) + 1
    return line, column


def _display(text: str, line: int, column: int, message: str) -> str:
    """One issue as cel-go's Issues.String() shows it: message, source line, caret."""
    lines = text.split("\n")
    shown = f"ERROR: <input>:{line}:{column}: {message}"
    if 1 <= line <= len(lines):
        snippet = lines[line - 1].replace("\t", " ")
        before = snippet[: column - 1]
        marker = "".join("\uff0e" if len(c.encode()) > 1 else "." for c in before)
        at = snippet[column - 1 : column]
        marker += "\uff3e" if at and len(at.encode()) > 1 else "^"
        shown += f"\n | {snippet}\n | {marker}"
    return shown


def _syntax_error(text: str, error: CELParseError) -> str:
    """A parse error placed and worded as cel-go words its syntax errors."""
    line = error.line or 1
    column = error.column or 1
    cause = error.__context__
    lines = text.split("\n")
    if isinstance(cause, lark.exceptions.UnexpectedToken) and cause.token.type == "$END":
        found = "<EOF>"
        line = len(lines)
        column = len(lines[-1]) + 1
    elif isinstance(cause, lark.exceptions.UnexpectedCharacters):
        position = cause.pos_in_stream or 0
        found = text[position : position + 1]
        return _display(text, line, column, f"Syntax error: token recognition error at: '{found}'")
    else:
        rest = lines[line - 1][column - 1 :] if line <= len(lines) else ""
        found = rest.split()[0] if rest.split() else "<EOF>"
    return _display(text, line, column, f"Syntax error: mismatched input '{found}'")


@dataclass
class _Issues:
    text: str
    found: list[tuple[int, int, str]] = field(default_factory=list)

    def at_token(self, token: lark.Token, message: str) -> None:
        self.found.append((token.line or 1, token.column or 1, message))

    def at_select(self, token: lark.Token, message: str) -> None:
        """An issue with ``x.f``, placed on the dot as cel-go places it."""
        position = (token.start_pos or 0) - 1
        while position > 0 and self.text[position] != ".":
            position -= 1
        line, column = _location(self.text, max(position, 0))
        self.found.append((line, column, message))

    def render(self) -> str:
        return "\n".join(
            _display(self.text, line, column, message)
            for line, column, message in sorted(set(self.found))
        )


class _Checker:
    """What cel-go's type checker would refuse, as far as this server can tell: undeclared
    names and functions, and (given the schema of ``self``) fields the schema lacks and rules
    that do not produce a bool."""

    def __init__(self, text: str, self_schema: Schema | None, optional_old_self: bool) -> None:
        self.issues = _Issues(text)
        self.self_schema = self_schema
        self.optional_old_self = optional_old_self
        self.uses_old_self = False
        self.types: dict[int, Schema | None] = {}

    def check(self, tree: Tree) -> None:
        self._visit(tree, {})

    def _visit(self, node: object, scope: dict[str, Schema | None]) -> Schema | None:
        if not isinstance(node, lark.Tree):
            return None
        kind = node.data
        found: Schema | None = None
        if kind == "ident":
            found = self._ident(node.children[0], scope)
        elif kind == "member_dot":
            target, name = node.children
            found = self._select(self._visit(target, scope), name)
        elif kind == "member_index":
            container = self._visit(node.children[0], scope)
            self._visit(node.children[1], scope)
            if container is not None:
                found = (
                    st.items(container)
                    if st.declared_type(container) == "array"
                    else st.additional(container)
                )
        elif kind == "member_dot_arg":
            found = self._method(node, scope)
        elif kind == "ident_arg":
            name = str(node.children[0])
            if name not in lib.KNOWN_FUNCTIONS and name not in lib.TYPE_NAMES:
                self._undeclared(node.children[0], name)
            for child in node.children[1:]:
                self._visit(child, scope)
        elif kind == "dot_ident" or kind == "dot_ident_arg":
            self._undeclared(node.children[0], "." + str(node.children[0]))
        else:
            results = [self._visit(child, scope) for child in node.children]
            if kind in _WRAPPERS and len(node.children) == 1:
                found = results[0]
        self.types[id(node)] = found
        return found

    def _undeclared(self, token: object, name: str) -> None:
        if isinstance(token, lark.Token):
            bare = name.lstrip(".")
            detail = f"undeclared reference to '{bare}' (in container '')"
            if bare in lib.UNSUPPORTED:
                detail += ": this API server does not provide this Kubernetes CEL function"
            self.issues.at_token(token, detail)

    def _ident(self, token: object, scope: dict[str, Schema | None]) -> Schema | None:
        name = str(token)
        if name in scope:
            return scope[name]
        if name == SELF:
            return self.self_schema
        if name == OLD_SELF:
            self.uses_old_self = True
            return None if self.optional_old_self else self.self_schema
        if name not in lib.TYPE_NAMES and name not in lib.NAMESPACES:
            self._undeclared(token, name)
        return None

    def _select(self, target: Schema | None, name: object) -> Schema | None:
        if target is None or not isinstance(name, lark.Token):
            return None
        scalar = _CEL_TYPE_NAMES.get(st.declared_type(target))
        if scalar is not None and not st.int_or_string(target):
            self.issues.at_select(name, f"type '{scalar}' does not support field selection")
            return None
        if st.declares_properties(target) and not st.preserves_unknown_fields(target):
            fields = {escape(k): v for k, v in st.properties(target).items()}
            if str(name) not in fields:
                self.issues.at_select(name, f"undefined field '{name}'")
                return None
            return fields[str(name)]
        return st.additional(target)

    def _method(self, node: Tree, scope: dict[str, Schema | None]) -> Schema | None:
        target, name_token = node.children[0], node.children[1]
        arguments = node.children[2] if len(node.children) > 2 else None
        name = str(name_token)
        namespace = self._namespace(target)
        if namespace is not None:
            qualified = f"{namespace}.{name}"
            if qualified not in lib.KNOWN_FUNCTIONS:
                self._undeclared(name_token, qualified)
            if isinstance(arguments, lark.Tree):
                self._visit(arguments, scope)
            return None
        receiver = self._visit(target, scope)
        if name in lib.COMPREHENSIONS and isinstance(arguments, lark.Tree):
            parts = arguments.children
            variable = self._bare_name(parts[0]) if parts else None
            if variable is None:
                if isinstance(name_token, lark.Token):
                    self.issues.at_token(name_token, "argument must be a simple name")
                return None
            element: Schema | None = None
            if receiver is not None:
                if st.declared_type(receiver) == "array":
                    element = st.items(receiver)
                elif st.declared_type(receiver) == "object":
                    element = {"type": "string"}
            inner = {**scope, variable: element}
            for part in parts[1:]:
                self._visit(part, inner)
            return None
        if name not in lib.KNOWN_FUNCTIONS:
            self._undeclared(name_token, name)
        if isinstance(arguments, lark.Tree):
            self._visit(arguments, scope)
        return None

    @staticmethod
    def _namespace(target: object) -> str | None:
        node = target
        for rule in ("member", "primary", "ident"):
            if not isinstance(node, lark.Tree) or node.data != rule or len(node.children) != 1:
                return None
            node = node.children[0]
        return str(node) if str(node) in lib.NAMESPACES else None

    @staticmethod
    def _bare_name(expression: object) -> str | None:
        node = expression
        while isinstance(node, lark.Tree) and len(node.children) == 1:
            if node.data == "ident":
                return str(node.children[0])
            node = node.children[0]
        return None

    def result_kind(self, node: object) -> str:
        """What an expression evaluates to, as far as can be told: "bool", "string", "other"
        (a value of some other type) or "dyn" (not known before evaluation)."""
        if not isinstance(node, lark.Tree):
            return "dyn"
        kind, children = node.data, node.children
        if kind in ("conditionalor", "conditionaland", "relation") and len(children) == 2:
            return "bool"
        if kind == "addition" and len(children) == 2:
            operator_node = children[0]
            left = operator_node.children[0] if isinstance(operator_node, lark.Tree) else None
            sides = {self.result_kind(left), self.result_kind(children[1])}
            return "string" if "string" in sides else "dyn" if "dyn" in sides else "other"
        if kind == "multiplication" and len(children) == 2:
            return "other"
        if kind == "unary" and len(children) == 2:
            first = children[0]
            return "bool" if isinstance(first, lark.Tree) and first.data == "unary_not" else "other"
        if kind == "expr" and len(children) > 1:
            branches = {self.result_kind(child) for child in children[1:]}
            return branches.pop() if len(branches) == 1 else "dyn"
        if kind in ("list_lit", "map_lit"):
            return "other"
        if kind == "literal":
            token = children[0]
            types = {"BOOL_LIT": "bool", "STRING_LIT": "string", "MLSTRING_LIT": "string"}
            return types.get(token.type, "other") if isinstance(token, lark.Token) else "dyn"
        if kind in ("ident", "member_dot", "member_index"):
            schema = self.types.get(id(node))
            if schema is None or st.int_or_string(schema) or not st.declared_type(schema):
                return "dyn"
            return _SCHEMA_KINDS.get(st.declared_type(schema), "other")
        if kind in ("ident_arg", "member_dot_arg"):
            name = str(children[0] if kind == "ident_arg" else children[1])
            if kind == "member_dot_arg" and (namespace := self._namespace(children[0])):
                name = f"{namespace}.{name}"
            return _CALL_KINDS.get(name, "dyn")
        if len(children) == 1:
            return self.result_kind(children[0])
        return "dyn"


@dataclass(frozen=True)
class Program:
    """A compiled expression: its program, or why it does not compile."""

    runner: celpy.Runner | None
    error: str
    uses_old_self: bool
    tree: Tree | None


@functools.lru_cache(maxsize=2048)
def compile_expression(text: str, optional_old_self: bool = False) -> Program:
    """Parse, check and prepare ``text`` once (cached): the schema-independent part of CRD rule
    compilation; ``error`` is ``compilation failed: ERROR: <input>:1:1: ...`` when it fails."""
    try:
        tree = _ENVIRONMENT.compile(text)
    except CELParseError as problem:
        return Program(None, "compilation failed: " + _syntax_error(text, problem), False, None)
    checker = _Checker(text, None, optional_old_self)
    checker.check(tree)
    if checker.issues.found:
        return Program(
            None, "compilation failed: " + checker.issues.render(), checker.uses_old_self, tree
        )
    runnable = copy.deepcopy(tree)
    lib.rewrite(runnable)
    runner = _ENVIRONMENT.program(runnable, functions=lib.FUNCTIONS)
    return Program(runner, "", checker.uses_old_self, tree)


def check_expression(
    text: str, self_schema: Schema, optional_old_self: bool = False
) -> tuple[str, bool]:
    """Compile ``text`` for a node of ``self_schema``: (the compilation error or "", uses oldSelf)."""
    compiled = compile_expression(text, optional_old_self)
    if compiled.error or compiled.tree is None:
        return compiled.error, compiled.uses_old_self
    checker = _Checker(text, self_schema, optional_old_self)
    checker.check(compiled.tree)
    if checker.issues.found:
        return "compilation failed: " + checker.issues.render(), compiled.uses_old_self
    if checker.result_kind(compiled.tree) not in ("bool", "dyn"):
        return "cel expression must evaluate to a bool", compiled.uses_old_self
    return "", compiled.uses_old_self


# -- rules ----------------------------------------------------------------------------------------


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


# -- evaluating ----------------------------------------------------------------------------------


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


# -- checking a CRD's rules -----------------------------------------------------------------


def check_rules(
    schema: Schema, path: str = "spec.versions[0].schema.openAPIV3Schema"
) -> list[Cause]:
    """The problems kube-apiserver reports with the x-kubernetes-validations of a CRD version's
    schema when the CRD is applied (``path`` names the schema in the CRD)."""
    causes: list[Cause] = []
    _check_node(schema, path, None, True, causes)
    return causes


def check_crd(crd: Mapping[str, Any]) -> list[Cause]:
    """check_rules for every version of a CustomResourceDefinition."""
    causes: list[Cause] = []
    versions = crd.get("spec", {}).get("versions", [])
    for position, version in enumerate(versions if isinstance(versions, list) else []):
        schema = (
            version.get("schema", {}).get("openAPIV3Schema")
            if isinstance(version, Mapping)
            else None
        )
        if isinstance(schema, Mapping):
            causes += check_rules(schema, f"spec.versions[{position}].schema.openAPIV3Schema")
    return causes


def _check_node(
    schema: Schema, path: str, uncorrelatable: str | None, resource: bool, causes: list[Cause]
) -> None:
    schema_errors = _check_entries(schema, path)
    causes += schema_errors
    if not schema_errors:
        _check_expressions(schema, path, uncorrelatable, resource, causes)
    declared = st.properties(schema)
    for name, sub in declared.items():
        below = uncorrelatable
        if below is None and st.map_type(schema) not in ("", "granular", "atomic"):
            below = path
        _check_node(
            sub,
            fe.key(fe.child(path, "properties"), name),
            below,
            st.embedded_resource(sub),
            causes,
        )
    values_schema = st.additional(schema)
    if values_schema is not None:
        _check_node(
            values_schema,
            fe.child(path, "additionalProperties"),
            uncorrelatable,
            st.embedded_resource(values_schema),
            causes,
        )
    item_schema = st.items(schema)
    if item_schema is not None:
        below = uncorrelatable
        if below is None and st.list_type(schema) != "map":
            below = path
        _check_node(
            item_schema, fe.child(path, "items"), below, st.embedded_resource(item_schema), causes
        )


def _check_entries(schema: Schema, path: str) -> list[Cause]:
    causes: list[Cause] = []
    for position, entry in enumerate(st.validations(schema)):
        rule = Rule.read(entry)
        where = fe.index(fe.child(path, "x-kubernetes-validations"), position)
        trimmed_message = rule.message.strip()
        if not rule.rule.strip():
            causes.append(fe.required(fe.child(where, "rule"), "rule is not specified"))
        elif rule.message and not trimmed_message:
            causes.append(
                fe.invalid(
                    fe.child(where, "message"), rule.message, "must be non-empty if specified"
                )
            )
        elif "\n" in trimmed_message:
            causes.append(
                fe.invalid(fe.child(where, "message"), rule.message, "must not contain line breaks")
            )
        elif "\n" in rule.rule.strip() and not trimmed_message:
            causes.append(
                fe.required(
                    fe.child(where, "message"),
                    "message must be specified if rule contains line breaks",
                )
            )
        if rule.message_expression and not rule.message_expression.strip():
            causes.append(
                fe.required(
                    fe.child(where, "messageExpression"),
                    "messageExpression must be non-empty if specified",
                )
            )
        if rule.reason is not None and rule.reason not in REASONS:
            causes.append(fe.not_supported(fe.child(where, "reason"), rule.reason, REASONS))
        if rule.field_path and not rule.field_path.strip():
            causes.append(
                fe.invalid(
                    fe.child(where, "fieldPath"), rule.field_path, "must be non-empty if specified"
                )
            )
        if "\n" in rule.field_path:
            causes.append(
                fe.invalid(
                    fe.child(where, "fieldPath"), rule.field_path, "must not contain line breaks"
                )
            )
        if rule.field_path:
            try:
                normalize_field_path(rule.field_path, schema)
            except ValueError:
                causes.append(
                    fe.invalid(
                        fe.child(where, "fieldPath"), rule.field_path, "must be a valid path"
                    )
                )
    return causes


def _check_expressions(
    schema: Schema, path: str, uncorrelatable: str | None, resource: bool, causes: list[Cause]
) -> None:
    typed = resource_schema(schema) if resource else schema
    for position, entry in enumerate(st.validations(schema)):
        rule = Rule.read(entry)
        if not rule.rule.strip():
            continue
        where = fe.index(fe.child(path, "x-kubernetes-validations"), position)
        problem, uses_old_self = check_expression(rule.rule, typed, bool(rule.optional_old_self))
        if problem:
            causes.append(
                fe.cause(
                    CauseType.INVALID, fe.child(where, "rule"), fe.GoText(rule.go_value()), problem
                )
            )
        if rule.message_expression.strip():
            message_problem = _check_message_expression(rule.message_expression, typed)
            if message_problem:
                causes.append(
                    fe.cause(
                        CauseType.INVALID,
                        fe.child(where, "messageExpression"),
                        fe.GoText(rule.go_value()),
                        message_problem,
                    )
                )
        if uses_old_self:
            if uncorrelatable is not None:
                detail = f"oldSelf cannot be used on the uncorrelatable portion of the schema within {uncorrelatable}"
                causes.append(fe.invalid(fe.child(where, "rule"), rule.rule, detail))
        elif rule.optional_old_self is not None:
            causes.append(
                fe.invalid(
                    fe.child(where, "optionalOldSelf"),
                    rule.optional_old_self,
                    "may not be set if oldSelf is not used in rule",
                )
            )


def _check_message_expression(text: str, schema: Schema) -> str:
    compiled = compile_expression(text)
    if compiled.error or compiled.tree is None:
        return "messageExpression " + compiled.error
    checker = _Checker(text, schema, False)
    checker.check(compiled.tree)
    if checker.issues.found:
        return "messageExpression compilation failed: " + checker.issues.render()
    if checker.result_kind(compiled.tree) not in ("string", "dyn"):
        return "messageExpression must evaluate to a string"
    return ""
