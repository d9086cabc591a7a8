"""CRDs through the API: what an applied CRD defines is served at once, a schema change takes
effect on the next write, and a deleted CRD takes its objects and its kind with it."""

from __future__ import annotations

import copy
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from scalable_topics.kubeapi.server import KubeApiServer, default_registry
from scalable_topics.listening import bound_address, listening_socket
from scalable_topics.store import EmbeddedStore
from support.eventually import eventually

TOKEN = "crd-test-token"
CRDS = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
WIDGETS = "/apis/example.dev/v1/namespaces/default/widgets"
Object = dict[str, Any]

WIDGET_CRD: Object = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": "widgets.example.dev"},
    "spec": {
        "group": "example.dev",
        "scope": "Namespaced",
        "names": {"kind": "Widget", "plural": "widgets", "singular": "widget"},
        "versions": [
            {
                "name": "v1",
                "served": True,
                "storage": True,
                "schema": {
                    "openAPIV3Schema": {
                        "type": "object",
                        "properties": {
                            "spec": {
                                "type": "object",
                                "properties": {"size": {"type": "integer", "minimum": 1}},
                            }
                        },
                    }
                },
            }
        ],
    },
}


@pytest.fixture
async def session(tmp_path: Path) -> AsyncIterator[aiohttp.ClientSession]:
    registry = default_registry()
    store = await EmbeddedStore.open(
        tmp_path / "s.db", kinds=registry.store_kinds, poll_interval=0.01
    )
    server = KubeApiServer(store, token=TOKEN, registry=registry)
    sock = listening_socket("127.0.0.1", 0)
    await server.start(sock)
    host, port = bound_address(sock)
    headers = {"Authorization": f"Bearer {TOKEN}"}
    async with aiohttp.ClientSession(f"http://{host}:{port}", headers=headers) as client:
        yield client
    await server.stop()
    await store.close()


def widget(name: str, size: int) -> Object:
    return {
        "apiVersion": "example.dev/v1",
        "kind": "Widget",
        "metadata": {"name": name},
        "spec": {"size": size},
    }


async def status_of(response: aiohttp.ClientResponse) -> tuple[int, Object]:
    return response.status, await response.json()


async def test_a_crd_is_served_at_once_and_its_schema_changes_apply(
    session: aiohttp.ClientSession,
) -> None:
    async with session.post(CRDS, json=WIDGET_CRD) as response:
        code, crd = await status_of(response)
    assert code == 201, crd
    async with session.get(f"{CRDS}/widgets.example.dev") as response:
        crd = await response.json()  # with the status the server gave it after the create
    conditions = {c["type"]: c["status"] for c in crd["status"]["conditions"]}
    assert conditions["Established"] == "True"
    async with session.post(WIDGETS, json=widget("w1", 50)) as response:
        assert response.status == 201
    async with session.get("/apis/example.dev/v1") as response:
        names = [r["name"] for r in (await response.json())["resources"]]
    assert "widgets" in names

    tighter = copy.deepcopy(crd)
    spec_schema = tighter["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]
    spec_schema["spec"]["properties"]["size"]["maximum"] = 10
    async with session.put(f"{CRDS}/widgets.example.dev", json=tighter) as response:
        assert response.status == 200, await response.text()
    async with session.post(WIDGETS, json=widget("w2", 50)) as response:
        code, refused = await status_of(response)
    assert code == 422
    assert refused["details"]["causes"][0]["field"] == "spec.size"
    assert "less than or equal to 10" in refused["message"]


async def test_deleting_a_crd_deletes_its_objects_and_stops_serving_its_kind(
    session: aiohttp.ClientSession,
) -> None:
    async with session.post(CRDS, json=WIDGET_CRD) as response:
        assert response.status == 201
    async with session.post(WIDGETS, json=widget("w1", 3)) as response:
        assert response.status == 201
    async with session.delete(f"{CRDS}/widgets.example.dev") as response:
        code, marked = await status_of(response)
    assert code in (200, 202) and marked["metadata"].get("deletionTimestamp")

    async def crd_gone() -> bool:
        async with session.get(f"{CRDS}/widgets.example.dev") as response:
            return response.status == 404

    await eventually(crd_gone, "the CRD to go once its objects are gone", timeout=30)
    async with session.get(WIDGETS) as response:
        code, body = await status_of(response)
    assert code == 404 and body["reason"] == "NotFound"


async def test_a_crd_with_a_rule_that_does_not_compile_is_refused(
    session: aiohttp.ClientSession,
) -> None:
    broken = copy.deepcopy(WIDGET_CRD)
    spec = broken["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    spec["x-kubernetes-validations"] = [{"rule": "self.nope > 1"}]
    async with session.post(CRDS, json=broken) as response:
        code, refused = await status_of(response)
    assert code == 422
    assert "compilation failed" in refused["message"]
    async with session.get(f"{CRDS}/widgets.example.dev") as response:
        assert response.status == 404


async def test_a_body_of_a_type_not_served_is_415_naming_it(
    session: aiohttp.ClientSession,
) -> None:
    """kubectl's generators send built-in kinds as protobuf, which this server does not decode:
    the answer names the type, as kube-apiserver's 415 does, and nothing is stored."""
    namespace = b"k8s\x00\n\x0f\n\x02v1\x12\tNamespace"  # the start of a protobuf envelope
    before = await names(session, "/api/v1/namespaces")
    async with session.post(
        "/api/v1/namespaces",
        data=namespace,
        headers={"Content-Type": "application/vnd.kubernetes.protobuf"},
    ) as response:
        code, status = await status_of(response)
    assert code == 415
    assert status["reason"] == "UnsupportedMediaType"
    assert "application/vnd.kubernetes.protobuf" in status["message"]
    assert await names(session, "/api/v1/namespaces") == before


async def names(session: aiohttp.ClientSession, path: str) -> list[str]:
    async with session.get(path) as response:
        listed = await response.json()
    return sorted(item["metadata"]["name"] for item in listed["items"])
