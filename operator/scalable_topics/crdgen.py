"""Generate the CustomResourceDefinitions in ``crds/`` from the pydantic resource models.

Pydantic writes JSON Schema; a CRD needs a *structural* OpenAPI v3 schema: no ``$ref``, a type
on every node, no ``anyOf [..., null]`` for optional fields, no ``additionalProperties``
beside ``properties`` (the API server prunes unknown fields instead). This module does that
translation and nothing else, so the models stay the one source of truth.

Run ``python -m scalable_topics.crdgen crds`` (``make crds``).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel

from .model.resources import (
    DNS_LABEL_RULE,
    GROUP,
    NAME_PATTERN,
    TOPIC_LABEL,
    TOPIC_NAME_MAX,
    VERSION,
    ScalableTopic,
    ScalableTopicSpec,
    ScalableTopicStatus,
    Segment,
    SegmentSpec,
    SegmentStatus,
)

Schema = dict[str, Any]
CATEGORY = "streaming"


def structural_schema(model: type[BaseModel]) -> Schema:
    raw = model.model_json_schema(by_alias=True, mode="validation")
    definitions = raw.pop("$defs", {})
    return _convert(raw, definitions)


def _convert(node: Schema, definitions: dict[str, Schema]) -> Schema:
    if "$ref" in node:
        target = definitions[node["$ref"].rsplit("/", 1)[-1]]
        merged = {**target, **{k: v for k, v in node.items() if k != "$ref"}}
        return _convert(merged, definitions)
    variants = node.get("anyOf")
    if variants is not None:
        concrete = [v for v in variants if v.get("type") != "null"]
        if len(concrete) != 1:
            raise ValueError(
                f"cannot express a union of {len(concrete)} types structurally: {node}"
            )
        rest = {k: v for k, v in node.items() if k not in ("anyOf", "default")}
        # Optional fields are left non-nullable on purpose: the API server prunes an explicit
        # null from them, so CEL rules see the field as absent instead of failing on null.
        converted = _convert({**concrete[0], **rest}, definitions)
        if node.get("default") is not None:
            converted["default"] = node["default"]
        return converted
    out: Schema = {}
    for key, value in node.items():
        if key == "title":
            continue
        if key == "const":
            out["enum"] = [value]
        elif key == "properties":
            out["properties"] = {
                name: _convert(child, definitions) for name, child in value.items()
            }
        elif key == "items":
            out["items"] = _convert(value, definitions)
        elif key == "additionalProperties":
            if isinstance(value, dict):
                out["additionalProperties"] = _convert(value, definitions)
            # ``False`` (extra="forbid") is not structural; the API server prunes unknown fields.
        else:
            out[key] = value
    if "type" not in out and "enum" in out:
        out["type"] = "string"
    if out.get("type") == "object" and "properties" in out and "additionalProperties" in out:
        del out["additionalProperties"]
    return out


def _column(name: str, json_path: str, column_type: str, description: str) -> Schema:
    return {"name": name, "type": column_type, "jsonPath": json_path, "description": description}


def _crd(
    kind: type[ScalableTopic] | type[Segment],
    spec: type[BaseModel],
    status: type[BaseModel],
    columns: list[Schema],
    rules: list[Schema] | None = None,
) -> Schema:
    root: Schema = {
        "type": "object",
        "required": ["spec"],
        "properties": {
            "apiVersion": {"type": "string"},
            "kind": {"type": "string"},
            "metadata": {"type": "object"},
            "spec": structural_schema(spec),
            "status": structural_schema(status),
        },
        **({"x-kubernetes-validations": rules} if rules else {}),
    }
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{kind.PLURAL}.{GROUP}"},
        "spec": {
            "group": GROUP,
            "scope": "Namespaced",
            "names": {
                "kind": kind.KIND,
                "listKind": f"{kind.KIND}List",
                "plural": kind.PLURAL,
                "singular": kind.SINGULAR,
                "shortNames": list(kind.SHORT_NAMES),
                # `kubectl get streaming` lists topics and segments. A category must not be a
                # resource's name: kubectl expands categories first, so a category named
                # "scalabletopics" made `kubectl get scalabletopics` list Segments too.
                "categories": [CATEGORY],
            },
            "versions": [
                {
                    "name": VERSION,
                    "served": True,
                    "storage": True,
                    "subresources": {"status": {}},
                    "additionalPrinterColumns": columns,
                    "schema": {"openAPIV3Schema": root},
                }
            ],
        },
    }


def _age() -> Schema:
    return _column("Age", ".metadata.creationTimestamp", "date", "time since creation")


def custom_resource_definitions() -> dict[str, Schema]:
    """File name -> CRD, for every resource of the API group."""
    topic = _crd(
        ScalableTopic,
        ScalableTopicSpec,
        ScalableTopicStatus,
        [
            _column("Segments", ".status.activeSegments", "integer", "active segments"),
            _column("Epoch", ".status.epoch", "integer", "layout epoch"),
            _column(
                "Leader",
                ".status.controller.identity",
                "string",
                "controller holding the topic lease",
            ),
            _column("Phase", ".status.phase", "string", "lifecycle phase"),
            _age(),
        ],
        rules=[
            {
                "rule": f"self.metadata.name.size() <= {TOPIC_NAME_MAX}",
                "message": f"metadata.name: a topic name has at most {TOPIC_NAME_MAX} "
                f"characters (it is the value of its Segments' {TOPIC_LABEL} label)",
            },
            {
                # The API server takes any DNS subdomain ("my.topic"); its Segments cannot.
                "rule": f"self.metadata.name.matches('{NAME_PATTERN}')",
                "message": f"metadata.name: a topic name is a DNS label: {DNS_LABEL_RULE} (no '.')",
            },
        ],
    )
    segment = _crd(
        Segment,
        SegmentSpec,
        SegmentStatus,
        [
            _column("Topic", ".spec.topic", "string", "the scalable topic"),
            _column("Range", ".status.range", "string", "hash range, hex"),
            _column("State", ".status.state", "string", "segment state"),
            _column("Broker", ".status.broker", "string", "broker serving the segment"),
            _age(),
        ],
    )
    return {
        f"{GROUP}_{ScalableTopic.PLURAL}.yaml": topic,
        f"{GROUP}_{Segment.PLURAL}.yaml": segment,
    }


class _PlainDumper(yaml.SafeDumper):
    """Writes repeated sub-schemas out in full: anchors and aliases confuse readers of a CRD."""

    def ignore_aliases(self, data: Any) -> bool:
        return True


_HEADER = (
    "# Generated by `make crds` from operator/scalable_topics/model/resources.py. Do not edit.\n"
)
KUSTOMIZATION = "kustomization.yaml"


def render(crd: Schema) -> str:
    return _HEADER + yaml.dump(crd, Dumper=_PlainDumper, sort_keys=False, width=100)


def generated_files() -> dict[str, str]:
    """File name -> text of everything in ``crds/``: the CRDs, and a kustomization listing them
    so that the manifests (manifests/base) take the directory as one resource."""
    crds = custom_resource_definitions()
    files = {file_name: render(crd) for file_name, crd in crds.items()}
    kustomization = {
        "apiVersion": "kustomize.config.k8s.io/v1beta1",
        "kind": "Kustomization",
        "resources": sorted(crds),
    }
    header = (
        "# Generated by `make crds` (operator/scalable_topics/crdgen.py): crds/ as a kustomize "
        "base. Do not edit.\n"
    )
    files[KUSTOMIZATION] = header + yaml.dump(kustomization, sort_keys=False)
    return files


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m scalable_topics.crdgen OUTPUT_DIR", file=sys.stderr)
        return 2
    out = Path(args[0])
    out.mkdir(parents=True, exist_ok=True)
    for file_name, text in generated_files().items():
        (out / file_name).write_text(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
