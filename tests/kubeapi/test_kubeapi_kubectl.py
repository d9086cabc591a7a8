"""The real kubectl against the real API server (conftest.py starts it in the test's loop with a
few canned objects): discovery, OpenAPI, Tables, watches and what kubectl apply sends. Skipped,
with the reason, when kubectl is not installed."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

import pytest
from served_api import KubeApi

from support.kubectl import Kubectl

pytestmark = pytest.mark.slow


def _rows(output: str) -> list[list[str]]:
    return [re.split(r"\s{2,}", line.strip()) for line in output.strip().splitlines()]


async def test_api_resources_from_aggregated_discovery(kubectl: Kubectl, kube_api: KubeApi) -> None:
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
    assert not [r for r in kube_api.recorder.requests if r.path.startswith("/apis/")]
    assert (
        "g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"
        in kube_api.recorder.find("/apis")[0].accept
    )


async def test_api_resources_from_legacy_discovery(kubectl: Kubectl, kube_api: KubeApi) -> None:
    kube_api.recorder.aggregated_discovery = False
    rows = _rows(await kubectl("api-resources"))
    assert ["scalabletopics", "st", "scalabletopics.dev/v1alpha1", "true", "ScalableTopic"] in rows
    asked = {r.path for r in kube_api.recorder.requests}
    assert {"/api/v1", "/apis/scalabletopics.dev/v1alpha1", "/apis/coordination.k8s.io/v1"} <= asked


async def test_get_scalabletopics_prints_the_printer_columns(
    kubectl: Kubectl, kube_api: KubeApi
) -> None:
    rows = _rows(await kubectl("get", "st"))
    assert rows[0] == ["NAME", "SEGMENTS", "EPOCH", "LEADER", "PHASE", "AGE"]
    assert rows[1][:5] == ["orders", "3", "2", "controller-0", "Ready"]
    assert re.fullmatch(r"5m\d+s", rows[1][5])
    assert rows[2] == ["payments", "3h"]  # no status yet: empty cells
    listed = kube_api.recorder.find(
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


async def test_get_watch_prints_each_event_as_a_row(kubectl: Kubectl, kube_api: KubeApi) -> None:
    watcher = await kubectl.spawn("get", "st", "-w")
    try:
        # The header and the two topics: kubectl has listed, and watches from that list on.
        lines = [await _line_of(watcher) for _ in range(3)]
        topic = await kube_api.store.get("ScalableTopic", "default", "orders")
        scaling = {**topic["status"], "phase": "Scaling", "epoch": 3}
        scaled = await kube_api.store.replace_status({**topic, "status": scaling})
        await kube_api.store.replace_status({**scaled, "status": topic["status"]})
        lines += [await _line_of(watcher) for _ in range(2)]
    finally:
        watcher.terminate()
        rest, _ = await watcher.communicate()
    rows = _rows("".join(lines) + rest.decode())
    assert [r[:5] for r in rows[3:]] == [
        ["orders", "3", "3", "controller-0", "Scaling"],
        ["orders", "3", "2", "controller-0", "Ready"],
    ]


async def _line_of(process: asyncio.subprocess.Process, timeout: float = 30) -> str:
    assert process.stdout is not None and process.stderr is not None
    line = await asyncio.wait_for(process.stdout.readline(), timeout)
    if not line:
        await process.wait()
        error = await process.stderr.read()
        raise AssertionError(f"kubectl exited {process.returncode}: {error.decode()}")
    return line.decode()


async def test_explain_reads_the_openapi_v3_documents(kubectl: Kubectl, kube_api: KubeApi) -> None:
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
    assert kube_api.recorder.find("/openapi/v3")


async def test_explain_builtin_kinds(kubectl: Kubectl) -> None:
    assert "phase\t<string>" in await kubectl("explain", "ns.status")
    assert "involvedObject\t<Object> -required-" in await kubectl("explain", "events")
    assert "additionalPrinterColumns\t<[]Object>" in await kubectl("explain", "crd.spec.versions")


async def test_apply_asks_for_server_side_field_validation(
    kubectl: Kubectl, kube_api: KubeApi, tmp_path: Path
) -> None:
    manifest = tmp_path / "topic.yaml"
    manifest.write_text(
        "apiVersion: scalabletopics.dev/v1alpha1\nkind: ScalableTopic\n"
        "metadata:\n  name: invoices\nspec:\n  initialSegments: 4\n"
    )
    assert "scalabletopic.scalabletopics.dev/invoices created" in await kubectl(
        "apply", "-f", str(manifest)
    )
    [created] = [r for r in kube_api.recorder.requests if r.method == "POST"]
    assert created.query["fieldValidation"] == "Strict"


async def test_apply_of_a_kind_no_crd_defines_validates_it_against_openapi_v2_in_protobuf(
    kubectl: Kubectl, kube_api: KubeApi, tmp_path: Path
) -> None:
    """The v3 documents have no Widget, so kubectl validates it client-side: it reads
    /openapi/v2 in protobuf (nothing else), finds no definition of the kind and leaves the
    error to the mapping step."""
    manifest = tmp_path / "widget.yaml"
    manifest.write_text("apiVersion: example.com/v1\nkind: Widget\nmetadata:\n  name: w1\n")
    refused = await kubectl("apply", "-f", str(manifest), check=False)
    assert refused == (
        f'error: resource mapping not found for name: "w1" namespace: "" from "{manifest}": '
        'no matches for kind "Widget" in version "example.com/v1"\n'
        "ensure CRDs are installed first\n"
    )
    [v2] = kube_api.recorder.find("/openapi/v2")
    assert (v2.accept, v2.status) == (
        "application/com.github.proto-openapi.spec.v2@v1.0+protobuf",
        200,
    )
    assert not [r for r in kube_api.recorder.requests if r.method != "GET"]


async def test_apply_patches_crd_kinds_with_merge_patch_and_builtins_with_strategic(
    kubectl: Kubectl, kube_api: KubeApi, tmp_path: Path
) -> None:
    topic = tmp_path / "topic.yaml"
    topic.write_text(
        "apiVersion: scalabletopics.dev/v1alpha1\nkind: ScalableTopic\n"
        "metadata:\n  name: orders\nspec:\n  initialSegments: 2\n"
        "  properties:\n    team: payments\n"  # initialSegments is immutable (the CRD's rule)
    )
    lease = tmp_path / "lease.yaml"
    lease.write_text(
        "apiVersion: coordination.k8s.io/v1\nkind: Lease\n"
        "metadata:\n  name: topic-orders\nspec:\n  holderIdentity: controller-1\n"
    )
    await kubectl("apply", "-f", str(topic))
    await kubectl("apply", "-f", str(lease))
    patches = [(r.path, r.content_type) for r in kube_api.recorder.requests if r.method == "PATCH"]
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
        r.query.get("fieldValidation") == "Strict" and r.status == 200
        for r in kube_api.recorder.requests
        if r.method == "PATCH"
    )
    stored_topic = await kube_api.store.get("ScalableTopic", "default", "orders")
    assert stored_topic["spec"]["properties"] == {"team": "payments"}
    stored_lease = await kube_api.store.get("Lease", "default", "topic-orders")
    assert stored_lease["spec"]["holderIdentity"] == "controller-1"


async def test_apply_and_get_a_config_map(
    kubectl: Kubectl, kube_api: KubeApi, tmp_path: Path
) -> None:
    """The cluster's autoscale settings are a ConfigMap: applied, changed and listed as on a
    real cluster, and one with a bad key is refused naming it."""
    manifest = tmp_path / "settings.yaml"
    manifest.write_text(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: scalable-topics-autoscale\n"
        "data:\n  autoscale.yaml: |\n    maxSegments: 8\n"
    )
    assert "configmap/scalable-topics-autoscale created" in await kubectl(
        "apply", "-f", str(manifest)
    )
    manifest.write_text(manifest.read_text().replace("8", "16") + "  other: x\n")
    assert "configmap/scalable-topics-autoscale configured" in await kubectl(
        "apply", "-f", str(manifest)
    )
    stored = await kube_api.store.get("ConfigMap", "default", "scalable-topics-autoscale")
    assert stored["data"] == {"autoscale.yaml": "maxSegments: 16\n", "other": "x"}
    rows = _rows(await kubectl("get", "cm"))
    assert rows[0] == ["NAME", "DATA", "AGE"]
    assert rows[1][:2] == ["scalable-topics-autoscale", "2"]
    manifest.write_text(manifest.read_text().replace("other:", "bad/key:"))
    refused = await kubectl("apply", "-f", str(manifest), check=False)
    assert "data[bad/key]: Invalid value" in refused


async def test_version(kubectl: Kubectl) -> None:
    assert "Server Version: v1.37.0" in await kubectl("version")
