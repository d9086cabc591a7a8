"""Validation of ``metadata`` as the API server does it for every kind, in its words: the name
rules are ``name_rules``', the causes ``field_errors``'."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any, Final

from scalable_topics.kubeapi import field_errors as fe
from scalable_topics.kubeapi import name_rules
from scalable_topics.kubeapi.status import Cause

ANNOTATIONS_MAX_BYTES: Final = 256 * 1024

_NAME: Final = fe.child("metadata", "name")
_LABELS: Final = fe.child("metadata", "labels")
_ANNOTATIONS: Final = fe.child("metadata", "annotations")
_FINALIZERS: Final = fe.child("metadata", "finalizers")
_OWNERS: Final = fe.child("metadata", "ownerReferences")


def _invalid(field: str, value: object, messages: Iterable[str]) -> list[Cause]:
    """One Invalid cause a message, as kube's validators turn a name rule's messages into
    field errors."""
    return [fe.invalid(field, value, message) for message in messages]


def _string_map(
    value: object, field: str, value_rule: Callable[[str], list[str]]
) -> tuple[list[Cause], dict[str, str]]:
    """Labels or annotations: a map of strings keyed by qualified names, each value to
    ``value_rule``. The causes, and the entries whose values are strings."""
    if not isinstance(value, Mapping):
        return [fe.invalid(field, value, "must be a map of strings")], {}
    causes: list[Cause] = []
    strings: dict[str, str] = {}
    for key, item in value.items():
        causes += _invalid(field, key, name_rules.qualified_name_errors(key))
        if not isinstance(item, str):
            causes.append(fe.invalid(field, item, "must be a string"))
        else:
            causes += _invalid(field, item, value_rule(item))
            strings[key] = item
    return causes, strings


def metadata_causes(meta: Mapping[str, Any], *, dns_label_name: bool) -> list[Cause]:
    """What is wrong with an object's metadata (its name is checked once one is set)."""
    causes: list[Cause] = []
    name = meta.get("name")
    if isinstance(name, str) and name:
        rule = (
            name_rules.dns1123_label_errors
            if dns_label_name
            else name_rules.dns1123_subdomain_errors
        )
        causes += _invalid(_NAME, name, rule(name))
    label_causes, _ = _string_map(meta.get("labels") or {}, _LABELS, name_rules.label_value_errors)
    causes += label_causes
    annotation_causes, annotations = _string_map(
        meta.get("annotations") or {}, _ANNOTATIONS, lambda _: []
    )
    causes += annotation_causes
    if sum(len(k) + len(v.encode()) for k, v in annotations.items()) > ANNOTATIONS_MAX_BYTES:
        causes.append(fe.too_long(_ANNOTATIONS, ANNOTATIONS_MAX_BYTES))
    finalizers = meta.get("finalizers") or []
    if not isinstance(finalizers, list):
        causes.append(fe.invalid(_FINALIZERS, finalizers, "must be a list of strings"))
        finalizers = []
    for position, finalizer in enumerate(finalizers):
        field = fe.index(_FINALIZERS, position)
        if not isinstance(finalizer, str):
            causes.append(fe.invalid(field, finalizer, "must be a string"))
        else:
            causes += _invalid(field, finalizer, name_rules.qualified_name_errors(finalizer))
    owners = meta.get("ownerReferences") or []
    if not isinstance(owners, list):
        causes.append(fe.invalid(_OWNERS, owners, "must be a list"))
        owners = []
    for position, owner in enumerate(owners):
        field = fe.index(_OWNERS, position)
        if not isinstance(owner, Mapping):
            causes.append(fe.invalid(field, owner, "must be an object"))
            continue
        for key in ("apiVersion", "kind", "name", "uid"):
            if not isinstance(owner.get(key), str) or not owner.get(key):
                causes.append(fe.required(fe.child(field, key)))
    return causes
