"""Kubernetes JSONPath (client-go's ``util/jsonpath``), as the API server evaluates
``additionalPrinterColumns``: the column's path is wrapped in ``{...}`` and looked up with
missing keys allowed; the first match is the cell.

The grammar is Kubernetes', not RFC 9535's: ``.field`` (``\\.`` escapes a dot), ``['key']`` (a
key that itself splits on dots, as in Go), ``[n]``, ``[-n]``, ``[a:b:step]``, ``[*]``, unions
``[0,2]``, recursive descent ``..name``, filters ``[?(@.type=="Ready")]`` with ``== != < > <= >=``
or bare existence, quoted literals, numbers and ``true``/``false``. ``range``/``end`` (template
loops) are not supported: a printer column has no use for them.

Comparisons follow Go's text/template: values of different kinds (an integer and a float, a
string and a number) do not compare, and make the whole path fail.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from .go_values import go_float, go_json


class JSONPathError(ValueError):
    pass


# -- nodes -------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Text:
    text: str


@dataclass(frozen=True, slots=True)
class Field:
    name: str


@dataclass(frozen=True, slots=True)
class Wildcard:
    pass


@dataclass(frozen=True, slots=True)
class Recursive:
    pass


@dataclass(frozen=True, slots=True)
class Literal:
    value: int | float | bool


@dataclass(frozen=True, slots=True)
class SliceParam:
    value: int = 0
    known: bool = False
    derived: bool = False


@dataclass(frozen=True, slots=True)
class Index:
    params: tuple[SliceParam, SliceParam, SliceParam]


@dataclass(frozen=True, slots=True)
class Union:
    branches: tuple[Sequence, ...]


@dataclass(frozen=True, slots=True)
class Filter:
    left: Sequence
    right: Sequence
    operator: str  # "exists", "==", "!=", "<", ">", "<=", ">="


@dataclass(frozen=True, slots=True)
class Sequence:
    """What one ``{...}`` holds: nodes applied one after the other."""

    nodes: tuple[Node, ...] = field(default=())


Node = Text | Field | Wildcard | Recursive | Literal | Index | Union | Filter | Sequence


# -- parsing -----------------------------------------------------------------------------------

_DICT_KEY = re.compile(r"^'([^']*)'$")
_SLICE = re.compile(r"^(-?\d*)(:-?\d*)?(:-?\d*)?$")
_COMPARISON = re.compile(r"^([^!<>=]+)([!<>=]+)(.+?)$", re.DOTALL)
_TERMINATORS = frozenset(" \t\r\n.,[]$@{}")


@dataclass(frozen=True, slots=True)
class Template:
    """A parsed template: literal text and ``{...}`` actions, in order."""

    source: str
    parts: tuple[Text | Sequence, ...]

    def find_results(self, data: Any, *, allow_missing_keys: bool = True) -> list[list[Any]]:
        """One list of matches per part, as client-go's ``FindResults``; raises
        :class:`JSONPathError` where Go returns an error."""
        evaluator = _Evaluator(allow_missing_keys)
        return [evaluator.walk([data], part) for part in self.parts]


def parse(template: str) -> Template:
    return Template(template, tuple(_Parser(template).parse()))


def parse_column_path(json_path: str) -> Template:
    """A printer column's ``jsonPath``, as the API server parses it: ``{<jsonPath>}``."""
    return parse("{" + json_path + "}")


class _Parser:
    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0

    def parse(self) -> list[Text | Sequence]:
        parts: list[Text | Sequence] = []
        while self.pos < len(self.text):
            start = self.text.find("{", self.pos)
            if start < 0:
                parts.append(Text(self.text[self.pos :]))
                break
            if start > self.pos:
                parts.append(Text(self.text[self.pos : start]))
            self.pos = start + 1
            parts.append(Sequence(tuple(self._action(end="}"))))
        return parts

    def _action(self, end: str | None) -> list[Node]:
        """Nodes up to ``end`` (consumed), or to the end of the text when ``end`` is None."""
        nodes: list[Node] = []
        text = self.text
        while True:
            if self.pos >= len(text):
                if end is None:
                    return nodes
                raise JSONPathError("unclosed action")
            rest = text[self.pos :]
            if end is not None and rest.startswith(end):
                self.pos += len(end)
                return nodes
            if rest.startswith("[?("):
                nodes.append(self._filter())
                continue
            if rest.startswith(".."):
                if nodes and isinstance(nodes[-1], Recursive):
                    raise JSONPathError("invalid multiple recursive descent")
                self.pos += 2
                nodes.append(Recursive())
                if self.pos < len(text) and _alphanumeric(text[self.pos]):
                    nodes.append(self._field())
                continue
            char = text[self.pos]
            if char in "\r\n":
                raise JSONPathError("unclosed action")
            if char in " @$":
                self.pos += 1
            elif char == "[":
                nodes.extend(self._array())
            elif char in "\"'":
                nodes.append(self._quote(char))
            elif char == ".":
                self.pos += 1
                nodes.append(self._field())
            elif char in "+-" or char.isdigit():
                nodes.append(self._number())
            elif _alphanumeric(char):
                nodes.append(self._identifier())
            else:
                raise JSONPathError(f"unrecognized character in action: {char!r}")

    def _field(self) -> Node:
        chars: list[str] = []
        while self.pos < len(self.text):
            char = self.text[self.pos]
            if char == "\\" and self.pos + 1 < len(self.text):
                chars.append(self.text[self.pos + 1])
                self.pos += 2
                continue
            if char in _TERMINATORS:
                break
            chars.append(char)
            self.pos += 1
        name = "".join(chars)
        return Wildcard() if name == "*" else Field(name)

    def _identifier(self) -> Node:
        start = self.pos
        while self.pos < len(self.text) and self.text[self.pos] not in _TERMINATORS:
            self.pos += 1
        word = self.text[start : self.pos]
        if word in ("true", "false"):
            return Literal(word == "true")
        raise JSONPathError(f"unrecognized identifier {word}")

    def _number(self) -> Node:
        start = self.pos
        if self.text[self.pos] in "+-":
            self.pos += 1
        while self.pos < len(self.text) and (
            self.text[self.pos].isdigit() or self.text[self.pos] == "."
        ):
            self.pos += 1
        word = self.text[start : self.pos]
        try:
            return Literal(int(word))
        except ValueError:
            pass
        try:
            return Literal(float(word))
        except ValueError:
            raise JSONPathError(f"cannot parse number {word}") from None

    def _quote(self, quote: str) -> Node:
        start = self.pos
        self.pos += 1
        while True:
            if self.pos >= len(self.text) or self.text[self.pos] == "\n":
                raise JSONPathError("unterminated quoted string")
            if self.text[self.pos] == quote and self.text[self.pos - 1] != "\\":
                self.pos += 1
                break
            self.pos += 1
        return Text(_unquote(self.text[start : self.pos]))

    def _array(self) -> list[Node]:
        close = self.pos
        while True:
            close += 1
            if close >= len(self.text) or self.text[close] == "\n":
                raise JSONPathError("unterminated array")
            if self.text[close] == "]":
                break
        inner = self.text[self.pos + 1 : close]
        self.pos = close + 1
        if inner == "*":
            inner = ":"
        pieces = inner.split(",")
        if len(pieces) > 1:
            branches = tuple(
                Sequence(tuple(_Parser(f"[{piece.strip()}]")._action(end=None))) for piece in pieces
            )
            return [Union(branches)]
        key = _DICT_KEY.match(inner)
        if key:
            return _Parser("." + key.group(1))._action(end=None)
        match = _SLICE.match(inner)
        if match is None:
            raise JSONPathError(f"invalid array index {inner}")
        raw = [match.group(i) or "" for i in (1, 2, 3)]
        params: list[SliceParam] = []
        for i, text in enumerate(raw):
            if text:
                if i > 0:
                    text = text[1:]
                if i > 0 and not text:
                    params.append(SliceParam())
                else:
                    params.append(SliceParam(int(text), known=True))
            elif i == 1:
                params.append(SliceParam(params[0].value + 1, known=True, derived=True))
            else:
                params.append(SliceParam())
        return [Index((params[0], params[1], params[2]))]

    def _filter(self) -> Node:
        self.pos += 3
        start = self.pos
        begun = ended = False
        pair = ""
        while True:
            if self.pos >= len(self.text) or self.text[self.pos] == "\n":
                raise JSONPathError("unterminated filter")
            char = self.text[self.pos]
            self.pos += 1
            if char in "\"'":
                if not begun:
                    begun, pair = True, char
                    continue
                if self.text[self.pos - 2] != "\\" and char == pair:
                    ended = True
            elif char == ")" and begun == ended:
                break
        if self.pos >= len(self.text) or self.text[self.pos] != "]":
            raise JSONPathError("unclosed array expect ]")
        self.pos += 1
        body = self.text[start : self.pos - 2]
        comparison = _COMPARISON.match(body)
        if comparison is None:
            left = Sequence(tuple(_Parser(body)._action(end=None)))
            return Filter(left, Sequence(), "exists")
        left = Sequence(tuple(_Parser(comparison.group(1))._action(end=None)))
        right = Sequence(tuple(_Parser(comparison.group(3))._action(end=None)))
        return Filter(left, right, comparison.group(2))


def _alphanumeric(char: str) -> bool:
    return char == "_" or char.isalnum()


def _unquote(quoted: str) -> str:
    body = quoted[1:-1]
    if "\\" not in body:
        return body
    out: list[str] = []
    chars = iter(body)
    for char in chars:
        if char != "\\":
            out.append(char)
            continue
        escaped = next(chars, "")
        out.append(
            {"n": "\n", "t": "\t", "r": "\r", "a": "\a", "b": "\b", "f": "\f", "v": "\v"}.get(
                escaped, escaped
            )
        )
    return "".join(out)


# -- evaluation ----------------------------------------------------------------------------


class _Evaluator:
    def __init__(self, allow_missing_keys: bool) -> None:
        self.allow_missing_keys = allow_missing_keys

    def walk(self, values: list[Any], node: Node) -> list[Any]:
        if isinstance(node, Sequence):
            for child in node.nodes:
                values = self.walk(values, child)
            return values
        if isinstance(node, Text):
            return [node.text]
        if isinstance(node, Literal):
            return [node.value for _ in values]
        if isinstance(node, Field):
            return self._field(values, node.name)
        if isinstance(node, Index):
            return self._index(values, node)
        if isinstance(node, Wildcard):
            return [child for value in values for child in _children(value)]
        if isinstance(node, Recursive):
            return list(self._recursive(values))
        if isinstance(node, Union):
            return [found for branch in node.branches for found in self.walk(values, branch)]
        return self._filter(values, node)

    def _field(self, values: list[Any], name: str) -> list[Any]:
        found = [value[name] for value in values if isinstance(value, dict) and name in value]
        if not found and values and not self.allow_missing_keys:
            raise JSONPathError(f"{name} is not found")
        return found

    def _index(self, values: list[Any], node: Index) -> list[Any]:
        found: list[Any] = []
        for value in values:
            if value is None:
                continue
            if not isinstance(value, list):
                raise JSONPathError(f"{_go_type(value)} is not array or slice")
            first, last, step = node.params
            length = len(value)
            start = first.value if first.known else 0
            if start < 0:
                start += length
            stop = last.value if last.known else length
            if stop < 0 or (stop == 0 and last.derived):
                stop += length
            if stop == start:
                return found
            if start >= length or start < 0:
                raise JSONPathError(f"array index out of bounds: index {start}, length {length}")
            if stop > length or stop < 0:
                raise JSONPathError(f"array index out of bounds: index {stop - 1}, length {length}")
            if start > stop:
                raise JSONPathError(f"starting index {start} is greater than ending index {stop}")
            stride = 1
            if step.known:
                if step.value <= 0:
                    raise JSONPathError("step must be > 0")
                stride = step.value
            found.extend(value[start:stop:stride])
        return found

    def _recursive(self, values: list[Any]) -> Iterator[Any]:
        for value in values:
            children = _children(value)
            if children:
                yield value
                yield from self._recursive(children)

    def _filter(self, values: list[Any], node: Filter) -> list[Any]:
        found: list[Any] = []
        for value in values:
            if not isinstance(value, list):
                raise JSONPathError(
                    f"{_go_type(value)} is not array or slice and cannot be filtered"
                )
            for item in value:
                if node.operator == "exists":
                    try:
                        lefts = self.walk([item], node.left)
                    except JSONPathError:
                        lefts = []
                    if lefts:
                        found.append(item)
                    continue
                lefts = self.walk([item], node.left)
                if not lefts:
                    continue
                if len(lefts) > 1:
                    raise JSONPathError("can only compare one element at a time")
                rights = self.walk([item], node.right)
                if not rights:
                    continue
                if len(rights) > 1:
                    raise JSONPathError("can only compare one element at a time")
                if _compare(node.operator, lefts[0], rights[0]):
                    found.append(item)
        return found


def _children(value: Any) -> list[Any]:
    if isinstance(value, dict):
        return list(value.values())
    if isinstance(value, list):
        return list(value)
    return []


def _go_type(value: Any) -> str:
    if isinstance(value, dict):
        return "map[string]interface {}"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int64"
    if isinstance(value, float):
        return "float64"
    if isinstance(value, str):
        return "string"
    return "<nil>" if value is None else type(value).__name__


def _basic_kind(value: Any) -> str:
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int"
    if isinstance(value, float):
        return "float"
    if isinstance(value, str):
        return "string"
    raise JSONPathError("invalid type for comparison")


def _equal(left: Any, right: Any) -> bool:
    if _basic_kind(left) != _basic_kind(right):
        raise JSONPathError("incompatible types for comparison")
    return bool(left == right)


def _less(left: Any, right: Any) -> bool:
    kind = _basic_kind(left)
    if kind != _basic_kind(right):
        raise JSONPathError("incompatible types for comparison")
    if kind == "bool":
        raise JSONPathError("invalid type for comparison")
    return bool(left < right)


def _compare(operator: str, left: Any, right: Any) -> bool:
    if operator == "==":
        return _equal(left, right)
    if operator == "!=":
        return not _equal(left, right)
    if operator == "<":
        return _less(left, right)
    if operator == "<=":
        return _less(left, right) or _equal(left, right)
    if operator == ">":
        return not (_less(left, right) or _equal(left, right))
    if operator == ">=":
        return not _less(left, right)
    raise JSONPathError(f"unrecognized filter operator {operator}")


# -- printing ----------------------------------------------------------------------------


def print_value(value: Any) -> str:
    """One result as ``PrintResults`` writes it: maps and lists as JSON, a null as
    ``<no value>``, numbers and booleans as Go prints them."""
    if isinstance(value, dict | list):
        return go_json(value)
    if value is None:
        return "<no value>"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return go_float(value)
    return str(value)
