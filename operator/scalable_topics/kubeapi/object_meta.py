"""Validation of ``metadata`` as the API server does it for every kind, in its words."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from .status import Cause, CauseType

DNS_SUBDOMAIN_MAX = 253
DNS_LABEL_MAX = 63
ANNOTATIONS_MAX_BYTES = 256 * 1024

_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
_NAME_PART = re.compile(r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]")
_LABEL_VALUE = re.compile(r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?")

SUBDOMAIN_MESSAGE = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or "
    "'.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used "
    f"for validation is '{_SUBDOMAIN.pattern}')"
)
LABEL_MESSAGE = (
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and "
    "must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex "
    f"used for validation is '{_LABEL.pattern}')"
)
_NAME_PART_MESSAGE = (
    "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end "
    "with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for "
    f"validation is '{_NAME_PART.pattern}')"
)
_LABEL_VALUE_MESSAGE = (
    "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or "
    "'.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value', "
    f" or '12345', regex used for validation is '{_LABEL_VALUE.pattern}')"
)


def quoted(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


def _invalid(field: str, value: Any, detail: str) -> Cause:
    return Cause(CauseType.INVALID, field, f"Invalid value: {quoted(value)}: {detail}")


def name_causes(name: str, field: str, *, dns_label: bool) -> list[Cause]:
    limit, pattern, message = (
        (DNS_LABEL_MAX, _LABEL, LABEL_MESSAGE)
        if dns_label
        else (DNS_SUBDOMAIN_MAX, _SUBDOMAIN, SUBDOMAIN_MESSAGE)
    )
    causes = []
    if len(name) > limit:
        causes.append(_invalid(field, name, f"must be no more than {limit} characters"))
    if not pattern.fullmatch(name):
        causes.append(_invalid(field, name, message))
    return causes


def qualified_name_causes(key: str, field: str) -> list[Cause]:
    """A label key, annotation key or finalizer: ``[prefix/]name``."""
    prefix, _, name = key.rpartition("/")
    causes = []
    if "/" in key and not prefix:
        causes.append(_invalid(field, key, "prefix part must be non-empty"))
    elif prefix:
        causes += [
            _invalid(field, key, f"prefix part {c.message.split(': ', 2)[-1]}")
            for c in name_causes(prefix, field, dns_label=False)
        ]
    if not name:
        causes.append(_invalid(field, key, "name part must be non-empty"))
    else:
        if len(name) > DNS_LABEL_MAX:
            causes.append(_invalid(field, key, "name part must be no more than 63 characters"))
        if not _NAME_PART.fullmatch(name):
            causes.append(_invalid(field, key, _NAME_PART_MESSAGE))
    return causes


def metadata_causes(meta: Mapping[str, Any], *, dns_label_name: bool) -> list[Cause]:
    """What is wrong with an object's metadata (its name is checked once one is set)."""
    causes: list[Cause] = []
    name = meta.get("name")
    if isinstance(name, str) and name:
        causes += name_causes(name, "metadata.name", dns_label=dns_label_name)
    labels = meta.get("labels") or {}
    if not isinstance(labels, Mapping):
        causes.append(_invalid("metadata.labels", labels, "must be a map of strings"))
        labels = {}
    for key, value in labels.items():
        causes += qualified_name_causes(key, "metadata.labels")
        if not isinstance(value, str):
            causes.append(_invalid("metadata.labels", value, "must be a string"))
            continue
        if len(value) > DNS_LABEL_MAX:
            causes.append(_invalid("metadata.labels", value, "must be no more than 63 characters"))
        if not _LABEL_VALUE.fullmatch(value):
            causes.append(_invalid("metadata.labels", value, _LABEL_VALUE_MESSAGE))
    annotations = meta.get("annotations") or {}
    if not isinstance(annotations, Mapping):
        causes.append(_invalid("metadata.annotations", annotations, "must be a map of strings"))
        annotations = {}
    size = 0
    for key, value in annotations.items():
        causes += qualified_name_causes(key, "metadata.annotations")
        if not isinstance(value, str):
            causes.append(_invalid("metadata.annotations", value, "must be a string"))
            continue
        size += len(key) + len(value.encode())
    if size > ANNOTATIONS_MAX_BYTES:
        causes.append(
            Cause(
                CauseType.TOO_LONG,
                "metadata.annotations",
                f"Too long: may not be more than {ANNOTATIONS_MAX_BYTES} bytes",
            )
        )
    finalizers = meta.get("finalizers") or []
    if not isinstance(finalizers, list):
        causes.append(_invalid("metadata.finalizers", finalizers, "must be a list of strings"))
        finalizers = []
    for index, finalizer in enumerate(finalizers):
        field = f"metadata.finalizers[{index}]"
        if not isinstance(finalizer, str):
            causes.append(_invalid(field, finalizer, "must be a string"))
        else:
            causes += qualified_name_causes(finalizer, field)
    owners = meta.get("ownerReferences") or []
    if not isinstance(owners, list):
        causes.append(_invalid("metadata.ownerReferences", owners, "must be a list"))
        owners = []
    for index, owner in enumerate(owners):
        field = f"metadata.ownerReferences[{index}]"
        if not isinstance(owner, Mapping):
            causes.append(_invalid(field, owner, "must be an object"))
            continue
        for key in ("apiVersion", "kind", "name", "uid"):
            if not isinstance(owner.get(key), str) or not owner.get(key):
                causes.append(Cause(CauseType.REQUIRED, f"{field}.{key}", "Required value"))
    return causes
