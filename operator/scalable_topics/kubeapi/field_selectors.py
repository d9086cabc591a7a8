"""Field selectors (``metadata.name=orders,status.phase!=Failed``): parsing and matching.

Each kind supports a fixed set of field labels, as in the API server: ``metadata.name`` and
``metadata.namespace`` everywhere, plus a few per kind (an Event's ``involvedObject.*``, a
Namespace's ``status.phase``). Anything else is refused, so a typo is never a silent match-all.
A value may escape ``,``, ``=`` and ``\\`` with a backslash.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .status import ApiError, Reason

_COMMON = ("metadata.name", "metadata.namespace")
_EVENT = (
    "involvedObject.kind",
    "involvedObject.namespace",
    "involvedObject.name",
    "involvedObject.uid",
    "involvedObject.apiVersion",
    "involvedObject.resourceVersion",
    "involvedObject.fieldPath",
    "reason",
    "reportingComponent",
    "source",
    "type",
)
# The extra field labels of each stored kind.
FIELD_LABELS: Mapping[str, tuple[str, ...]] = {
    "Event": _EVENT,
    "Namespace": ("status.phase",),
}


@dataclass(frozen=True, slots=True)
class FieldRequirement:
    field: str
    value: str
    equal: bool

    def matches(self, obj: Mapping[str, Any]) -> bool:
        return (field_value(obj, self.field) == self.value) == self.equal


@dataclass(frozen=True, slots=True)
class FieldSelector:
    requirements: tuple[FieldRequirement, ...] = ()

    def matches(self, obj: Mapping[str, Any]) -> bool:
        return all(requirement.matches(obj) for requirement in self.requirements)

    def is_empty(self) -> bool:
        return not self.requirements

    def value_of(self, field: str) -> str | None:
        """The value an ``=`` requirement pins ``field`` to, if any (to narrow a store query)."""
        for requirement in self.requirements:
            if requirement.field == field and requirement.equal:
                return requirement.value
        return None


def field_value(obj: Mapping[str, Any], path: str) -> str:
    """The field's value as the API server compares it: a string, "" when absent."""
    if path == "source":  # an Event's source is its component
        path = "source.component"
    node: Any = obj
    for part in path.split("."):
        if not isinstance(node, Mapping):
            return ""
        node = node.get(part)
    if node is None:
        return ""
    return node if isinstance(node, str) else str(node)


def parse_field_selector(text: str | None, store_kind: str) -> FieldSelector:
    selector = _parse_terms(text)
    supported = (*_COMMON, *FIELD_LABELS.get(store_kind, ()))
    for requirement in selector.requirements:
        if requirement.field not in supported:
            raise _bad(f"field label not supported: {requirement.field}")
    return selector


def exact_match(text: str | None, field: str) -> str | None:
    """The value ``text`` pins ``field`` to with ``=`` or ``==``, whatever the kind; None when
    it pins none or does not parse (kube-apiserver's ``RequiresExactMatch``)."""
    try:
        return _parse_terms(text).value_of(field)
    except ApiError:
        return None


def _parse_terms(text: str | None) -> FieldSelector:
    """The selector's requirements, with any field label."""
    if not text:
        return FieldSelector()
    requirements = []
    for term in _split_unescaped(text, ","):
        if not term:
            continue
        for operator, equal in (("!=", False), ("==", True), ("=", True)):
            index = _find_unescaped(term, operator)
            if index >= 0:
                field, value = term[:index], term[index + len(operator) :]
                matches_equal = equal
                break
        else:
            raise _bad(f"invalid selector: '{text}'; can't understand '{term}'")
        requirements.append(FieldRequirement(field.strip(), _unescape(value), matches_equal))
    return FieldSelector(tuple(requirements))


def _bad(message: str) -> ApiError:
    return ApiError(400, Reason.BAD_REQUEST, message)


def _find_unescaped(text: str, token: str) -> int:
    index = 0
    while index < len(text):
        if text[index] == "\\":
            index += 2
            continue
        if text.startswith(token, index):
            return index
        index += 1
    return -1


def _split_unescaped(text: str, separator: str) -> list[str]:
    parts, start = [], 0
    while True:
        index = _find_unescaped(text[start:], separator)
        if index < 0:
            parts.append(text[start:])
            return parts
        parts.append(text[start : start + index])
        start += index + len(separator)


def _unescape(value: str) -> str:
    out, index = [], 0
    while index < len(value):
        char = value[index]
        if char == "\\" and index + 1 < len(value):
            out.append(value[index + 1])
            index += 2
            continue
        out.append(char)
        index += 1
    return "".join(out)
