"""The invariants of ``x-kubernetes-list-type: set`` (unique items) and ``map`` (unique keys, as
``x-kubernetes-list-map-keys`` names them), checked as apiextensions-apiserver checks them:
``spec.subscriptions[1]: Duplicate value: {"name":"billing"}``."""

from __future__ import annotations

from collections.abc import Sequence

from scalable_topics.kubeapi import field_errors as fe
from scalable_topics.kubeapi import structural as st
from scalable_topics.kubeapi.go_values import go_json
from scalable_topics.kubeapi.status import Cause
from scalable_topics.kubeapi.structural import Schema


def validate(schema: Schema | None, value: object, path: str = "") -> list[Cause]:
    """The list-type errors anywhere in ``value`` (an object)."""
    if schema is None or not isinstance(value, dict):
        return []
    errors: list[Cause] = []
    values_schema = st.additional(schema)
    if values_schema is not None:
        for name, item in value.items():
            errors += _any(values_schema, item, fe.key(path, name))
    declared = st.properties(schema)
    for name, item in value.items():
        if name in declared:
            errors += _any(declared[name], item, fe.child(path, name))
    return errors


def _any(schema: Schema, value: object, path: str) -> list[Cause]:
    if isinstance(value, list):
        return _list(schema, value, path)
    if isinstance(value, dict):
        return validate(schema, value, path)
    return []


def _list(schema: Schema, value: list[object], path: str) -> list[Cause]:
    errors: list[Cause] = []
    kind = st.list_type(schema)
    if kind == "set":
        errors += [fe.duplicate(fe.index(path, i), value[i]) for i in _repeats(value)]
    elif kind == "map":
        errors += _list_map(schema, value, path)
    item_schema = st.items(schema)
    if item_schema is not None:
        for position, item in enumerate(value):
            errors += _any(item_schema, item, fe.index(path, position))
    return errors


def _identity(value: object) -> object:
    found = st.scalar_key(value)
    return found if found is not None else ("compound", go_json(value))


def _repeats(values: Sequence[object]) -> list[int]:
    """The positions where a value shows up for the second time."""
    seen: dict[object, int] = {}
    second: list[int] = []
    for position, value in enumerate(values):
        identity = _identity(value)
        seen[identity] = seen.get(identity, 0) + 1
        if seen[identity] == 2:
            second.append(position)
    return second


_UNSPECIFIED = ("unspecified", None)


def _list_map(schema: Schema, value: list[object], path: str) -> list[Cause]:
    for position, item in enumerate(value):
        if item is not None and not isinstance(item, dict):
            return [
                fe.invalid(
                    fe.index(path, position),
                    item,
                    "must be an object for an array of list-type map",
                )
            ]
    if len(value) <= 1:
        return []
    names = list(st.list_map_keys(schema))
    if len(names) == 1:
        single: list[object] = []
        for item in value:
            if isinstance(item, dict) and names[0] in item:
                single.append(item[names[0]])
            else:
                single.append(_UNSPECIFIED)
        errors = []
        for position in _repeats(single):
            found = single[position]
            shown = {} if found is _UNSPECIFIED else {names[0]: found}
            errors.append(fe.duplicate(fe.index(path, position), shown))
        return errors
    keys: list[object] = []
    for item in value:
        keys.append({n: item[n] for n in names if isinstance(item, dict) and n in item})
    return [fe.duplicate(fe.index(path, position), keys[position]) for position in _repeats(keys)]
