"""RBAC of the operator and the brokers (manifests/base/*-rbac.yaml): each bound to its own
service account, limited to this project's resources, Leases only in the system namespace,
and every rule naming the code that needs it."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml
from rendered_manifests import MANIFESTS, ROOT, Object, find, of_kind, pod_spec, rendered

NAMESPACE = "scalable-topics"
COMPONENTS = {"operator": "Deployment", "broker": "StatefulSet"}
PACKAGE = ROOT / "operator" / "scalable_topics"
RBAC_FILES = sorted((MANIFESTS / "base").glob("*-rbac.yaml"))

Grants = dict[tuple[str, str], set[str]]


def _grants(role: Object) -> Grants:
    """(API group, resource) -> verbs."""
    grants: Grants = {}
    for rule in role["rules"]:
        assert not rule.get("resourceNames") and not rule.get("nonResourceURLs"), rule
        for group in rule["apiGroups"]:
            for resource in rule["resources"]:
                grants.setdefault((group, resource), set()).update(rule["verbs"])
    return grants


def _roles(component: str) -> tuple[Grants, Grants]:
    """What a component may do cluster-wide and in the system namespace."""
    objects = rendered("base")
    name = f"scalable-topics-{component}"
    return _grants(find(objects, "ClusterRole", name)), _grants(find(objects, "Role", name))


def test_no_rule_uses_a_wildcard() -> None:
    for role in of_kind(rendered("base"), "ClusterRole") + of_kind(rendered("base"), "Role"):
        for rule in role["rules"]:
            for field in ("apiGroups", "resources", "verbs"):
                assert "*" not in rule[field], f"{role['metadata']['name']}: {field} *"


@pytest.mark.parametrize("component", COMPONENTS)
def test_each_component_runs_as_its_own_bound_service_account(component: str) -> None:
    objects = rendered("base")
    name = f"scalable-topics-{component}"
    workload = next(o for o in objects if o["kind"] == COMPONENTS[component])
    assert pod_spec(workload)["serviceAccountName"] == name
    find(objects, "ServiceAccount", name)
    subject = {"kind": "ServiceAccount", "name": name, "namespace": NAMESPACE}
    for binding_kind, role_kind in (("ClusterRoleBinding", "ClusterRole"), ("RoleBinding", "Role")):
        binding = find(objects, binding_kind, name)
        assert binding["subjects"] == [subject]
        assert binding["roleRef"] == {
            "apiGroup": "rbac.authorization.k8s.io",
            "kind": role_kind,
            "name": name,
        }
        find(objects, role_kind, name)
    role = find(objects, "Role", name)
    assert role["metadata"]["namespace"] == workload["metadata"]["namespace"] == NAMESPACE


@pytest.mark.parametrize("component", COMPONENTS)
def test_only_this_project_s_resources_leases_configmaps_and_events(component: str) -> None:
    cluster_wide, system_namespace = _roles(component)
    resources = {"scalabletopics", "segments"}
    for group, resource in cluster_wide:
        if group == "scalabletopics.dev":
            assert resource.partition("/")[0] in resources, resource
        else:
            assert (group, resource) == ("", "events"), f"{component} may touch {resource}"
    # Leases and ConfigMaps are the system namespace's only, never cluster-wide; the cluster's
    # settings (ConfigMaps) are read, never written.
    assert set(system_namespace) == {("coordination.k8s.io", "leases"), ("", "configmaps")}
    assert system_namespace[("coordination.k8s.io", "leases")] == {
        "get",
        "list",
        "watch",
        "create",
        "update",
    }
    assert system_namespace[("", "configmaps")] == {"list", "watch"}


def test_the_operator_never_writes_a_topic_s_spec_and_only_creates_events() -> None:
    cluster_wide, _ = _roles("operator")
    assert cluster_wide[("scalabletopics.dev", "scalabletopics")] == {
        "get",
        "list",
        "watch",
        "patch",
    }
    assert cluster_wide[("", "events")] == {"create"}
    assert cluster_wide[("scalabletopics.dev", "segments")] == {
        "get",
        "list",
        "watch",
        "create",
        "delete",
    }


def test_brokers_never_write_what_only_the_controller_writes() -> None:
    """Topic status, Segment objects and Events are the controller's; a broker edits a
    topic's spec through the admin API and only marks Segments drained."""
    cluster_wide, _ = _roles("broker")
    assert ("scalabletopics.dev", "scalabletopics/status") not in cluster_wide
    assert ("", "events") not in cluster_wide
    assert cluster_wide[("scalabletopics.dev", "segments")] == {"get", "list", "watch"}
    assert cluster_wide[("scalabletopics.dev", "segments/status")] == {"patch"}


def _rule_comments(path: Path) -> list[str]:
    """The comment block right above each rule of a file."""
    lines = path.read_text().splitlines()
    blocks = []
    for number, line in enumerate(lines):
        if line.strip().startswith("- apiGroups:"):
            above = []
            for previous in reversed(lines[:number]):
                if not previous.strip().startswith("#"):
                    break
                above.append(previous.strip().lstrip("# "))
            blocks.append(" ".join(reversed(above)))
    return blocks


@pytest.mark.parametrize("path", RBAC_FILES, ids=lambda p: p.name)
def test_every_rule_names_the_code_that_needs_it(path: Path) -> None:
    rules = sum(len(doc.get("rules", [])) for doc in yaml.safe_load_all(path.read_text()) if doc)
    comments = _rule_comments(path)
    assert len(comments) == rules > 0
    for comment in comments:
        modules = re.findall(r"\b(\w+/\w+\.py)\b", comment)
        assert modules, f"a rule of {path.name} names no module: {comment!r}"
        for module in modules:
            assert (PACKAGE / module).is_file(), f"{path.name} names {module}, which is gone"
