"""The Makefile's image and kind targets, as a dry run (``make -n``): running them needs Docker
and kind, which CI does not have."""

from __future__ import annotations

import subprocess

from rendered_manifests import ROOT, containers, rendered, workloads

TARGETS = ("kind-up", "image", "image-spark", "load", "deploy", "e2e", "kind-down")


def test_kind_targets_build_load_and_deploy_what_the_kind_overlay_runs() -> None:
    done = subprocess.run(
        ["make", "-n", "-C", str(ROOT), *TARGETS],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    commands = " ".join(done.stdout.replace("\\\n", " ").split())
    [image] = {c["image"] for w in workloads(rendered("kind")) for c in containers(w)}
    context = "--context kind-scalable-topics"
    for expected in (
        "kind create cluster --config manifests/kind/cluster.yaml --name scalable-topics",
        f"docker build -t {image} .",
        "docker build -f Dockerfile.spark -t scalable-topics-spark:dev .",
        f"kind load docker-image {image} --name scalable-topics",
        f"kubectl {context} apply -k manifests/overlays/kind",
        f"kubectl {context} -n scalable-topics rollout status deployment/scalable-topics-operator",
        f"kubectl {context} -n scalable-topics rollout status statefulset/scalable-topics-broker",
        "python -m pytest -q tests/e2e --e2e-target=kind",
        "kind delete cluster --name scalable-topics",
    ):
        assert expected in commands, expected
