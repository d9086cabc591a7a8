"""Applying a PATCH body to the stored object, by its content type.

* ``application/merge-patch+json``: RFC 7386.
* ``application/json-patch+json``: RFC 6902 (jsonpatch), ``test`` operations included.
* ``application/strategic-merge-patch+json``: only for the built-in kinds, as in Kubernetes
  (custom resources answer 415). Their lists are replaced whole except ``metadata.finalizers``
  (a set) and ``metadata.ownerReferences`` (merged by uid), the only lists with a merge strategy
  in the kinds served; ``$patch: delete``/``replace`` on maps and the ``$setElementOrder``,
  ``$retainKeys`` and ``$deleteFromPrimitiveList`` directives are honoured.
* ``application/apply-patch+yaml`` (server-side apply) is not served: 415, and kubectl's
  client-side ``apply`` works instead.
"""

from __future__ import annotations

import copy
import json
from typing import Any

import jsonpatch

from ..store.patch import merge_patch
from .status import ApiError, Cause, CauseType, Reason

MERGE = "application/merge-patch+json"
JSON_PATCH = "application/json-patch+json"
STRATEGIC = "application/strategic-merge-patch+json"
APPLY = "application/apply-patch+yaml"

Object = dict[str, Any]


def accepted_types(builtin: bool) -> list[str]:
    return [JSON_PATCH, MERGE, *([STRATEGIC] if builtin else [])]


def unsupported(content_type: str, builtin: bool) -> ApiError:
    if content_type == APPLY:
        message = (
            "server-side apply is not supported by this API server: use client-side apply "
            "(kubectl apply without --server-side)"
        )
    else:
        message = (
            f"the body of the request was in an unknown format - accepted media types include: "
            f"{', '.join(accepted_types(builtin))}"
        )
    return ApiError(415, Reason.UNSUPPORTED_MEDIA_TYPE, message)


def apply_patch(
    stored: Object,
    body: bytes,
    content_type: str,
    *,
    builtin: bool,
    kind: str,
    name: str,
    group: str,
) -> Object:
    """The object ``body`` (of ``content_type``) makes of ``stored``; ApiError when it cannot."""
    if content_type not in accepted_types(builtin):
        raise unsupported(content_type, builtin)
    try:
        patch = json.loads(body)
    except ValueError as exc:
        raise ApiError(400, Reason.BAD_REQUEST, f"the patch is not valid JSON: {exc}") from exc
    try:
        if content_type == JSON_PATCH:
            if not isinstance(patch, list):
                raise ValueError("a JSON patch must be a list of operations")
            patched: Object = jsonpatch.apply_patch(stored, patch)
            return patched
        if not isinstance(patch, dict):
            raise ValueError("a merge patch must be a JSON object")
        if content_type == MERGE:
            return merge_patch(stored, patch)
        merged: Object = strategic_merge(stored, patch, path=())
        return merged
    except (jsonpatch.JsonPatchException, jsonpatch.JsonPointerException, ValueError) as exc:
        qualified = f"{kind}.{group}" if group else kind
        shown = json.dumps(patch, ensure_ascii=False)
        raise ApiError(
            422,
            Reason.INVALID,
            f'{qualified} "{name}" is invalid: patch: Invalid value: {shown}: {exc}',
            kind=kind,
            name=name,
            group=group,
            causes=[Cause(CauseType.INVALID, "patch", f"Invalid value: {exc}")],
        ) from exc


_MERGED_LISTS = {("metadata", "finalizers"): None, ("metadata", "ownerReferences"): "uid"}


def strategic_merge(target: Any, patch: Object, path: tuple[str, ...]) -> Any:
    if patch.get("$patch") == "replace":
        return {k: copy.deepcopy(v) for k, v in patch.items() if k != "$patch"}
    if patch.get("$patch") == "delete":
        return None
    result: Object = copy.deepcopy(target) if isinstance(target, dict) else {}
    retain = patch.get("$retainKeys")
    for key, value in patch.items():
        if key in ("$patch", "$retainKeys") or key.startswith("$setElementOrder/"):
            continue
        if key.startswith("$deleteFromPrimitiveList/"):
            field = key.split("/", 1)[1]
            if isinstance(result.get(field), list):
                result[field] = [item for item in result[field] if item not in value]
            continue
        here = (*path, key)
        if value is None:
            result.pop(key, None)
        elif isinstance(value, dict):
            merged = strategic_merge(result.get(key), value, here)
            if merged is None:
                result.pop(key, None)
            else:
                result[key] = merged
        elif isinstance(value, list) and here in _MERGED_LISTS:
            result[key] = _merge_list(result.get(key) or [], value, _MERGED_LISTS[here])
        else:
            result[key] = copy.deepcopy(value)
    if isinstance(retain, list):
        result = {k: v for k, v in result.items() if k in retain}
    return result


def _merge_list(current: list[Any], patch: list[Any], key: str | None) -> list[Any]:
    if key is None:
        return [*current, *(item for item in patch if item not in current)]
    merged = {item.get(key): item for item in current if isinstance(item, dict)}
    for item in patch:
        if not isinstance(item, dict):
            continue
        if item.get("$patch") == "delete":
            merged.pop(item.get(key), None)
        else:
            merged[item.get(key)] = {**merged.get(item.get(key), {}), **item}
    return list(merged.values())
