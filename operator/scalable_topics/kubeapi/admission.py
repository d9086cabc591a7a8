"""Admission of a custom resource against its CRD's schema, in kube-apiserver's order and words:
prune unknown fields (fieldValidation Strict/Warn/Ignore), drop disallowed nulls, apply defaults,
validate against the OpenAPI schema (ratcheting unchanged parts on update), check list-type
invariants and embedded resources, then evaluate the x-kubernetes-validations CEL rules (skipped,
with a note, when the object already has errors that make them moot).

``admit`` returns the object to store and the warnings for the response, or raises ApiError:
400 BadRequest for unknown fields under Strict, 422 Invalid with one Cause per bad field."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Final

from scalable_topics.kubeapi import cel_rules, embedded, list_types, pruning, schema_check
from scalable_topics.kubeapi import field_errors as fe
from scalable_topics.kubeapi import structural as st
from scalable_topics.kubeapi.correlation import Correlated
from scalable_topics.kubeapi.crd_rules import check_crd, check_rules
from scalable_topics.kubeapi.defaults import apply_defaults
from scalable_topics.kubeapi.resources import ResourceType
from scalable_topics.kubeapi.status import ApiError, Cause, CauseType, Reason, invalid

__all__ = [
    "Admitted",
    "FieldValidation",
    "admit",
    "admit_resource",
    "check_crd",
    "check_rules",
    "normalize",
    "parse_field_validation",
    "strict_decoding_error",
]

# Errors after which kube-apiserver does not evaluate CEL rules (hasBlockingErr).
_BLOCKING: Final = frozenset(
    {
        CauseType.NOT_SUPPORTED,
        CauseType.REQUIRED,
        CauseType.TOO_LONG,
        CauseType.TOO_MANY,
        CauseType.TYPE_INVALID,
    }
)
RULES_NOT_CHECKED: Final = (
    "some validation rules were not checked because the object was invalid; correct the "
    "existing errors to complete validation"
)


class FieldValidation(StrEnum):
    """The ``fieldValidation`` query parameter: what to do with fields the schema lacks."""

    STRICT = "Strict"
    WARN = "Warn"
    IGNORE = "Ignore"


def parse_field_validation(
    value: str | None, options_kind: str = "CreateOptions"
) -> FieldValidation:
    """The request's fieldValidation (absent means Warn, as kube-apiserver defaults it); an
    unknown value is refused as kube-apiserver refuses it (422 on the ``options_kind``)."""
    if not value:
        return FieldValidation.WARN
    try:
        return FieldValidation(value)
    except ValueError:
        supported = ["", *sorted(v.value for v in FieldValidation)]
        cause = fe.not_supported("fieldValidation", value, supported)
        raise invalid(options_kind, "", "meta.k8s.io", [cause]) from None


@dataclass(frozen=True)
class Admitted:
    """The object as it is to be stored (pruned and defaulted), and the response's warnings."""

    object: dict[str, Any]
    warnings: tuple[str, ...]


def strict_decoding_error(
    kind: str, version: str, unknown: list[str], patched: str | None = None
) -> ApiError:
    """How kube-apiserver refuses unknown fields under fieldValidation=Strict: 400 on create and
    update; on a (merge or JSON) patch, 422 naming the patched object."""
    listed = ", ".join(f'unknown field "{path}"' for path in unknown)
    decoding = f"strict decoding error: {listed}"
    if patched is not None:
        cause = fe.invalid("patch", patched, decoding)
        return invalid("", "", "", [cause])
    return ApiError(
        400,
        Reason.BAD_REQUEST,
        f'{kind} in version "{version}" cannot be handled as a {kind}: {decoding}',
    )


def normalize(schema: Mapping[str, Any], stored: dict[str, Any]) -> dict[str, Any]:
    """A stored object as kube-apiserver reads it back: pruned, nulls dropped, defaulted."""
    result = copy.deepcopy(stored)
    pruning.prune(result, schema)
    pruning.prune_nulls(result, schema)
    apply_defaults(result, schema)
    return result


def _type_meta(new: Mapping[str, Any], kind: str, group: str, version: str) -> list[Cause]:
    causes: list[Cause] = []
    if new.get("kind") != kind:
        causes.append(fe.invalid("kind", new.get("kind", ""), f"must be {kind}"))
    if version:
        expected = f"{group}/{version}" if group else version
        if new.get("apiVersion") != expected:
            causes.append(
                fe.invalid("apiVersion", new.get("apiVersion", ""), f"must be {expected}")
            )
    return causes


def _status_errors(
    schema: Mapping[str, Any], obj: dict[str, Any], correlation: Correlated | None
) -> list[Cause]:
    """The schema errors of ``status`` alone, validated as its own document under the path
    ``status`` (ValidateStatusUpdate)."""
    status_schema = st.properties(schema).get("status")
    if status_schema is None or "status" not in obj:
        return []
    inner = correlation.key("status") if correlation is not None else None
    causes = schema_check.validate(status_schema, obj["status"], inner)
    return [
        Cause(c.reason, "status" if c.field == fe.NO_FIELD else f"status.{c.field}", c.message)
        for c in causes
    ]


def admit(
    schema: Mapping[str, Any],
    new: dict[str, Any],
    old: dict[str, Any] | None,
    *,
    field_validation: FieldValidation,
    kind: str,
    name: str,
    group: str,
    version: str = "",
    patched: str | None = None,
    status_subresource: bool = False,
) -> Admitted:
    """Admit ``new`` (the whole object; ``old`` is the stored one on update, None on create)
    against ``schema`` (the CRD version's openAPIV3Schema). ``version`` (e.g. ``v1alpha1``) is
    checked against apiVersion and named in strict decoding errors; ``patched`` is the patched
    object's JSON when the request is a patch. ``status_subresource``: the request is an update
    of the /status subresource, whose schema check covers only ``status`` (kube-apiserver names
    those errors ``status.<field>`` with messages naming the field within status, and checks no
    embedded resources); list types and CEL rules still cover the whole object. ``new`` itself
    is left unchanged."""
    obj = copy.deepcopy(new)
    unknown = pruning.prune(obj, schema)
    pruning.prune_nulls(obj, schema)
    warnings: list[str] = []
    if unknown:
        if field_validation == FieldValidation.STRICT:
            raise strict_decoding_error(kind, version, unknown, patched)
        if field_validation == FieldValidation.WARN:
            warnings += [f'unknown field "{path}"' for path in unknown]
    apply_defaults(obj, schema)

    type_meta = _type_meta(obj, kind, group, version)
    if type_meta:
        raise invalid(kind, name, group, type_meta)

    stored = normalize(schema, old) if old is not None else None
    correlation = Correlated(obj, stored, schema) if stored is not None else None
    if status_subresource:
        causes = _status_errors(schema, obj, correlation)
    else:
        causes = schema_check.validate(schema, obj, correlation)
        causes += embedded.validate(schema, obj)
    if stored is None or not list_types.validate(schema, stored):
        causes += list_types.validate(schema, obj)
    if any(c.reason in _BLOCKING for c in causes):
        causes.append(fe.invalid("", None, RULES_NOT_CHECKED))
    else:
        outcome = cel_rules.validate(schema, obj, stored, correlation)
        causes += outcome.errors
        warnings += outcome.warnings
    if causes:
        raise invalid(kind, name, group, causes)
    return Admitted(obj, tuple(warnings))


def admit_resource(
    resource: ResourceType,
    new: dict[str, Any],
    old: dict[str, Any] | None,
    *,
    field_validation: FieldValidation,
    name: str,
    patched: str | None = None,
    status_subresource: bool = False,
) -> Admitted:
    """``admit`` for a CRD-defined ResourceType (its schema, kind, group and version); a type
    without a schema is admitted as it is."""
    if resource.schema is None:
        return Admitted(copy.deepcopy(new), ())
    return admit(
        resource.schema,
        new,
        old,
        field_validation=field_validation,
        kind=resource.kind,
        name=name,
        group=resource.group,
        version=resource.version,
        patched=patched,
        status_subresource=status_subresource,
    )
