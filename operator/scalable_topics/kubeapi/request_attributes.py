"""What a request asks for, in the terms RBAC decides on (kube-apiserver's RequestInfo): a verb
on a resource (group, plural, subresource, namespace, name), or, for every other path
(discovery, OpenAPI, ``/version``, health), a non-resource URL with the lowercased HTTP method.

The verb follows the method and whether a name is in the path: GET of a name is get, of a
collection list (watch with ``watch=true``); POST create, PUT update, PATCH patch; DELETE of a
name delete, of a collection deletecollection. As in kube-apiserver, a list or watch whose field
selector pins ``metadata.name`` carries that name (what RBAC's ``resourceNames`` match), and a
Namespace's own requests carry its name as their namespace.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from .field_selectors import exact_match
from .paths import parse_resource_path

_VERBS = {
    "GET": "get",
    "HEAD": "get",
    "POST": "create",
    "PUT": "update",
    "PATCH": "patch",
    "DELETE": "delete",
}
_TRUE = frozenset({"true", "1"})  # the values http.flag reads as true


@dataclass(frozen=True, slots=True)
class RequestAttributes:
    verb: str
    api_group: str = ""
    resource: str = ""
    subresource: str = ""
    namespace: str = ""
    name: str = ""
    non_resource_url: str = ""  # set for a request that names no resource
    dry_run: bool = False  # the request asked for a dry run (``dryRun``)


def request_attributes(method: str, path: str, query: Mapping[str, str]) -> RequestAttributes:
    """The attributes of a ``method`` request for ``path`` (decoded, without its query) with
    the ``query`` parameters."""
    dry_run = "dryRun" in query
    parsed = parse_resource_path(path)
    if parsed is None:
        return RequestAttributes(method.lower(), non_resource_url=path, dry_run=dry_run)
    verb = _VERBS.get(method.upper(), method.lower())
    name = parsed.name or ""
    if not name and verb == "get":
        verb = "watch" if query.get("watch") in _TRUE else "list"
        pinned = exact_match(query.get("fieldSelector"), "metadata.name")
        if pinned is not None and _is_path_segment(pinned):
            name = pinned
    elif not name and verb == "delete":
        verb = "deletecollection"
    namespace = parsed.namespace or ""
    if parsed.group == "" and parsed.plural == "namespaces" and not namespace:
        namespace = parsed.name or ""  # a path's name, not a field selector's
    return RequestAttributes(
        verb,
        api_group=parsed.group,
        resource=parsed.plural,
        subresource=parsed.subresource or "",
        namespace=namespace,
        name=name,
        dry_run=dry_run,
    )


def _is_path_segment(name: str) -> bool:
    """kube-apiserver takes a field selector's name only when it could be a path's name."""
    return name not in ("", ".", "..") and "/" not in name and "%" not in name
