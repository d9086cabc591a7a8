"""JSON merge patch (RFC 7386), the patch type ``patch`` and ``patch_status`` accept."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any


def merge_patch(target: Mapping[str, Any], patch: Mapping[str, Any]) -> dict[str, Any]:
    """Return ``target`` with ``patch`` applied; neither input is modified.

    A null in the patch deletes the member, an object merges into the member recursively, and
    any other value (arrays included) replaces it. Members keep their order in ``target``;
    new ones follow in the patch's order.
    """
    result: dict[str, Any] = {}
    for key in (*target, *(key for key in patch if key not in target)):
        if key not in patch:
            result[key] = copy.deepcopy(target[key])
            continue
        change = patch[key]
        if change is None:
            continue
        if isinstance(change, Mapping):
            current = target.get(key)
            result[key] = merge_patch(current if isinstance(current, Mapping) else {}, change)
        else:
            result[key] = copy.deepcopy(change)
    return result
