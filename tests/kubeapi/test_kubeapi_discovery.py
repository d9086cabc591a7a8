"""Discovery documents, aggregated and legacy, and the OpenAPI documents."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from kubeapi_crds import resource_types

from scalable_topics.kubeapi import builtins, discovery, openapi
from scalable_topics.kubeapi.openapi_protobuf import encode_document
from scalable_topics.kubeapi.resources import ResourceType
from scalable_topics.kubeapi.status import ApiError

AGGREGATED = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json"
RESOURCES = resource_types()


def _widget(version: str) -> ResourceType:
    return ResourceType(
        group="example.com",
        version=version,
        kind="Widget",
        plural="widgets",
        singular="widget",
        namespaced=False,
    )


def test_version_order_is_kube_aware() -> None:
    versions = ["v1alpha1", "v2beta1", "foo", "v1", "v1beta2", "v2", "v10alpha1", "bar"]
    assert sorted(versions, key=discovery.version_priority) == [
        "v2",
        "v1",
        "v2beta1",
        "v1beta2",
        "v10alpha1",
        "v1alpha1",
        "bar",
        "foo",
    ]


def test_aggregated_discovery_when_asked() -> None:
    served = discovery.serve("/apis", AGGREGATED, RESOURCES)
    assert served is not None
    content_type, body = served
    assert content_type == "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"
    assert body["kind"] == "APIGroupDiscoveryList"
    assert body["apiVersion"] == "apidiscovery.k8s.io/v2"
    names = [item["metadata"]["name"] for item in body["items"]]
    assert names == [
        "events.k8s.io",
        "coordination.k8s.io",
        "apiextensions.k8s.io",
        "scalabletopics.dev",
    ]
    group = body["items"][-1]
    [version] = group["versions"]
    assert version["version"] == "v1alpha1" and version["freshness"] == "Current"
    topics = next(r for r in version["resources"] if r["resource"] == "scalabletopics")
    assert topics == {
        "resource": "scalabletopics",
        "responseKind": {
            "group": "scalabletopics.dev",
            "version": "v1alpha1",
            "kind": "ScalableTopic",
        },
        "scope": "Namespaced",
        "singularResource": "scalabletopic",
        "verbs": [
            "create",
            "delete",
            "deletecollection",
            "get",
            "list",
            "patch",
            "update",
            "watch",
        ],
        "shortNames": ["st"],
        "categories": ["streaming"],
        "subresources": [
            {
                "subresource": "status",
                "responseKind": {
                    "group": "scalabletopics.dev",
                    "version": "v1alpha1",
                    "kind": "ScalableTopic",
                },
                "verbs": ["get", "patch", "update"],
            }
        ],
    }
    core = discovery.serve("/api", AGGREGATED, RESOURCES)
    assert core is not None
    assert [item["metadata"]["name"] for item in core[1]["items"]] == [""]


def test_protobuf_aggregated_is_not_served() -> None:
    accept = "application/vnd.kubernetes.protobuf;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json"
    served = discovery.serve("/apis", accept, RESOURCES)
    assert served is not None and served[0] == "application/json"
    assert served[1]["kind"] == "APIGroupList"


def test_legacy_discovery() -> None:
    assert discovery.serve("/api", None, RESOURCES) == (
        "application/json",
        {"kind": "APIVersions", "versions": ["v1"], "serverAddressByClientCIDRs": []},
    )
    served = discovery.serve("/apis", "application/json", RESOURCES)
    assert served is not None
    group = served[1]["groups"][-1]
    assert group == {
        "name": "scalabletopics.dev",
        "versions": [{"groupVersion": "scalabletopics.dev/v1alpha1", "version": "v1alpha1"}],
        "preferredVersion": {"groupVersion": "scalabletopics.dev/v1alpha1", "version": "v1alpha1"},
    }
    served = discovery.serve("/api/v1", None, RESOURCES)
    assert served is not None
    listed = {r["name"]: r for r in served[1]["resources"]}
    assert served[1]["groupVersion"] == "v1"
    assert listed["namespaces"]["shortNames"] == ["ns"] and not listed["namespaces"]["namespaced"]
    assert listed["namespaces/status"] == {
        "name": "namespaces/status",
        "singularName": "",
        "namespaced": False,
        "kind": "Namespace",
        "verbs": ["get", "patch", "update"],
    }
    assert "events/status" not in listed


def test_preferred_version_and_unknown_paths() -> None:
    resources = [*RESOURCES, _widget("v1beta1"), _widget("v1"), _widget("v2alpha1")]
    served = discovery.serve("/apis/example.com", None, resources)
    assert served is not None
    assert served[1]["preferredVersion"]["version"] == "v1"
    assert [v["version"] for v in served[1]["versions"]] == ["v1", "v1beta1", "v2alpha1"]
    for path in ("/apis/nothing.io", "/apis/example.com/v9", "/api/v2", "/apis/a/b/c"):
        assert discovery.serve(path, None, resources) is None


def test_version_document() -> None:
    served = discovery.serve("/version", None, RESOURCES, git_version="v1.37.2")
    assert served is not None
    body = served[1]
    assert (body["major"], body["minor"], body["gitVersion"]) == ("1", "37", "v1.37.2")


# -- OpenAPI ------------------------------------------------------------------------------------


def _refs(node: Any) -> Iterator[str]:
    if isinstance(node, dict):
        if "$ref" in node:
            yield node["$ref"]
        for value in node.values():
            yield from _refs(value)
    elif isinstance(node, list):
        for item in node:
            yield from _refs(item)


def _v3(group: str, version: str) -> dict[str, Any]:
    document = openapi.v3_document(RESOURCES, group, version)
    assert document is not None
    return document


def test_definition_names() -> None:
    names = [openapi.definition_name(r) for r in RESOURCES]
    assert names == [
        "io.k8s.api.core.v1.Namespace",
        "io.k8s.api.core.v1.Event",
        "io.k8s.api.events.v1.Event",
        "io.k8s.api.coordination.v1.Lease",
        "io.k8s.api.core.v1.ConfigMap",
        "io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1.CustomResourceDefinition",
        "dev.scalabletopics.v1alpha1.ScalableTopic",
        "dev.scalabletopics.v1alpha1.Segment",
    ]


def test_v3_index_points_at_each_group_version_by_content_hash() -> None:
    served = openapi.serve("/openapi/v3", {}, RESOURCES)
    assert served is not None
    paths = served[1]["paths"]
    assert set(paths) == {
        "api/v1",
        "apis/events.k8s.io/v1",
        "apis/coordination.k8s.io/v1",
        "apis/apiextensions.k8s.io/v1",
        "apis/scalabletopics.dev/v1alpha1",
    }
    url = paths["apis/scalabletopics.dev/v1alpha1"]["serverRelativeURL"]
    path, _, query = url.partition("?hash=")
    document = openapi.serve(path, {"hash": query}, RESOURCES)
    assert document is not None
    assert query == openapi.document_hash(document[1])


def test_v3_document_of_a_crd_group() -> None:
    document = _v3("scalabletopics.dev", "v1alpha1")
    assert document["openapi"].startswith("3.")
    schemas = document["components"]["schemas"]
    topic = schemas["dev.scalabletopics.v1alpha1.ScalableTopic"]
    assert topic["x-kubernetes-group-version-kind"] == [
        {"group": "scalabletopics.dev", "kind": "ScalableTopic", "version": "v1alpha1"}
    ]
    assert topic["properties"]["metadata"]["allOf"] == [
        {"$ref": "#/components/schemas/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"}
    ]
    assert topic["properties"]["spec"]["properties"]["initialSegments"]["type"] == "integer"
    assert schemas["dev.scalabletopics.v1alpha1.ScalableTopicList"][
        "x-kubernetes-group-version-kind"
    ][0]["kind"] == ("ScalableTopicList")
    for ref in _refs(document):
        assert ref.removeprefix("#/components/schemas/") in schemas, ref


def test_patch_operations_carry_field_validation_and_their_patch_types() -> None:
    crd_kinds = _v3("scalabletopics.dev", "v1alpha1")["paths"]
    item = crd_kinds[
        "/apis/scalabletopics.dev/v1alpha1/namespaces/{namespace}/scalabletopics/{name}"
    ]
    patch = item["patch"]
    assert patch["x-kubernetes-group-version-kind"] == {
        "group": "scalabletopics.dev",
        "kind": "ScalableTopic",
        "version": "v1alpha1",
    }
    assert {"fieldValidation", "dryRun", "fieldManager", "force"} <= {
        p["name"] for p in patch["parameters"] if p["in"] == "query"
    }
    assert "application/strategic-merge-patch+json" not in patch["requestBody"]["content"]
    assert "application/merge-patch+json" in patch["requestBody"]["content"]
    lease = _v3("coordination.k8s.io", "v1")["paths"][
        "/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases/{name}"
    ]
    assert "application/strategic-merge-patch+json" in lease["patch"]["requestBody"]["content"]
    namespaces = _v3("", "v1")["paths"]
    assert "/api/v1/namespaces/{name}/status" in namespaces
    assert "/api/v1/namespaces/{namespace}/events" in namespaces and "/api/v1/events" in namespaces


def test_v2_document() -> None:
    served = openapi.serve("/openapi/v2", {}, RESOURCES, accept="application/json")
    assert served is not None
    document = served[1]
    assert document["swagger"] == "2.0"
    definitions = document["definitions"]
    assert "io.k8s.api.coordination.v1.Lease" in definitions
    topic = definitions["dev.scalabletopics.v1alpha1.ScalableTopic"]
    assert (
        topic["properties"]["metadata"]["$ref"]
        == "#/definitions/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"
    )
    for ref in _refs(document):
        assert ref.removeprefix("#/definitions/") in definitions, ref


PROTOBUF_V2 = "application/com.github.proto-openapi.spec.v2@v1.0+protobuf"


@pytest.mark.parametrize(
    "accept",
    [
        PROTOBUF_V2,  # what kubectl sends, and all it sends
        "application/com.github.proto-openapi.spec.v2.v1.0+protobuf",
        f"application/yaml, {PROTOBUF_V2};q=0.9",
    ],
)
def test_openapi_v2_in_protobuf_for_a_client_that_asks_for_it(accept: str) -> None:
    served = openapi.serve("/openapi/v2", {}, RESOURCES, accept=accept)
    assert served == (
        "application/com.github.proto-openapi.spec.v2.v1.0+protobuf",
        encode_document(openapi.v2_document(RESOURCES)),
    )


@pytest.mark.parametrize(
    "accept",
    [None, "*/*", "application/json", "application/*", f"{PROTOBUF_V2};q=0.5, application/json"],
)
def test_openapi_v2_in_json_otherwise(accept: str | None) -> None:
    served = openapi.serve("/openapi/v2", {}, RESOURCES, accept=accept)
    assert served == ("application/json", openapi.v2_document(RESOURCES))


@pytest.mark.parametrize(
    ("path", "accept"),
    [
        ("/openapi/v2", "application/yaml"),
        ("/openapi/v2", "text/html"),
        ("/openapi/v3", "application/com.github.proto-openapi.spec.v3@v1.0+protobuf"),
    ],
)
def test_openapi_refuses_what_it_does_not_serve(path: str, accept: str) -> None:
    with pytest.raises(ApiError) as raised:
        openapi.serve(path, {}, RESOURCES, accept=accept)
    assert raised.value.code == 406


def test_openapi_paths_it_does_not_have() -> None:
    assert openapi.serve("/openapi/v3/apis/nothing/v1", {}, RESOURCES) is None
    assert openapi.serve("/openapi/v4", {}, RESOURCES) is None


def test_builtin_schemas_are_what_kubectl_explain_reads() -> None:
    lease = _v3("coordination.k8s.io", "v1")["components"]["schemas"][
        "io.k8s.api.coordination.v1.Lease"
    ]
    spec = lease["properties"]["spec"]["properties"]
    assert spec["renewTime"]["format"] == "date-time"
    assert spec["leaseDurationSeconds"] == {
        "type": "integer",
        "format": "int32",
        "description": spec["leaseDurationSeconds"]["description"],
    }
    crd = builtins.CUSTOM_RESOURCE_DEFINITION.schema
    assert crd is not None
    schema = crd["properties"]["spec"]["properties"]["versions"]["items"]["properties"]["schema"]
    assert schema["properties"]["openAPIV3Schema"]["x-kubernetes-preserve-unknown-fields"] is True
