"""Compiling the CEL expressions of x-kubernetes-validations with celpy (never parsed by hand),
once per distinct expression, and checking them as far as cel-go's type checker would: undeclared
names and functions, fields the schema lacks, rules that cannot evaluate to a bool. Errors are
worded and placed as cel-go words them (``ERROR: <input>:1:5: undefined field 'nope'``)."""

from __future__ import annotations

import copy
import functools
from dataclasses import dataclass, field
from typing import Final

import celpy
import lark
from celpy.celparser import CELParseError

from scalable_topics.kubeapi import cel_library as lib
from scalable_topics.kubeapi import structural as st
from scalable_topics.kubeapi.cel_library import Tree
from scalable_topics.kubeapi.cel_values import escape
from scalable_topics.kubeapi.structural import Schema

SELF: Final = "self"
OLD_SELF: Final = "oldSelf"

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


class Checker:
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
    checker = Checker(text, None, optional_old_self)
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
    checker = Checker(text, self_schema, optional_old_self)
    checker.check(compiled.tree)
    if checker.issues.found:
        return "compilation failed: " + checker.issues.render(), compiled.uses_old_self
    if checker.result_kind(compiled.tree) not in ("bool", "dyn"):
        return "cel expression must evaluate to a bool", compiled.uses_old_self
    return "", compiled.uses_old_self
