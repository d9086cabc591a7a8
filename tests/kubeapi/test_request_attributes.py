"""The attributes RBAC decides on, read from a request's method, path and query: the verbs as
kube-apiserver names them, the resource's parts, and non-resource URLs."""

from __future__ import annotations

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from scalable_topics.kubeapi.request_attributes import RequestAttributes, request_attributes

TOPICS = "/apis/scalabletopics.dev/v1alpha1/namespaces/default/scalabletopics"


def topics(
    verb: str, name: str = "", subresource: str = "", *, dry_run: bool = False
) -> RequestAttributes:
    group, plural = "scalabletopics.dev", "scalabletopics"
    return RequestAttributes(verb, group, plural, subresource, "default", name, dry_run=dry_run)


def core(
    verb: str, plural: str, namespace: str = "", name: str = "", subresource: str = ""
) -> RequestAttributes:
    return RequestAttributes(verb, "", plural, subresource, namespace, name)


LEASE_GROUP = "coordination.k8s.io"
LEASES = f"/apis/{LEASE_GROUP}/v1/namespaces/kube-system/leases"
CLUSTER_TOPICS = "/apis/scalabletopics.dev/v1alpha1/scalabletopics"


@pytest.mark.parametrize(
    ("method", "path", "query", "expected"),
    [
        ("POST", TOPICS, {}, topics("create")),
        ("GET", f"{TOPICS}/orders", {}, topics("get", "orders")),
        ("HEAD", f"{TOPICS}/orders", {}, topics("get", "orders")),
        ("GET", TOPICS, {}, topics("list")),
        ("GET", TOPICS, {"watch": "true"}, topics("watch")),
        ("GET", TOPICS, {"watch": "1"}, topics("watch")),
        ("GET", TOPICS, {"watch": "false"}, topics("list")),
        ("GET", f"{TOPICS}/orders", {"watch": "true"}, topics("get", "orders")),
        ("PUT", f"{TOPICS}/orders", {}, topics("update", "orders")),
        ("PATCH", f"{TOPICS}/orders", {}, topics("patch", "orders")),
        ("PATCH", f"{TOPICS}/orders/status", {}, topics("patch", "orders", "status")),
        ("PUT", f"{TOPICS}/orders/status", {}, topics("update", "orders", "status")),
        ("DELETE", f"{TOPICS}/orders", {}, topics("delete", "orders")),
        ("DELETE", TOPICS, {}, topics("deletecollection")),
        ("POST", TOPICS, {"dryRun": "All"}, topics("create", dry_run=True)),
        ("GET", CLUSTER_TOPICS, {}, RequestAttributes("list", "scalabletopics.dev", "scalabletopics")),
        ("GET", f"{LEASES}/ctl", {}, RequestAttributes("get", LEASE_GROUP, "leases", "", "kube-system", "ctl")),
        ("POST", "/api/v1/namespaces/default/events", {}, core("create", "events", "default")),
    ],
)  # fmt: skip
def test_verbs_and_resources(
    method: str, path: str, query: dict[str, str], expected: RequestAttributes
) -> None:
    assert request_attributes(method, path, query) == expected


@pytest.mark.parametrize(
    ("method", "path", "query", "expected"),
    [
        ("GET", "/api/v1/namespaces", {}, core("list", "namespaces")),
        ("POST", "/api/v1/namespaces", {}, core("create", "namespaces")),
        ("GET", "/api/v1/namespaces/team", {}, core("get", "namespaces", "team", "team")),
        ("DELETE", "/api/v1/namespaces/team", {}, core("delete", "namespaces", "team", "team")),
        ("PUT", "/api/v1/namespaces/team/finalize", {}, core("update", "namespaces", "team", "team", "finalize")),
        ("GET", "/api/v1/namespaces/team/status", {}, core("get", "namespaces", "team", "team", "status")),
        # The name a list pins is the list's, not the namespace's.
        ("GET", "/api/v1/namespaces", {"fieldSelector": "metadata.name=team"}, core("list", "namespaces", name="team")),
    ],
)  # fmt: skip
def test_a_namespace_is_its_own_namespace(
    method: str, path: str, query: dict[str, str], expected: RequestAttributes
) -> None:
    """As in kube-apiserver: a RoleBinding in a Namespace may grant reading that Namespace."""
    assert request_attributes(method, path, query) == expected


@pytest.mark.parametrize(
    ("query", "name"),
    [
        ({"fieldSelector": "metadata.name=orders"}, "orders"),
        ({"fieldSelector": "metadata.name==orders", "watch": "true"}, "orders"),
        ({"fieldSelector": "metadata.namespace=default,metadata.name=orders"}, "orders"),
        ({"fieldSelector": "metadata.name!=orders"}, ""),
        ({"fieldSelector": "status.phase=Ready"}, ""),
        ({"fieldSelector": "metadata.name=a/b"}, ""),  # could not be a path's name
        ({"fieldSelector": "metadata.name=.."}, ""),
        ({"fieldSelector": "metadata.name"}, ""),  # does not parse: no name
    ],
)
def test_a_list_or_watch_pinned_to_a_name_carries_it(query: dict[str, str], name: str) -> None:
    """What RBAC's resourceNames match: ``kubectl get st orders -w`` watches with this
    selector."""
    attributes = request_attributes("GET", TOPICS, query)
    assert attributes.verb == ("watch" if "watch" in query else "list")
    assert attributes.name == name


def test_a_delete_of_a_collection_pinned_to_a_name_is_still_deletecollection() -> None:
    attributes = request_attributes("DELETE", TOPICS, {"fieldSelector": "metadata.name=orders"})
    assert (attributes.verb, attributes.name) == ("deletecollection", "")


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("GET", "/version"),
        ("GET", "/healthz"),
        ("GET", "/api"),
        ("GET", "/api/v1"),
        ("GET", "/apis"),
        ("GET", "/apis/scalabletopics.dev"),
        ("GET", "/apis/scalabletopics.dev/v1alpha1"),
        ("GET", "/openapi/v3/apis/scalabletopics.dev/v1alpha1"),
        ("POST", "/metrics"),
        ("GET", "/"),
    ],
)
def test_other_paths_are_non_resource_urls(method: str, path: str) -> None:
    assert request_attributes(method, path, {"watch": "true"}) == RequestAttributes(
        method.lower(), non_resource_url=path
    )


# -- properties ----------------------------------------------------------------------------------

segments = st.from_regex(r"[a-z][a-z0-9.-]{0,15}", fullmatch=True)
METHOD_VERBS = {
    "GET": "get",
    "POST": "create",
    "PUT": "update",
    "PATCH": "patch",
    "DELETE": "delete",
}


@given(
    group=st.one_of(st.just(""), segments),
    version=st.from_regex(r"v[1-9][a-z0-9]{0,6}", fullmatch=True),
    namespace=st.none() | segments,
    plural=segments,
    name=st.none() | segments,
    subresource=st.none() | segments,
    method=st.sampled_from(sorted(METHOD_VERBS)),
    watch=st.sampled_from([None, "true", "1", "false", "0"]),
)
def test_a_resource_path_is_read_back_part_by_part(
    group: str,
    version: str,
    namespace: str | None,
    plural: str,
    name: str | None,
    subresource: str | None,
    method: str,
    watch: str | None,
) -> None:
    assume(plural != "namespaces" and "namespaces" not in (name, subresource))
    assume(name is not None or subresource is None)
    root = f"/api/{version}" if group == "" else f"/apis/{group}/{version}"
    scope = f"/namespaces/{namespace}" if namespace is not None else ""
    tail = "".join(f"/{part}" for part in (name, subresource) if part is not None)
    query = {} if watch is None else {"watch": watch}

    attributes = request_attributes(method, f"{root}{scope}/{plural}{tail}", query)

    assert attributes.api_group == group
    assert attributes.resource == plural
    assert attributes.namespace == (namespace or "")
    assert attributes.name == (name or "")
    assert attributes.subresource == (subresource or "")
    assert attributes.non_resource_url == ""
    expected = METHOD_VERBS[method]
    if name is None and method == "GET":
        expected = "watch" if watch in ("true", "1") else "list"
    elif name is None and method == "DELETE":
        expected = "deletecollection"
    assert attributes.verb == expected


@given(
    path=st.from_regex(r"(/[a-z0-9.]{1,8}){0,4}", fullmatch=True),
    method=st.sampled_from(["GET", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"]),
)
def test_a_path_outside_the_api_roots_is_a_non_resource_url(path: str, method: str) -> None:
    assume(not path.startswith(("/api/", "/apis/")))
    attributes = request_attributes(method, path or "/", {})
    assert attributes == RequestAttributes(method.lower(), non_resource_url=path or "/")
