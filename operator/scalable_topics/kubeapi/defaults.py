"""Defaulting from a structural schema's ``default`` values, as apiextensions-apiserver defaults a
custom resource after pruning it: missing fields of present objects (and non-nullable nulls) get a
deep copy of their default, recursively, in list items and map values too."""

from __future__ import annotations

import copy

from scalable_topics.kubeapi import structural as st
from scalable_topics.kubeapi.structural import Schema


def _non_nullable_null(value: object, schema: Schema | None) -> bool:
    return value is None and schema is not None and not st.nullable(schema)


def apply_defaults(value: object, schema: Schema | None) -> None:
    """Fill in defaults in ``value``, in place."""
    if schema is None:
        return
    if isinstance(value, dict):
        declared = st.properties(schema)
        for name, sub in declared.items():
            default = sub.get("default")
            if default is None:
                continue
            if name not in value or _non_nullable_null(value[name], sub):
                value[name] = copy.deepcopy(default)
        values_schema = st.additional(schema)
        for name in value:
            if name in declared:
                apply_defaults(value[name], declared[name])
            elif values_schema is not None:
                default = values_schema.get("default")
                if _non_nullable_null(value[name], values_schema) and default is not None:
                    value[name] = copy.deepcopy(default)
                apply_defaults(value[name], values_schema)
    elif isinstance(value, list):
        item_schema = st.items(schema)
        if item_schema is None:
            return
        for position, item in enumerate(value):
            if _non_nullable_null(item, item_schema) and item_schema.get("default") is not None:
                value[position] = copy.deepcopy(item_schema["default"])
            apply_defaults(value[position], item_schema)
