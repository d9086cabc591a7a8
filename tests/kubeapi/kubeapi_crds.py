"""The project's CRDs and the example topic, as the kubeapi tests use them."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import yaml

from scalable_topics.kubeapi import builtins, crd_types
from scalable_topics.kubeapi.resources import ResourceType
from scalable_topics.model.resources import GROUP

ROOT = Path(__file__).parents[2]


def crd(file_name: str) -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load((ROOT / "crds" / file_name).read_text())
    return loaded


def schema_of(file_name: str) -> dict[str, Any]:
    found: dict[str, Any] = crd(file_name)["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    return found


def resource_types() -> list[ResourceType]:
    """The built-in kinds and what the project's CRDs define, as a server that has them serves."""
    types = list(builtins.BUILTIN_RESOURCES)
    for path in sorted((ROOT / "crds").glob(f"{GROUP}_*.yaml")):  # not kustomization.yaml
        types += crd_types.resource_types(crd_types.with_defaults(crd(path.name)))
    return types


TOPIC_SCHEMA = schema_of("scalabletopics.dev_scalabletopics.yaml")
SEGMENT_SCHEMA = schema_of("scalabletopics.dev_segments.yaml")


def load_example() -> dict[str, Any]:
    """manifests/examples/orders-topic.yaml, a fresh copy."""
    loaded: dict[str, Any] = yaml.safe_load(
        (ROOT / "manifests" / "examples" / "orders-topic.yaml").read_text()
    )
    return copy.deepcopy(loaded)
