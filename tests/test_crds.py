"""The CRDs in crds/ are generated from the models, structural, and their rules do what they say."""

import functools
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import celpy
import jsonschema
import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from scalable_topics.crdgen import custom_resource_definitions, generated_files
from scalable_topics.model.resources import AutoScaleSpec

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
    generated = generated_files()
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


@functools.cache
def _program(rule: str) -> Any:
    env = celpy.Environment()
    return env.program(env.compile(rule))


def _evaluate(rule: str, new: dict[str, Any], old: dict[str, Any] | None = None) -> bool:
    activation = {"self": celpy.json_to_cel(new)}
    if old is not None:
        activation["oldSelf"] = celpy.json_to_cel(old)
    return bool(_program(rule).evaluate(activation))


def test_initial_segments_cannot_change() -> None:
    spec = _schema("scalabletopics.dev_scalabletopics.yaml")["properties"]["spec"]
    rule = _rules(spec)["initialSegments is immutable"]
    assert _evaluate(rule, {"initialSegments": 4}, {"initialSegments": 4})
    assert not _evaluate(rule, {"initialSegments": 8}, {"initialSegments": 4})


def _auto_scale_schema() -> dict[str, Any]:
    schema: dict[str, Any] = _schema("scalabletopics.dev_scalabletopics.yaml")["properties"][
        "spec"
    ]["properties"]["autoScale"]
    return schema


def _refusals(auto_scale: dict[str, Any]) -> list[str]:
    """The messages of the autoScale CEL rules ``auto_scale`` breaks, as kubectl shows them."""
    return [
        rule["message"]
        for rule in _auto_scale_schema()["x-kubernetes-validations"]
        if not _evaluate(rule["rule"], auto_scale)
    ]


def test_autoscale_bounds_must_be_ordered() -> None:
    rule = _rules(_auto_scale_schema())["minSegments must not exceed maxSegments"]
    assert _evaluate(rule, {"minSegments": 2, "maxSegments": 8})
    assert _evaluate(rule, {"minSegments": 2})
    assert not _evaluate(rule, {"minSegments": 9, "maxSegments": 8})


def test_autoscale_split_thresholds_must_be_positive_and_above_merge_thresholds() -> None:
    assert _refusals({"splitThresholds": {"msgRateIn": 0}}) == [
        "splitThresholds.msgRateIn must be greater than 0"
    ]
    assert _refusals({"splitThresholds": {"byteRateIn": 0.0}}) == [
        "splitThresholds.byteRateIn must be greater than 0"
    ]
    assert _refusals(
        {"splitThresholds": {"msgRateOut": 10}, "mergeThresholds": {"msgRateOut": 10.0}}
    ) == ["splitThresholds.msgRateOut must be greater than mergeThresholds.msgRateOut"]
    assert (
        _refusals(
            {
                "splitThresholds": {"msgRateIn": 5000, "byteRateOut": 2.5},
                "mergeThresholds": {"msgRateIn": 0, "byteRateOut": 1, "msgRateOut": 7},
            }
        )
        == []
    )
    assert _refusals({}) == [] and _refusals({"mergeThresholds": {"msgRateIn": 3}}) == []
    for rule in _auto_scale_schema()["x-kubernetes-validations"]:
        path = rule["fieldPath"].lstrip(".").split(".")
        node = _auto_scale_schema()
        for part in path:  # the API server names this field in the refusal
            node = node["properties"][part]


_RATE = st.one_of(st.none(), st.sampled_from([0, 0.5, 1, 2, 2.5, 100]))
_RATES = ("msgRateIn", "msgRateOut", "byteRateIn", "byteRateOut")


def _thresholds() -> st.SearchStrategy[dict[str, Any] | None]:
    rates = st.fixed_dictionaries({}, optional=dict.fromkeys(_RATES, _RATE))
    return st.one_of(st.none(), rates.map(lambda d: {k: v for k, v in d.items() if v is not None}))


@given(
    bounds=st.tuples(st.none() | st.integers(1, 4), st.none() | st.integers(1, 4)),
    split=_thresholds(),
    merge=_thresholds(),
    cooldown=st.none() | st.integers(0, 3),
)
@settings(max_examples=150, deadline=None)
def test_kubectl_and_the_model_refuse_the_same_policies(
    bounds: tuple[int | None, int | None],
    split: dict[str, Any] | None,
    merge: dict[str, Any] | None,
    cooldown: int | None,
) -> None:
    """Within the OpenAPI bounds, a policy breaks a CEL rule exactly when the model refuses
    it, and for the same reasons."""
    fields = {
        "minSegments": bounds[0],
        "maxSegments": bounds[1],
        "splitThresholds": split,
        "mergeThresholds": merge,
        "splitCooldownSeconds": cooldown,
    }
    auto_scale = {k: v for k, v in fields.items() if v is not None}
    jsonschema.validate(auto_scale, _auto_scale_schema())
    refusals = _refusals(auto_scale)
    problems: list[str] = []
    try:
        AutoScaleSpec.model_validate(auto_scale)
    except ValidationError as error:
        problems = str(error.errors()[0]["ctx"]["error"]).split("; ")
    # The model adds the values: "... must be greater than 0, not 0", "... (2 <= 2)".
    assert [p.split(" (")[0].split(", not")[0] for p in problems] == refusals


def test_segment_spec_is_immutable_and_its_range_ordered() -> None:
    spec = _schema("scalabletopics.dev_segments.yaml")["properties"]["spec"]
    immutable = _rules(spec)["a Segment's spec is immutable"]
    before = {"topic": "t", "segmentId": 1, "hashRange": {"start": 0, "end": 9}}
    assert _evaluate(immutable, before, before)
    assert not _evaluate(immutable, {**before, "segmentId": 2}, before)
    ordered = _rules(spec["properties"]["hashRange"])["start must not exceed end"]
    assert _evaluate(ordered, {"start": 3, "end": 3})
    assert not _evaluate(ordered, {"start": 4, "end": 3})


def test_no_category_is_the_name_of_a_resource() -> None:
    """kubectl expands a category before a resource name: `kubectl get scalabletopics` would
    list every kind in a category of that name."""
    names = {
        name
        for crd in GENERATED.values()
        for name in (
            crd["spec"]["names"]["plural"],
            crd["spec"]["names"]["singular"],
            *crd["spec"]["names"].get("shortNames", []),
        )
    }
    for crd in GENERATED.values():
        assert not set(crd["spec"]["names"].get("categories", [])) & names
