"""The resource a request path names, as the API server's URL scheme lays it out:

``/api/v1[/namespaces/<ns>]/<plural>[/<name>[/<subresource>]]`` for the core group and
``/apis/<group>/<version>[/namespaces/<ns>]/<plural>[/<name>[/<subresource>]]`` for the others.
``/api/v1/namespaces/<name>[/status|/finalize]`` is the Namespace itself.
"""

from __future__ import annotations

from dataclasses import dataclass

NAMESPACE_SUBRESOURCES = frozenset({"status", "finalize"})


@dataclass(frozen=True, slots=True)
class ResourcePath:
    group: str
    version: str
    plural: str
    namespace: str | None = None  # None: cluster-scoped, or every namespace
    name: str | None = None
    subresource: str | None = None


def parse_resource_path(path: str) -> ResourcePath | None:
    """The resource ``path`` names, or None when it names none (discovery, an unknown root)."""
    parts = [part for part in path.split("/") if part]
    if len(parts) >= 2 and parts[0] == "api":
        group, version, rest = "", parts[1], parts[2:]
    elif len(parts) >= 3 and parts[0] == "apis":
        group, version, rest = parts[1], parts[2], parts[3:]
    else:
        return None
    if not rest:
        return None
    if (
        rest[0] == "namespaces"
        and len(rest) >= 3
        and not (group == "" and len(rest) == 3 and rest[2] in NAMESPACE_SUBRESOURCES)
    ):
        namespace, rest = rest[1], rest[2:]
    else:
        namespace = None
    if len(rest) > 3:
        return None
    plural = rest[0]
    name = rest[1] if len(rest) > 1 else None
    subresource = rest[2] if len(rest) > 2 else None
    return ResourcePath(group, version, plural, namespace, name, subresource)
