"""The checks kube-apiserver makes of a CRD's x-kubernetes-validations when the CRD is applied:
the fields of each rule, that its expressions compile for the schema node they sit on, and that
transition rules (``oldSelf``) sit where old values correlate. Causes name the rule in the CRD
(``spec.versions[0].schema.openAPIV3Schema.properties[spec].x-kubernetes-validations[0].rule``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from scalable_topics.kubeapi import field_errors as fe
from scalable_topics.kubeapi import structural as st
from scalable_topics.kubeapi.cel_compile import Checker, check_expression, compile_expression
from scalable_topics.kubeapi.cel_rules import REASONS, Rule, normalize_field_path
from scalable_topics.kubeapi.cel_values import resource_schema
from scalable_topics.kubeapi.status import Cause, CauseType
from scalable_topics.kubeapi.structural import Schema


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
    checker = Checker(text, schema, False)
    checker.check(compiled.tree)
    if checker.issues.found:
        return "messageExpression compilation failed: " + checker.issues.render()
    if checker.result_kind(compiled.tree) not in ("string", "dyn"):
        return "messageExpression must evaluate to a string"
    return ""
