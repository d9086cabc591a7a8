"""API discovery: ``/version``, ``/api``, ``/apis``, ``/apis/<group>``, ``/api/v1`` and
``/apis/<group>/<version>``.

kubectl (client-go) asks ``/api`` and ``/apis`` for aggregated discovery first::

    Accept: application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json

and trusts the answer's Content-Type, not its body: only a response labelled
``application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList`` is read as aggregated
(one request gives every group, version and resource); anything else is read as the legacy
APIVersions / APIGroupList, after which it asks every ``/apis/<group>/<version>`` in turn. Both
forms are served here.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from .resources import VERBS, ResourceType
from .tables import parse_accept

Object = dict[str, Any]

DISCOVERY_GROUP = "apidiscovery.k8s.io"
AGGREGATED_KIND = "APIGroupDiscoveryList"
JSON = "application/json"
STATUS_VERBS = ("get", "patch", "update")

# Built-in groups come first, in the API server's priority order; groups CRDs define follow,
# by name (as the API server orders groups of equal priority).
_GROUP_PRIORITY = ("", "events.k8s.io", "coordination.k8s.io", "apiextensions.k8s.io")


def aggregated_content_type(version: str = "v2") -> str:
    return f"{JSON};g={DISCOVERY_GROUP};v={version};as={AGGREGATED_KIND}"


def version_info(git_version: str = "v1.37.0", *, platform: str = "linux/amd64") -> Object:
    """The ``/version`` body (kubectl version warns when minor versions drift apart)."""
    match = re.match(r"v?(\d+)\.(\d+)", git_version)
    major, minor = (match.group(1), match.group(2)) if match else ("1", "37")
    return {
        "major": major,
        "minor": minor,
        "emulationMajor": major,
        "emulationMinor": minor,
        "minCompatibilityMajor": major,
        "minCompatibilityMinor": str(max(int(minor) - 1, 0)),
        "gitVersion": git_version,
        "gitCommit": "",
        "gitTreeState": "clean",
        "buildDate": "1970-01-01T00:00:00Z",
        "goVersion": "",
        "compiler": "python",
        "platform": platform,
    }


# -- ordering -----------------------------------------------------------------------------------

_KUBE_VERSION = re.compile(r"^v(\d+)(?:(alpha|beta)(\d+))?$")


def version_priority(version: str) -> tuple[int, int, int, str]:
    """Sort key, best first: GA before beta before alpha, higher numbers first; versions not
    shaped like Kubernetes ones last, by name (the API server's kube-aware order)."""
    match = _KUBE_VERSION.match(version)
    if match is None:
        return (0, 0, 0, version)
    stage = {"alpha": 1, "beta": 2}.get(match.group(2) or "", 3)
    return (-stage, -int(match.group(1)), -int(match.group(3) or 0), "")


def _group_key(group: str) -> tuple[int, str]:
    if group in _GROUP_PRIORITY:
        return (_GROUP_PRIORITY.index(group), "")
    return (len(_GROUP_PRIORITY), group)


def groups(resources: Iterable[ResourceType]) -> dict[str, list[str]]:
    """Each group's versions, preferred first; groups in priority order."""
    found: dict[str, set[str]] = {}
    for resource in resources:
        found.setdefault(resource.group, set()).add(resource.version)
    return {
        group: sorted(found[group], key=version_priority) for group in sorted(found, key=_group_key)
    }


def _group_version(group: str, version: str) -> str:
    return f"{group}/{version}" if group else version


def _for_discovery(group: str, version: str) -> Object:
    return {"groupVersion": _group_version(group, version), "version": version}


# -- legacy documents ---------------------------------------------------------------------------


def api_versions(resources: Iterable[ResourceType]) -> Object:
    """``/api``: the core group's versions."""
    return {
        "kind": "APIVersions",
        "versions": groups(resources).get("", []),
        "serverAddressByClientCIDRs": [],
    }


def api_group(resources: Iterable[ResourceType], group: str) -> Object | None:
    """``/apis/<group>``."""
    versions = groups(resources).get(group)
    if not group or not versions:
        return None
    return {
        "kind": "APIGroup",
        "apiVersion": "v1",
        "name": group,
        "versions": [_for_discovery(group, v) for v in versions],
        "preferredVersion": _for_discovery(group, versions[0]),
    }


def api_group_list(resources: Iterable[ResourceType]) -> Object:
    """``/apis``: every named group."""
    resources = list(resources)
    listed = []
    for group in groups(resources):
        document = api_group(resources, group)
        if document is not None:
            listed.append({k: v for k, v in document.items() if k not in ("kind", "apiVersion")})
    return {"kind": "APIGroupList", "apiVersion": "v1", "groups": listed}


def _served(resources: Iterable[ResourceType], group: str, version: str) -> list[ResourceType]:
    return [r for r in resources if r.group == group and r.version == version]


def api_resource(resource: ResourceType) -> Object:
    entry: Object = {
        "name": resource.plural,
        "singularName": resource.singular,
        "namespaced": resource.namespaced,
        "kind": resource.kind,
        "verbs": list(VERBS),
    }
    if resource.short_names:
        entry["shortNames"] = list(resource.short_names)
    if resource.categories:
        entry["categories"] = list(resource.categories)
    return entry


def api_resource_list(resources: Iterable[ResourceType], group: str, version: str) -> Object | None:
    """``/api/v1`` or ``/apis/<group>/<version>``: the resources and their ``/status``."""
    served = _served(resources, group, version)
    if not served:
        return None
    listed: list[Object] = []
    for resource in sorted(served, key=lambda r: r.plural):
        listed.append(api_resource(resource))
        if resource.status_subresource:
            listed.append(
                {
                    "name": f"{resource.plural}/status",
                    "singularName": "",
                    "namespaced": resource.namespaced,
                    "kind": resource.kind,
                    "verbs": list(STATUS_VERBS),
                }
            )
    return {
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": _group_version(group, version),
        "resources": listed,
    }


# -- aggregated discovery -----------------------------------------------------------------------


def _resource_discovery(resource: ResourceType) -> Object:
    kind = {"group": resource.group, "version": resource.version, "kind": resource.kind}
    entry: Object = {
        "resource": resource.plural,
        "responseKind": kind,
        "scope": "Namespaced" if resource.namespaced else "Cluster",
        "singularResource": resource.singular,
        "verbs": list(VERBS),
    }
    if resource.short_names:
        entry["shortNames"] = list(resource.short_names)
    if resource.categories:
        entry["categories"] = list(resource.categories)
    if resource.status_subresource:
        entry["subresources"] = [
            {"subresource": "status", "responseKind": dict(kind), "verbs": list(STATUS_VERBS)}
        ]
    return entry


def aggregated(resources: Iterable[ResourceType], *, legacy: bool, version: str = "v2") -> Object:
    """The APIGroupDiscoveryList of ``/api`` (``legacy``: the core group, named "") or of
    ``/apis`` (every other group): versions preferred first, resources by name."""
    resources = list(resources)
    items = []
    for group, versions in groups(resources).items():
        if (group == "") != legacy:
            continue
        items.append(
            {
                "metadata": {"name": group, "creationTimestamp": None},
                "versions": [
                    {
                        "version": v,
                        "resources": [
                            _resource_discovery(r)
                            for r in sorted(_served(resources, group, v), key=lambda r: r.plural)
                        ],
                        "freshness": "Current",
                    }
                    for v in versions
                ],
            }
        )
    return {
        "kind": AGGREGATED_KIND,
        "apiVersion": f"{DISCOVERY_GROUP}/{version}",
        "metadata": {},
        "items": items,
    }


def wants_aggregated(accept: str | None) -> str | None:
    """The aggregated-discovery version (``v2``, or the older ``v2beta1``) to answer with, or
    None for the legacy documents: the first acceptable media range decides."""
    for clause in parse_accept(accept or ""):
        media = f"{clause.type}/{clause.subtype}"
        params = clause.params
        if params.get("g") == DISCOVERY_GROUP and params.get("as") == AGGREGATED_KIND:
            if media == JSON and params.get("v") in ("v2", "v2beta1"):
                return params["v"]
            continue  # protobuf, or a version we do not know
        if media in (JSON, "application/*", "*/*") and not params.get("as"):
            return None
    return None


# -- serving --------------------------------------------------------------------------------------


def serve(
    path: str,
    accept: str | None,
    resources: Sequence[ResourceType],
    *,
    git_version: str = "v1.37.0",
) -> tuple[str, Object] | None:
    """(Content-Type, body) for a discovery path, or None when ``path`` is not one this
    server knows (an unknown group or version included: answer 404)."""
    path = path.rstrip("/") or "/"
    parts = [p for p in path.split("/") if p]
    if path == "/version":
        return JSON, version_info(git_version)
    if parts == ["api"] or parts == ["apis"]:
        legacy = parts == ["api"]
        version = wants_aggregated(accept)
        if version is not None:
            return aggregated_content_type(version), aggregated(
                resources, legacy=legacy, version=version
            )
        return JSON, api_versions(resources) if legacy else api_group_list(resources)
    body: Object | None = None
    if len(parts) == 2 and parts[0] == "api":
        body = api_resource_list(resources, "", parts[1])
    elif len(parts) == 2 and parts[0] == "apis":
        body = api_group(resources, parts[1])
    elif len(parts) == 3 and parts[0] == "apis":
        body = api_resource_list(resources, parts[1], parts[2])
    return None if body is None else (JSON, body)


def preferred_versions(resources: Iterable[ResourceType]) -> Mapping[str, str]:
    """Each group's preferred version."""
    return {group: versions[0] for group, versions in groups(resources).items() if versions}
