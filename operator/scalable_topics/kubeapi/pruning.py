"""Dropping what a structural schema does not declare, as apiextensions-apiserver prunes a custom
resource while decoding it: unknown fields (reported by path for fieldValidation Strict/Warn) and
nulls a field may not hold."""

from __future__ import annotations

from scalable_topics.kubeapi import structural as st
from scalable_topics.kubeapi.structural import Schema


def _join(parent: str, name: str) -> str:
    return f"{parent}.{name}" if parent else name


def prune(value: object, schema: Schema | None) -> list[str]:
    """Remove, in place, the fields of ``value`` (a whole resource) that ``schema`` does not
    declare; the resource's apiVersion, kind and metadata are left alone. Returns the paths of
    the removed fields, sorted: ``spec.foo``, ``spec.subscriptions[0].bar``, ``spec.map.key.x``."""
    unknown: list[str] = []
    root = dict(schema or {})
    root["x-kubernetes-embedded-resource"] = True
    _prune(value, root, "", unknown)
    return sorted(unknown)


def _prune(value: object, schema: Schema | None, path: str, unknown: list[str]) -> None:
    if schema is not None and st.preserves_unknown_fields(schema):
        _skip_prune(value, schema, path, unknown)
        return
    if isinstance(value, dict):
        if schema is None:
            unknown.extend(_join(path, name) for name in value)
            value.clear()
            return
        embedded = st.embedded_resource(schema)
        declared = st.properties(schema)
        for name in list(value):
            if embedded and name in st.META_FIELDS:
                continue
            if name in declared:
                _prune(value[name], declared[name], _join(path, name), unknown)
            elif st.has_additional(schema):
                _prune(value[name], st.additional(schema), _join(path, name), unknown)
            else:
                if name not in st.META_FIELDS or path:
                    unknown.append(_join(path, name))
                del value[name]
    elif isinstance(value, list):
        item_schema = st.items(schema) if schema is not None else None
        for position, item in enumerate(value):
            _prune(item, item_schema, f"{path}[{position}]", unknown)


def _skip_prune(value: object, schema: Schema, path: str, unknown: list[str]) -> None:
    """Under x-kubernetes-preserve-unknown-fields: keep unknown fields, prune known ones."""
    if isinstance(value, dict):
        embedded = st.embedded_resource(schema)
        declared = st.properties(schema)
        for name, item in value.items():
            if embedded and name in st.META_FIELDS:
                continue
            if name in declared:
                _prune(item, declared[name], _join(path, name), unknown)
            elif st.has_additional(schema):
                _prune(item, st.additional(schema), _join(path, name), unknown)
    elif isinstance(value, list):
        item_schema = st.items(schema)
        if item_schema is not None:
            for position, item in enumerate(value):
                _skip_prune(item, item_schema, f"{path}[{position}]", unknown)


def prune_nulls(value: object, schema: Schema | None) -> None:
    """Remove, in place, object fields set to null where the field is neither nullable nor
    defaulted (PruneNonNullableNullsWithoutDefaults); list items are left alone."""
    if isinstance(value, dict):
        for name in list(value):
            sub = st.field_schema(schema, name)
            if (
                value[name] is None
                and sub is not None
                and not st.nullable(sub)
                and sub.get("default") is None
            ):
                del value[name]
                continue
            prune_nulls(value[name], sub)
    elif isinstance(value, list):
        item_schema = st.items(schema) if schema is not None else None
        for item in value:
            prune_nulls(item, item_schema)
