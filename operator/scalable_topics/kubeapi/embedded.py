"""Objects embedded in a custom resource (``x-kubernetes-embedded-resource``) must be resources:
apiVersion and kind set and well formed, as apiextensions-apiserver's objectmeta validation
requires. (Their metadata is checked only for being an object; the API server's own name and
label rules are not repeated here.)"""

from __future__ import annotations

from scalable_topics.kubeapi import field_errors as fe
from scalable_topics.kubeapi import name_rules
from scalable_topics.kubeapi import structural as st
from scalable_topics.kubeapi.status import Cause
from scalable_topics.kubeapi.structural import Schema


def validate(schema: Schema | None, value: object, path: str = "") -> list[Cause]:
    """The errors of the embedded resources anywhere in ``value`` (the root is not one)."""
    if schema is None:
        return []
    errors: list[Cause] = []
    if isinstance(value, dict):
        if path and st.embedded_resource(schema):
            errors += _resource(value, path)
        declared = st.properties(schema)
        values_schema = st.additional(schema)
        for name, item in value.items():
            if name in declared:
                errors += validate(declared[name], item, fe.child(path, name))
            elif values_schema is not None:
                errors += validate(values_schema, item, fe.key(path, name))
    elif isinstance(value, list):
        for position, item in enumerate(value):
            errors += validate(st.items(schema), item, fe.index(path, position))
    return errors


def _group_version_error(text: str) -> str | None:
    """schema.ParseGroupVersion's complaint about ``text``, if any."""
    if text == "v1" or text.count("/") == 0:
        return None
    if text.count("/") == 1:
        return None
    return f"unexpected GroupVersion string: {text}"


def _resource(value: dict[str, object], path: str) -> list[Cause]:
    errors: list[Cause] = []
    if "apiVersion" not in value:
        errors.append(fe.required(fe.child(path, "apiVersion")))
    if "kind" not in value:
        errors.append(fe.required(fe.child(path, "kind")))
    for name, item in value.items():
        where = fe.child(path, name)
        if name == "apiVersion":
            if not isinstance(item, str):
                errors.append(fe.invalid(where, item, "must be a string"))
            elif not item:
                errors.append(fe.invalid(where, item, "must not be empty"))
            elif (problem := _group_version_error(item)) is not None:
                errors.append(fe.invalid(where, item, problem))
        elif name == "kind":
            if not isinstance(item, str):
                errors.append(fe.invalid(where, item, "must be a string"))
            elif not item:
                errors.append(fe.invalid(where, item, "must not be empty"))
            elif problems := name_rules.dns1035_label_errors(item.lower()):
                detail = "may have mixed case, but should otherwise match: " + ",".join(problems)
                errors.append(fe.invalid(where, item, detail))
        elif name == "metadata" and not isinstance(item, dict):
            errors.append(
                fe.invalid(
                    where, item, f"expected map[string]interface{{}}, got {st.json_kind(item)}"
                )
            )
    return errors
