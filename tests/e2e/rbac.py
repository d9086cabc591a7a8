"""Kubernetes RBAC, as much of it as checking our manifests against an audit log needs.

``grants_of`` reads a service account's rules from rendered manifests (its RoleBindings and
ClusterRoleBindings, to Roles and ClusterRoles), ``allows`` is the authorizer's decision for
one request (rbac/v1 semantics: verbs, apiGroups, resources with subresources as
``resource/subresource``, resourceNames, a Role's rules only in its binding's namespace), and
``unused`` lists each verb of a rule that no request needed.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

Object = Mapping[str, Any]

# What every cluster grants an authenticated user (the system:discovery and
# system:public-info-viewer ClusterRoles, bound to system:authenticated by default).
DISCOVERY_PREFIXES = ("/api", "/apis", "/openapi", "/version", "/healthz", "/livez", "/readyz")


@dataclass(frozen=True, slots=True)
class Grant:
    """One rule of a role, where its binding makes it count (``namespace`` None: everywhere)."""

    role: str
    rule_index: int
    verbs: frozenset[str]
    api_groups: frozenset[str]
    resources: frozenset[str]
    resource_names: frozenset[str]
    namespace: str | None

    def describe(self) -> str:
        where = "cluster-wide" if self.namespace is None else f"in {self.namespace}"
        return f"{self.role} rule {self.rule_index} {where}"


def grants_of(objects: Iterable[Object], namespace: str, account: str) -> list[Grant]:
    """The rules bound to the ServiceAccount ``namespace/account`` in ``objects``."""
    objects = list(objects)
    roles = {
        (o["kind"], o["metadata"].get("namespace"), o["metadata"]["name"]): o
        for o in objects
        if o["kind"] in ("Role", "ClusterRole")
    }
    grants = []
    for binding in objects:
        if binding["kind"] not in ("RoleBinding", "ClusterRoleBinding"):
            continue
        if not any(
            s.get("kind") == "ServiceAccount"
            and s.get("name") == account
            and s.get("namespace") == namespace
            for s in binding.get("subjects") or ()
        ):
            continue
        scope = binding["metadata"].get("namespace") if binding["kind"] == "RoleBinding" else None
        if binding["kind"] == "RoleBinding" and scope is None:
            scope = namespace  # kustomize's namespace transformer sets it; the default otherwise
        ref = binding["roleRef"]
        role_namespace = scope if ref["kind"] == "Role" else None
        role = roles.get((ref["kind"], role_namespace, ref["name"]))
        assert role is not None, f"{binding['metadata']['name']} binds a missing {ref}"
        for index, rule in enumerate(role.get("rules") or ()):
            grants.append(
                Grant(
                    f"{ref['kind']} {ref['name']}",
                    index,
                    frozenset(rule.get("verbs") or ()),
                    frozenset(rule.get("apiGroups") or ()),
                    frozenset(rule.get("resources") or ()),
                    frozenset(rule.get("resourceNames") or ()),
                    scope,
                )
            )
    return grants


def _resource(call: Object) -> str:
    return call["resource"] + (f"/{call['subresource']}" if call.get("subresource") else "")


def matches(grant: Grant, call: Object, verb: str | None = None) -> bool:
    """Whether ``grant`` allows ``call`` (an audit event), or the call with another ``verb``."""
    verb = verb or call["verb"]
    if grant.namespace is not None and call.get("namespace") != grant.namespace:
        return False
    return (
        (verb in grant.verbs or "*" in grant.verbs)
        and (call["apiGroup"] in grant.api_groups or "*" in grant.api_groups)
        and (_resource(call) in grant.resources or "*" in grant.resources)
        and (not grant.resource_names or call.get("name") in grant.resource_names)
    )


def allows(grants: Iterable[Grant], call: Object) -> bool:
    if call.get("nonResourceURL"):
        url = call["nonResourceURL"]
        return call["verb"] == "get" and url.startswith(DISCOVERY_PREFIXES)
    return any(matches(grant, call) for grant in grants)


def unused(grants: Iterable[Grant], calls: list[Object]) -> list[str]:
    """Each (rule, verb, group, resource) no call needed: a permission granted for nothing."""
    found = []
    for grant in grants:
        for verb in sorted(grant.verbs):
            for group in sorted(grant.api_groups):
                for resource in sorted(grant.resources):
                    used = any(
                        call["verb"] == verb
                        and call["apiGroup"] == group
                        and _resource(call) == resource
                        and matches(grant, call)
                        for call in calls
                    )
                    if not used:
                        found.append(f"{grant.describe()}: {verb} {group or 'core'}/{resource}")
    return found
