"""The rules of a write under Kubernetes semantics, apart from any storage.

Each write request becomes a *decision*: a function from the object as stored (or None) to an
:class:`Outcome`, the event the write makes and the object it leaves. An adapter runs the
decision inside its own transaction; the rules themselves do no I/O, so every adapter (and a
test API server) can share them.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from .errors import AlreadyExists, Conflict, Invalid, NotFound, UnknownKind
from .kinds import KindInfo
from .patch import merge_patch
from .port import EventType, Object
from .selectors import (
    DNS_LABEL_MAX,
    DNS_SUBDOMAIN_MAX,
    is_dns_label,
    is_dns_subdomain,
    validate_label_key,
    validate_label_value,
)

# Metadata the store owns: a write's request cannot set these.
_SYSTEM_METADATA = (
    "uid",
    "creationTimestamp",
    "generation",
    "resourceVersion",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
)


@dataclass(frozen=True, slots=True)
class Outcome:
    """What a write does: ``type`` None leaves ``object`` (the stored one) untouched."""

    type: EventType | None
    object: Object


def metadata(obj: Object) -> dict[str, Any]:
    meta: dict[str, Any] = obj["metadata"]
    return meta


def labels(obj: Object) -> dict[str, str]:
    labels: dict[str, str] = metadata(obj).get("labels") or {}
    return labels


def finalizers(obj: Object) -> list[str]:
    finalizers: list[str] = metadata(obj).get("finalizers") or []
    return finalizers


def identity(obj: Object) -> tuple[str, str, str]:
    """Kind, namespace ("" for a cluster-scoped object) and name."""
    meta = metadata(obj)
    return obj["kind"], meta.get("namespace", ""), meta["name"]


def check_version(stored: Object, expected: str | None) -> None:
    actual = metadata(stored)["resourceVersion"]
    if expected is not None and expected != actual:
        kind, namespace, name = identity(stored)
        raise Conflict(kind, namespace, name, expected, actual)


def _validate_string_map(value: Any, field: str, *, label_values: bool) -> None:
    if value is None:
        return
    if not isinstance(value, dict):
        raise Invalid(f"metadata.{field} must be a map of strings, not {type(value).__name__}")
    for key, item in value.items():
        if not isinstance(item, str):
            raise Invalid(f"metadata.{field}[{key!r}] must be a string, not {type(item).__name__}")
        validate_label_key(key, f"metadata.{field} key")
        if label_values:
            validate_label_value(item)


def validate(obj: Any, kinds: Mapping[str, KindInfo]) -> KindInfo:
    """Check what every write request must carry; return the kind's info."""
    if not isinstance(obj, dict):
        raise Invalid(f"an object must be a JSON object, not {type(obj).__name__}")
    kind = obj.get("kind")
    if not isinstance(kind, str) or not kind:
        raise Invalid("an object needs a kind")
    if kind not in kinds:
        raise UnknownKind(kind, list(kinds))
    info = kinds[kind]
    if obj.get("apiVersion") != info.api_version:
        raise Invalid(
            f"{kind} has apiVersion {info.api_version!r}, the object says {obj.get('apiVersion')!r}"
        )
    meta = obj.get("metadata")
    if not isinstance(meta, dict):
        raise Invalid(f"{kind}: metadata must be an object with name and namespace")
    name, namespace = meta.get("name"), meta.get("namespace")
    if not isinstance(name, str) or not name:
        raise Invalid(f"{kind}: metadata.name is required")
    if not info.namespaced:
        if namespace not in (None, ""):
            raise Invalid(f"{kind} {name!r} is cluster-scoped: metadata.namespace must be empty")
        meta.pop("namespace", None)
        namespace = None
    elif not isinstance(namespace, str) or not namespace:
        raise Invalid(f"{kind} {name!r}: metadata.namespace is required")
    if not is_dns_subdomain(name):
        raise Invalid(
            f"{kind} metadata.name {name!r} is not a DNS subdomain name: at most "
            f"{DNS_SUBDOMAIN_MAX} lowercase alphanumerics, '-' or '.', starting and ending "
            "with an alphanumeric"
        )
    if namespace is not None and not is_dns_label(namespace):
        raise Invalid(
            f"{kind} metadata.namespace {namespace!r} is not a DNS label: at most "
            f"{DNS_LABEL_MAX} lowercase alphanumerics or '-', starting and ending with an "
            "alphanumeric"
        )
    _validate_string_map(meta.get("labels"), "labels", label_values=True)
    _validate_string_map(meta.get("annotations"), "annotations", label_values=False)
    finalizers = meta.get("finalizers")
    if finalizers is not None and not (
        isinstance(finalizers, list) and all(isinstance(f, str) and f for f in finalizers)
    ):
        raise Invalid(f"{kind} {name!r}: metadata.finalizers must be a list of non-empty strings")
    return info


def _settle(stored: Object, new: Object) -> Outcome:
    """A write of ``new`` over ``stored``: removal, no-op or modification."""
    if "deletionTimestamp" in metadata(new) and not finalizers(new):
        return Outcome(EventType.DELETED, new)
    if new == stored:
        return Outcome(None, stored)
    return Outcome(EventType.MODIFIED, new)


def create(
    request: Object, info: KindInfo, uid: str, now: str
) -> Callable[[Object | None], Outcome]:
    meta = metadata(request)
    if meta.get("resourceVersion"):
        raise Invalid(
            f"{info.kind} {meta['name']!r}: metadata.resourceVersion must not be set on create"
        )

    def decide(stored: Object | None) -> Outcome:
        if stored is not None:
            raise AlreadyExists(*identity(request))
        for field in _SYSTEM_METADATA:
            meta.pop(field, None)
        meta.update(uid=uid, creationTimestamp=now, generation=1)
        if info.status_subresource:
            request.pop("status", None)
        return Outcome(EventType.ADDED, request)

    return decide


def _read_version(request: Object, info: KindInfo, call: str) -> str:
    """The resourceVersion a replace must carry: the version its writer read."""
    expected = metadata(request).get("resourceVersion")
    if not isinstance(expected, str) or not expected:
        raise Invalid(
            f"{info.kind} {metadata(request)['name']!r}: {call} needs metadata.resourceVersion, "
            "the version the writer read"
        )
    return expected


def replace(request: Object, info: KindInfo) -> Callable[[Object | None], Outcome]:
    expected = _read_version(request, info, "replace")

    def decide(stored: Object | None) -> Outcome:
        if stored is None:
            raise NotFound(*identity(request))
        check_version(stored, expected)
        new = request
        meta, stored_meta = metadata(new), metadata(stored)
        for field in _SYSTEM_METADATA:
            if field in stored_meta:
                meta[field] = stored_meta[field]
            else:
                meta.pop(field, None)
        if info.status_subresource:
            new.pop("status", None)
            if "status" in stored:
                new["status"] = stored["status"]
        if "deletionTimestamp" in stored_meta:
            added = set(finalizers(new)) - set(finalizers(stored))
            if added:
                raise Invalid(
                    f"{info.kind} {meta['name']!r} is being deleted: finalizers "
                    f"{sorted(added)} cannot be added"
                )
        if new.get("spec") != stored.get("spec"):
            meta["generation"] = stored_meta.get("generation", 0) + 1
        return _settle(stored, new)

    return decide


def replace_status(request: Object, info: KindInfo) -> Callable[[Object | None], Outcome]:
    if not info.status_subresource:
        raise Invalid(f"{info.kind} has no status subresource: write its status with replace")
    expected = _read_version(request, info, "replace_status")

    def decide(stored: Object | None) -> Outcome:
        if stored is None:
            raise NotFound(*identity(request))
        check_version(stored, expected)
        new = dict(stored)  # only the top-level status member changes
        new.pop("status", None)
        if "status" in request:
            new["status"] = request["status"]
        return _settle(stored, new)

    return decide


def patch(
    kind: str,
    namespace: str,
    name: str,
    patch: Object,
    info: KindInfo,
    kinds: Mapping[str, KindInfo],
    expected: str | None,
    *,
    status: bool,
) -> Callable[[Object | None], Outcome]:
    if status and not info.status_subresource:
        raise Invalid(f"{info.kind} has no status subresource: patch its status with patch")
    patch_meta = patch.get("metadata")
    # As in Kubernetes, a resourceVersion inside a merge patch is a precondition.
    if isinstance(patch_meta, dict) and isinstance(patch_meta.get("resourceVersion"), str):
        if expected is not None and expected != patch_meta["resourceVersion"]:
            raise Invalid(
                f"the patch's metadata.resourceVersion {patch_meta['resourceVersion']!r} "
                f"contradicts the precondition {expected!r}"
            )
        expected = patch_meta["resourceVersion"]

    def decide(stored: Object | None) -> Outcome:
        if stored is None:
            raise NotFound(kind, namespace, name)
        check_version(stored, expected)
        patched = merge_patch(stored, patch)
        patched_meta = patched.get("metadata")
        patched_meta = patched_meta if isinstance(patched_meta, dict) else {}
        for path, before, after in (
            ("kind", kind, patched.get("kind")),
            ("apiVersion", info.api_version, patched.get("apiVersion")),
            ("metadata.name", name, patched_meta.get("name")),
            ("metadata.namespace", namespace or None, patched_meta.get("namespace") or None),
        ):
            if before != after:
                raise Invalid(f"a patch cannot change {path} ({before!r} to {after!r})")
        validate(patched, kinds)
        metadata(patched)["resourceVersion"] = metadata(stored)["resourceVersion"]
        rule = replace_status(patched, info) if status else replace(patched, info)
        return rule(stored)

    return decide


def delete(
    kind: str, namespace: str, name: str, expected: str | None, now: str
) -> Callable[[Object | None], Outcome]:
    def decide(stored: Object | None) -> Outcome:
        if stored is None:
            raise NotFound(kind, namespace, name)
        check_version(stored, expected)
        if not finalizers(stored):
            return Outcome(EventType.DELETED, stored)
        if "deletionTimestamp" in metadata(stored):
            return Outcome(None, stored)
        marked = copy.deepcopy(stored)
        meta = metadata(marked)
        meta["deletionTimestamp"] = now
        meta["generation"] = meta.get("generation", 0) + 1
        return Outcome(EventType.MODIFIED, marked)

    return decide


def encode(obj: Object) -> str:
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def private_copy(obj: Any) -> Any:
    """A deep copy the caller cannot touch, checked to be plain JSON."""
    try:
        return json.loads(json.dumps(obj, allow_nan=False))
    except (TypeError, ValueError) as exc:
        raise Invalid(f"the request is not plain JSON: {exc}") from exc
