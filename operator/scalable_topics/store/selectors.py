"""Kubernetes label selectors: the textual form ``list`` and ``watch`` accept, and label checks.

Grammar (as ``kubectl -l``): comma-separated requirements, each one of ``k=v``, ``k==v``,
``k!=v``, ``k in (a,b)``, ``k notin (a,b)``, ``k`` (exists) and ``!k`` (does not exist).
All requirements must hold. ``k!=v`` and ``k notin (...)`` also match objects without ``k``.
An empty selector matches everything.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum

from .errors import Invalid

_DNS_LABEL = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_DNS_LABEL_PATTERN = re.compile(_DNS_LABEL)
_DNS_SUBDOMAIN_PATTERN = re.compile(rf"{_DNS_LABEL}(\.{_DNS_LABEL})*")
_QUALIFIED_NAME = re.compile(r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]")
DNS_LABEL_MAX = 63
DNS_SUBDOMAIN_MAX = 253
_NAME_MAX = 63


def is_dns_label(text: str) -> bool:
    """RFC 1123 label, as Kubernetes namespaces: ``[a-z0-9]([-a-z0-9]*[a-z0-9])?``, <= 63."""
    return len(text) <= DNS_LABEL_MAX and _DNS_LABEL_PATTERN.fullmatch(text) is not None


def is_dns_subdomain(text: str) -> bool:
    """RFC 1123 subdomain, as most Kubernetes object names: dot-separated labels, <= 253."""
    return len(text) <= DNS_SUBDOMAIN_MAX and _DNS_SUBDOMAIN_PATTERN.fullmatch(text) is not None


def validate_label_key(key: str, what: str = "label key") -> None:
    """Raise Invalid unless ``key`` is ``[prefix/]name`` as Kubernetes allows for label keys."""
    prefix, slash, name = key.rpartition("/")
    if slash and not is_dns_subdomain(prefix):
        raise Invalid(
            f"{what} {key!r}: prefix {prefix!r} must be a DNS subdomain "
            f"(lowercase alphanumerics, '-' and '.', at most {DNS_SUBDOMAIN_MAX} characters)"
        )
    if not name or len(name) > _NAME_MAX or not _QUALIFIED_NAME.fullmatch(name):
        raise Invalid(
            f"{what} {key!r}: name {name!r} must be 1-{_NAME_MAX} alphanumerics, '-', '_' "
            "or '.', starting and ending with an alphanumeric"
        )


def validate_label_value(value: str) -> None:
    """Raise Invalid unless ``value`` is empty or a Kubernetes label value."""
    if value and (len(value) > _NAME_MAX or not _QUALIFIED_NAME.fullmatch(value)):
        raise Invalid(
            f"label value {value!r} must be empty or 1-{_NAME_MAX} alphanumerics, '-', '_' "
            "or '.', starting and ending with an alphanumeric"
        )


class Operator(StrEnum):
    EQUALS = "="
    NOT_EQUALS = "!="
    IN = "in"
    NOT_IN = "notin"
    EXISTS = "exists"
    DOES_NOT_EXIST = "!"


@dataclass(frozen=True, slots=True)
class Requirement:
    key: str
    operator: Operator
    values: frozenset[str] = frozenset()

    def matches(self, labels: Mapping[str, str]) -> bool:
        present = self.key in labels
        match self.operator:
            case Operator.EXISTS:
                return present
            case Operator.DOES_NOT_EXIST:
                return not present
            case Operator.EQUALS | Operator.IN:
                return present and labels[self.key] in self.values
            case Operator.NOT_EQUALS | Operator.NOT_IN:
                return not present or labels[self.key] not in self.values


@dataclass(frozen=True, slots=True)
class LabelSelector:
    requirements: tuple[Requirement, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        return all(r.matches(labels) for r in self.requirements)

    @property
    def is_empty(self) -> bool:
        return not self.requirements


EVERYTHING = LabelSelector()

# -- parsing ------------------------------------------------------------------------------------

_SYMBOLS = ("!=", "==", "=", "!", "(", ")", ",")
_UNSUPPORTED = "<>"
_END = ""


@dataclass(frozen=True, slots=True)
class _Token:
    text: str  # a symbol, an identifier, or _END
    is_symbol: bool
    position: int


def _tokenize(text: str) -> list[_Token]:
    tokens: list[_Token] = []
    i = 0
    while i < len(text):
        char = text[i]
        if char.isspace():
            i += 1
            continue
        if char in _UNSUPPORTED:
            raise Invalid(f"label selector {text!r}: operator {char!r} at {i} is not supported")
        symbol = next((s for s in _SYMBOLS if text.startswith(s, i)), None)
        if symbol is not None:
            tokens.append(_Token(symbol, True, i))
            i += len(symbol)
            continue
        start = i
        while i < len(text) and not (
            text[i].isspace() or text[i] in _UNSUPPORTED or text[i] in "!=(),"
        ):
            i += 1
        tokens.append(_Token(text[start:i], False, start))
    tokens.append(_Token(_END, True, len(text)))
    return tokens


class _Parser:
    def __init__(self, text: str) -> None:
        self._text = text
        self._tokens = _tokenize(text)
        self._index = 0

    def parse(self) -> LabelSelector:
        if self._peek().text == _END:
            return EVERYTHING
        requirements = [self._requirement()]
        while self._peek().text != _END:
            self._expect(",", "',' between requirements")
            requirements.append(self._requirement())
        return LabelSelector(tuple(requirements))

    def _requirement(self) -> Requirement:
        if self._peek_symbol("!"):
            self._next()
            key = self._key()
            self._expect_end_of_requirement()
            return Requirement(key, Operator.DOES_NOT_EXIST)
        key = self._key()
        token = self._peek()
        if token.is_symbol and token.text in (",", _END):
            return Requirement(key, Operator.EXISTS)
        if token.is_symbol and token.text in ("=", "==", "!="):
            self._next()
            value = self._optional_value()
            self._expect_end_of_requirement()
            operator = Operator.NOT_EQUALS if token.text == "!=" else Operator.EQUALS
            return Requirement(key, operator, frozenset({value}))
        if not token.is_symbol and token.text in ("in", "notin"):
            self._next()
            values = self._value_set()
            self._expect_end_of_requirement()
            operator = Operator.IN if token.text == "in" else Operator.NOT_IN
            return Requirement(key, operator, values)
        raise self._error(token, f"expected an operator (=, ==, !=, in, notin) after {key!r}")

    def _key(self) -> str:
        token = self._next()
        if token.is_symbol:
            raise self._error(token, "expected a label key")
        validate_label_key(token.text)
        return token.text

    def _optional_value(self) -> str:
        token = self._peek()
        if token.is_symbol:
            return ""  # ``k=`` selects the empty value, as in Kubernetes
        self._next()
        validate_label_value(token.text)
        return token.text

    def _value_set(self) -> frozenset[str]:
        self._expect("(", "'(' to open the value list")
        values = {self._optional_value()}
        while self._peek_symbol(","):
            self._next()
            values.add(self._optional_value())
        self._expect(")", "')' to close the value list")
        return frozenset(values)

    def _expect_end_of_requirement(self) -> None:
        token = self._peek()
        if not (token.is_symbol and token.text in (",", _END)):
            raise self._error(token, "expected ',' or the end of the selector")

    def _expect(self, symbol: str, what: str) -> None:
        token = self._next()
        if not (token.is_symbol and token.text == symbol):
            raise self._error(token, f"expected {what}")

    def _peek(self) -> _Token:
        return self._tokens[self._index]

    def _peek_symbol(self, symbol: str) -> bool:
        token = self._peek()
        return token.is_symbol and token.text == symbol

    def _next(self) -> _Token:
        token = self._tokens[self._index]
        if token.text != _END:
            self._index += 1
        return token

    def _error(self, token: _Token, message: str) -> Invalid:
        found = "the end" if token.text == _END else repr(token.text)
        return Invalid(
            f"label selector {self._text!r}: {message}, found {found} at position {token.position}"
        )


def parse_selector(text: str | None) -> LabelSelector:
    """Parse a label selector; None and "" select everything. Raise Invalid when malformed."""
    if text is None:
        return EVERYTHING
    return _Parser(text).parse()
