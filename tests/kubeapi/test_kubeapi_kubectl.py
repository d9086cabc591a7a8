"""The real kubectl against the presentation modules (discovery, OpenAPI, Tables), served by the
throwaway server in conftest.py. Skipped, with the reason, when kubectl is not installed."""

from __future__ import annotations

import copy
import re
from pathlib import Path

import pytest

from support.fake_kubeapi import FakeApiServer, Kubectl

pytestmark = pytest.mark.slow


def _rows(output: str) -> list[list[str]]:
    return [re.split(r"\s{2,}", line.strip()) for line in output.strip().splitlines()]


async def test_api_resources_from_aggregated_discovery(
    kubectl: Kubectl, fake_api_server: FakeApiServer
) -> None:
    out = await kubectl("api-resources")
    rows = {(r[0], r[-3]): r for r in _rows(out)[1:]}
    assert ("scalabletopics", "scalabletopics.dev/v1alpha1") in rows
    assert rows[("scalabletopics", "scalabletopics.dev/v1alpha1")] == [
        "scalabletopics",
        "st",
        "scalabletopics.dev/v1alpha1",
        "true",
        "ScalableTopic",
    ]
    assert rows[("namespaces", "v1")] == ["namespaces", "ns", "v1", "false", "Namespace"]
    assert ("events", "events.k8s.io/v1") in rows
    assert ("leases", "coordination.k8s.io/v1") in rows
    assert rows[("customresourcedefinitions", "apiextensions.k8s.io/v1")][1] == "crd,crds"
    # One request each for /api and /apis: the aggregated documents were understood.
    assert not [r for r in fake_api_server.requests if r.path.startswith("/apis/")]
    assert (
        "g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"
        in fake_api_server.find("/apis")[0].accept
    )


async def test_api_resources_from_legacy_discovery(
    kubectl: Kubectl, fake_api_server: FakeApiServer
) -> None:
    fake_api_server.aggregated_discovery = False
    rows = _rows(await kubectl("api-resources"))
    assert ["scalabletopics", "st", "scalabletopics.dev/v1alpha1", "true", "ScalableTopic"] in rows
    asked = {r.path for r in fake_api_server.requests}
    assert {"/api/v1", "/apis/scalabletopics.dev/v1alpha1", "/apis/coordination.k8s.io/v1"} <= asked


async def test_get_scalabletopics_prints_the_printer_columns(
    kubectl: Kubectl, fake_api_server: FakeApiServer
) -> None:
    rows = _rows(await kubectl("get", "st"))
    assert rows[0] == ["NAME", "SEGMENTS", "EPOCH", "LEADER", "PHASE", "AGE"]
    assert rows[1][:5] == ["orders", "3", "2", "controller-0", "Ready"]
    assert re.fullmatch(r"5m\d+s", rows[1][5])
    assert rows[2] == ["payments", "3h"]  # no status yet: empty cells
    listed = fake_api_server.find(
        "/apis/scalabletopics.dev/v1alpha1/namespaces/default/scalabletopics"
    )
    assert listed[0].accept.startswith("application/json;as=Table;v=v1;g=meta.k8s.io")


async def test_get_one_scalabletopic_and_all_namespaces(kubectl: Kubectl) -> None:
    rows = _rows(await kubectl("get", "st", "orders"))
    assert rows[1][:5] == ["orders", "3", "2", "controller-0", "Ready"]
    rows = _rows(await kubectl("get", "st", "-A"))
    assert rows[0][:2] == ["NAMESPACE", "NAME"]
    assert rows[1][:2] == ["default", "orders"]


async def test_get_segments_leases_namespaces_crds(kubectl: Kubectl) -> None:
    rows = _rows(await kubectl("get", "seg"))
    assert rows[0] == ["NAME", "TOPIC", "RANGE", "STATE", "BROKER", "AGE"]
    assert rows[1][:5] == ["orders-0", "orders", "0000-7fff", "Active", "broker-1"]

    rows = _rows(await kubectl("get", "leases"))
    assert rows[0] == ["NAME", "HOLDER", "AGE"]
    assert rows[1][:2] == ["topic-orders", "controller-0"]

    rows = _rows(await kubectl("get", "ns"))
    assert rows[0] == ["NAME", "STATUS", "AGE"]
    assert ["default", "Active", "3d"] in rows

    rows = _rows(await kubectl("get", "crd"))
    assert rows[0] == ["NAME", "CREATED AT"]
    assert rows[1][0] == "scalabletopics.scalabletopics.dev"
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", rows[1][1])


async def test_get_events_in_both_apis(kubectl: Kubectl) -> None:
    for resource in ("events", "events.events.k8s.io"):
        rows = _rows(await kubectl("get", resource))
        assert rows[0] == ["LAST SEEN", "TYPE", "REASON", "OBJECT", "MESSAGE"]
        assert rows[1][1:] == [
            "Normal",
            "Split",
            "scalabletopic/orders",
            "segment 0 split into 1 and 2",
        ]
        assert re.fullmatch(r"\d+s", rows[1][0])
    rows = _rows(await kubectl("get", "events", "-o", "wide"))
    assert rows[0][-3:] == ["FIRST SEEN", "COUNT", "NAME"]
    assert rows[1][-2:] == ["3", "orders.17a2"]


async def test_get_watch_prints_each_event_as_a_row(
    kubectl: Kubectl, fake_api_server: FakeApiServer
) -> None:
    topic = fake_api_server.objects[("scalabletopics.dev", "scalabletopics")][0]
    scaling = copy.deepcopy(topic)
    scaling["status"].update(phase="Scaling", epoch=3)
    fake_api_server.watch_events = [("MODIFIED", scaling), ("MODIFIED", topic)]
    rows = _rows(await kubectl("get", "st", "-w", timeout=30))
    assert [r[:5] for r in rows[3:]] == [
        ["orders", "3", "3", "controller-0", "Scaling"],
        ["orders", "3", "2", "controller-0", "Ready"],
    ]


async def test_explain_reads_the_openapi_v3_documents(
    kubectl: Kubectl, fake_api_server: FakeApiServer
) -> None:
    out = await kubectl("explain", "scalabletopic.spec")
    assert "KIND:       ScalableTopic" in out
    assert "FIELD: spec <Object>" in out
    assert "initialSegments\t<integer>" in out
    assert "autoScale\t<Object>" in out

    out = await kubectl("explain", "st.status.segments")
    assert "FIELD: segments <[]Object>" in out
    assert "hashRange\t<Object> -required-" in out
    assert "enum: Active, Sealed" in out

    out = await kubectl("explain", "st")
    assert "metadata\t<ObjectMeta>" in out

    out = await kubectl("explain", "lease.spec.renewTime")
    assert "GROUP:      coordination.k8s.io" in out
    assert "six fractional digits" in out
    assert fake_api_server.find("/openapi/v3")


async def test_explain_builtin_kinds(kubectl: Kubectl) -> None:
    assert "phase\t<string>" in await kubectl("explain", "ns.status")
    assert "involvedObject\t<Object> -required-" in await kubectl("explain", "events")
    assert "additionalPrinterColumns\t<[]Object>" in await kubectl("explain", "crd.spec.versions")


async def test_apply_asks_for_server_side_field_validation(
    kubectl: Kubectl, fake_api_server: FakeApiServer, tmp_path: Path
) -> None:
    manifest = tmp_path / "topic.yaml"
    manifest.write_text(
        "apiVersion: scalabletopics.dev/v1alpha1\nkind: ScalableTopic\n"
        "metadata:\n  name: invoices\nspec:\n  initialSegments: 4\n"
    )
    assert "scalabletopic.scalabletopics.dev/invoices created" in await kubectl(
        "apply", "-f", str(manifest)
    )
    [created] = [r for r in fake_api_server.requests if r.method == "POST"]
    assert created.query["fieldValidation"] == "Strict"


async def test_apply_patches_crd_kinds_with_merge_patch_and_builtins_with_strategic(
    kubectl: Kubectl, fake_api_server: FakeApiServer, tmp_path: Path
) -> None:
    topic = tmp_path / "topic.yaml"
    topic.write_text(
        "apiVersion: scalabletopics.dev/v1alpha1\nkind: ScalableTopic\n"
        "metadata:\n  name: orders\nspec:\n  initialSegments: 4\n"
    )
    lease = tmp_path / "lease.yaml"
    lease.write_text(
        "apiVersion: coordination.k8s.io/v1\nkind: Lease\n"
        "metadata:\n  name: topic-orders\nspec:\n  holderIdentity: controller-1\n"
    )
    await kubectl("apply", "-f", str(topic))
    await kubectl("apply", "-f", str(lease))
    patches = [
        (path, content_type)
        for method, path, content_type, _ in fake_api_server.bodies
        if method == "PATCH"
    ]
    assert patches == [
        (
            "/apis/scalabletopics.dev/v1alpha1/namespaces/default/scalabletopics/orders",
            "application/merge-patch+json",
        ),
        (
            "/apis/coordination.k8s.io/v1/namespaces/default/leases/topic-orders",
            "application/strategic-merge-patch+json",
        ),
    ]
    assert all(
        r.query.get("fieldValidation") == "Strict"
        for r in fake_api_server.requests
        if r.method == "PATCH"
    )


async def test_version(kubectl: Kubectl) -> None:
    assert "Server Version: v1.37.0" in await kubectl("version")
