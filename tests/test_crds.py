"""The CRDs in crds/ are generated from the models, structural, and their rules do what they say."""

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import celpy
import jsonschema
import pytest
import yaml

from scalable_topics.crdgen import custom_resource_definitions, render

CRD_DIR = Path(__file__).parents[1] / "crds"
EXAMPLES = Path(__file__).parents[1] / "manifests" / "examples"
GENERATED = custom_resource_definitions()


def _schema(file_name: str) -> dict[str, Any]:
    schema: dict[str, Any] = GENERATED[file_name]["spec"]["versions"][0]["schema"][
        "openAPIV3Schema"
    ]
    return schema


def _nodes(node: dict[str, Any], path: str = "") -> Iterator[tuple[str, dict[str, Any]]]:
    yield path, node
    for name, child in node.get("properties", {}).items():
        yield from _nodes(child, f"{path}.{name}")
    if "items" in node:
        yield from _nodes(node["items"], f"{path}[]")
    if isinstance(node.get("additionalProperties"), dict):
        yield from _nodes(node["additionalProperties"], f"{path}{{}}")


def test_committed_crds_match_the_models() -> None:
    committed = {p.name: p.read_text() for p in CRD_DIR.glob("*.yaml")}
    generated = {name: render(crd) for name, crd in GENERATED.items()}
    assert committed.keys() == generated.keys(), "run `make crds`"
    for name, text in generated.items():
        assert committed[name] == text, f"crds/{name} drifted from the models: run `make crds`"


@pytest.mark.parametrize("file_name", sorted(GENERATED))
def test_schemas_are_structural(file_name: str) -> None:
    for path, node in _nodes(_schema(file_name)):
        assert "type" in node, f"{path} has no type"
        for forbidden in ("$ref", "anyOf", "oneOf", "allOf", "const", "title", "nullable"):
            assert forbidden not in node, f"{path} uses {forbidden}"
        if "properties" in node:
            assert "additionalProperties" not in node, (
                f"{path} mixes properties and additionalProperties"
            )
            assert set(node.get("required", [])) <= set(node["properties"]), (
                f"{path}: required names a missing field"
            )


@pytest.mark.parametrize("file_name", sorted(GENERATED))
def test_printer_columns_point_at_schema_fields(file_name: str) -> None:
    version = GENERATED[file_name]["spec"]["versions"][0]
    schema = _schema(file_name)
    paths = {path for path, _ in _nodes(schema)}
    for column in version["additionalPrinterColumns"]:
        if column["jsonPath"].startswith(".metadata."):
            continue
        assert column["jsonPath"] in paths, (
            f"column {column['name']} reads a field the schema lacks"
        )


def test_printer_columns_are_the_documented_ones() -> None:
    names = {
        file_name: [
            c["name"].upper() for c in crd["spec"]["versions"][0]["additionalPrinterColumns"]
        ]
        for file_name, crd in GENERATED.items()
    }
    assert names["scalabletopics.dev_scalabletopics.yaml"] == [
        "SEGMENTS",
        "EPOCH",
        "LEADER",
        "PHASE",
        "AGE",
    ]
    assert names["scalabletopics.dev_segments.yaml"] == ["TOPIC", "RANGE", "STATE", "BROKER", "AGE"]


def test_example_manifest_satisfies_the_openapi_schema() -> None:
    manifest = yaml.safe_load((EXAMPLES / "orders-topic.yaml").read_text())
    jsonschema.validate(manifest, _schema("scalabletopics.dev_scalabletopics.yaml"))
    bad = {**manifest, "spec": {**manifest["spec"], "initialSegments": 0}}
    with pytest.raises(jsonschema.ValidationError, match="minimum"):
        jsonschema.validate(bad, _schema("scalabletopics.dev_scalabletopics.yaml"))


def _rules(node: dict[str, Any]) -> dict[str, str]:
    return {rule["message"]: rule["rule"] for rule in node.get("x-kubernetes-validations", [])}


def _evaluate(rule: str, new: dict[str, Any], old: dict[str, Any] | None = None) -> bool:
    env = celpy.Environment()
    activation = {"self": celpy.json_to_cel(new)}
    if old is not None:
        activation["oldSelf"] = celpy.json_to_cel(old)
    return bool(env.program(env.compile(rule)).evaluate(activation))


def test_initial_segments_cannot_change() -> None:
    spec = _schema("scalabletopics.dev_scalabletopics.yaml")["properties"]["spec"]
    rule = _rules(spec)["initialSegments is immutable"]
    assert _evaluate(rule, {"initialSegments": 4}, {"initialSegments": 4})
    assert not _evaluate(rule, {"initialSegments": 8}, {"initialSegments": 4})


def test_autoscale_bounds_must_be_ordered() -> None:
    auto_scale = _schema("scalabletopics.dev_scalabletopics.yaml")["properties"]["spec"][
        "properties"
    ]["autoScale"]
    rule = _rules(auto_scale)["minSegments must not exceed maxSegments"]
    assert _evaluate(rule, {"minSegments": 2, "maxSegments": 8})
    assert _evaluate(rule, {"minSegments": 2})
    assert not _evaluate(rule, {"minSegments": 9, "maxSegments": 8})


def test_segment_spec_is_immutable_and_its_range_ordered() -> None:
    spec = _schema("scalabletopics.dev_segments.yaml")["properties"]["spec"]
    immutable = _rules(spec)["a Segment's spec is immutable"]
    before = {"topic": "t", "segmentId": 1, "hashRange": {"start": 0, "end": 9}}
    assert _evaluate(immutable, before, before)
    assert not _evaluate(immutable, {**before, "segmentId": 2}, before)
    ordered = _rules(spec["properties"]["hashRange"])["start must not exceed end"]
    assert _evaluate(ordered, {"start": 3, "end": 3})
    assert not _evaluate(ordered, {"start": 4, "end": 3})
