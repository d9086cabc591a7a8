from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import yaml
from pydantic import ValidationError

from scalable_topics.model.conditions import Condition, find_condition, set_condition
from scalable_topics.model.resources import (
    ScalableTopic,
    Segment,
    SubscriptionType,
    segment_object_name,
)

EXAMPLE = Path(__file__).parents[2] / "manifests" / "examples" / "orders-topic.yaml"
T0 = datetime(2026, 1, 1, tzinfo=UTC)


def test_example_manifest_reads_into_the_model() -> None:
    topic = ScalableTopic.model_validate(yaml.safe_load(EXAMPLE.read_text()))
    assert topic.metadata.name == "orders"
    assert topic.spec.initial_segments == 4
    assert [(s.name, s.type) for s in topic.spec.subscriptions] == [
        ("billing", SubscriptionType.STREAM),
        ("audit", SubscriptionType.QUEUE),
    ]
    assert topic.spec.auto_scale is not None and topic.spec.auto_scale.max_segments == 32
    assert ScalableTopic.model_validate(topic.to_wire()) == topic


@pytest.mark.parametrize(
    ("spec", "field"),
    [
        ({"initialSegments": 0}, "initialSegments"),
        ({"initialSegments": 5000}, "initialSegments"),
        ({"initalSegments": 2}, "initalSegments"),
        ({"subscriptions": [{"name": "bad name"}]}, "subscriptions.0.name"),
        ({"subscriptions": [{"name": "s", "type": "Fifo"}]}, "subscriptions.0.type"),
    ],
)
def test_invalid_specs_are_refused_naming_the_field(spec: dict[str, object], field: str) -> None:
    with pytest.raises(ValidationError) as caught:
        ScalableTopic.model_validate({"metadata": {"name": "t"}, "spec": spec})
    assert field in str(caught.value)


@pytest.mark.parametrize(
    ("auto_scale", "field", "message"),
    [
        (
            {"minSegments": 9, "maxSegments": 8},
            "spec.autoScale",
            "minSegments must not exceed maxSegments (9 > 8)",
        ),
        (
            {"splitThresholds": {"msgRateIn": 0}},
            "spec.autoScale",
            "splitThresholds.msgRateIn must be greater than 0, not 0",
        ),
        (
            {"splitThresholds": {"byteRateOut": 100}, "mergeThresholds": {"byteRateOut": 100}},
            "spec.autoScale",
            "splitThresholds.byteRateOut must be greater than mergeThresholds.byteRateOut "
            "(100 <= 100)",
        ),
        (
            {"splitThresholds": {"msgRateOut": 50}, "mergeThresholds": {"msgRateOut": 80}},
            "spec.autoScale",
            "splitThresholds.msgRateOut must be greater than mergeThresholds.msgRateOut (50 <= 80)",
        ),
        ({"splitCooldownSeconds": -1}, "spec.autoScale.splitCooldownSeconds", "greater than"),
        ({"mergeCooldownSeconds": -5}, "spec.autoScale.mergeCooldownSeconds", "greater than"),
        ({"mergeThresholds": {"msgRateIn": -1}}, "spec.autoScale.mergeThresholds.msgRateIn", ""),
        ({"minSegments": 0}, "spec.autoScale.minSegments", "greater than or equal to 1"),
    ],
)
def test_an_invalid_autoscale_policy_is_refused_naming_the_field(
    auto_scale: dict[str, object], field: str, message: str
) -> None:
    with pytest.raises(ValidationError) as caught:
        ScalableTopic.model_validate({"metadata": {"name": "t"}, "spec": {"autoScale": auto_scale}})
    [error] = caught.value.errors()
    assert ".".join(str(part) for part in error["loc"]) == field
    assert message in str(caught.value)


def test_a_consistent_autoscale_policy_is_accepted() -> None:
    topic = ScalableTopic.model_validate(
        {
            "metadata": {"name": "t"},
            "spec": {
                "autoScale": {
                    "minSegments": 2,
                    "maxSegments": 2,
                    "splitCooldownSeconds": 0,
                    "splitThresholds": {"msgRateIn": 1000, "byteRateIn": 0.5},
                    # 0 never merges on that rate; a rate without a split threshold is free.
                    "mergeThresholds": {"msgRateIn": 0, "byteRateIn": 0.25, "msgRateOut": 9},
                }
            },
        }
    )
    assert topic.spec.auto_scale is not None and topic.spec.auto_scale.max_segments == 2


def test_segment_resource_round_trips() -> None:
    segment = Segment.model_validate(
        {
            "metadata": {"name": segment_object_name("orders", "0000-7fff-0")},
            "spec": {"topic": "orders", "segmentId": 0, "hashRange": {"start": 0, "end": 0x7FFF}},
            "status": {"state": "Active", "drained": {"billing": "2026-01-01T00:00:00Z"}},
        }
    )
    assert segment.metadata.name == "orders-0000-7fff-0"
    assert segment.status.drained["billing"] == T0
    assert Segment.model_validate(segment.to_wire()) == segment


def _ready(status: str, at: datetime) -> Condition:
    return Condition(type="Ready", status=status, reason="Reconciled", last_transition_time=at)  # type: ignore[arg-type]


def test_condition_keeps_its_transition_time_until_its_status_moves() -> None:
    conditions = set_condition([], _ready("True", T0))
    conditions = set_condition(conditions, _ready("True", T0 + timedelta(minutes=1)))
    assert find_condition(conditions, "Ready") == _ready("True", T0)
    later = T0 + timedelta(minutes=2)
    conditions = set_condition(conditions, _ready("False", later))
    assert len(conditions) == 1
    assert find_condition(conditions, "Ready") == _ready("False", later)


def test_condition_wire_shape_matches_kubernetes() -> None:
    condition = _ready("True", T0).model_copy(update={"observed_generation": 3})
    assert condition.model_dump(mode="json", by_alias=True) == {
        "type": "Ready",
        "status": "True",
        "reason": "Reconciled",
        "message": "",
        "lastTransitionTime": "2026-01-01T00:00:00Z",
        "observedGeneration": 3,
    }
    with pytest.raises(ValidationError, match="reason"):
        Condition(type="Ready", status="True", reason="not camel", last_transition_time=T0)
