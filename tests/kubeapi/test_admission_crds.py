"""Admission of ScalableTopics and Segments against the project's own CRDs (crds/*.yaml): what
kubectl would be told, field by field, in kube-apiserver's words."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest
from kubeapi_crds import SEGMENT_SCHEMA, TOPIC_SCHEMA, crd, load_example

from scalable_topics.kubeapi.admission import (
    Admitted,
    FieldValidation,
    admit,
    admit_resource,
    check_crd,
    normalize,
    parse_field_validation,
)
from scalable_topics.kubeapi.resources import ResourceType
from scalable_topics.kubeapi.status import ApiError, CauseType

RULES_NOT_CHECKED = (
    "Invalid value: null: some validation rules were not checked because the object was "
    "invalid; correct the existing errors to complete validation"
)


def admit_topic(
    obj: dict[str, Any],
    old: dict[str, Any] | None = None,
    validation: FieldValidation = FieldValidation.STRICT,
) -> Admitted:
    return admit(
        TOPIC_SCHEMA,
        obj,
        old,
        field_validation=validation,
        kind="ScalableTopic",
        name="orders",
        group="scalabletopics.dev",
        version="v1alpha1",
    )


def refuse_topic(obj: dict[str, Any], old: dict[str, Any] | None = None) -> ApiError:
    with pytest.raises(ApiError) as raised:
        admit_topic(obj, old)
    return raised.value


def segment(**spec: Any) -> dict[str, Any]:
    body = {"topic": "orders", "segmentId": 3, "hashRange": {"start": 0, "end": 65535}}
    body.update(spec)
    return {
        "apiVersion": "scalabletopics.dev/v1alpha1",
        "kind": "Segment",
        "metadata": {"name": "orders-3", "namespace": "default"},
        "spec": body,
    }


def admit_segment(obj: dict[str, Any], old: dict[str, Any] | None = None) -> Admitted:
    return admit(
        SEGMENT_SCHEMA,
        obj,
        old,
        field_validation=FieldValidation.STRICT,
        kind="Segment",
        name="orders-3",
        group="scalabletopics.dev",
        version="v1alpha1",
    )


def test_the_example_topic_is_admitted_unchanged() -> None:
    example_topic = load_example()
    admitted = admit_topic(example_topic)
    assert admitted.object == example_topic
    assert admitted.warnings == ()


def test_defaults_fill_missing_fields_of_present_objects() -> None:
    example_topic = load_example()
    del example_topic["spec"]["initialSegments"]
    del example_topic["spec"]["subscriptions"][1]["type"]
    example_topic["status"] = {
        "segments": [
            {
                "id": 0,
                "hashRange": {"start": 0, "end": 65535},
                "state": "Active",
                "createdAtEpoch": 0,
                "createdAt": "2024-05-01T10:00:00Z",
            }
        ],
        "producer": {},
        "lastOperation": {
            "kind": "Split",
            "result": "Succeeded",
            "finishedAt": "2024-05-01T10:00:00Z",
        },
    }
    admitted = admit_topic(example_topic).object
    assert admitted["spec"]["initialSegments"] == 1
    assert admitted["spec"]["subscriptions"][1] == {"name": "audit", "type": "Queue"}
    assert admitted["status"]["segments"][0]["sealedAtEpoch"] == 0  # inside list items
    assert admitted["status"]["producer"] == {"epoch": 0, "term": 0, "claiming": False}
    assert admitted["status"]["lastOperation"]["message"] == ""
    assert "controller" not in admitted["status"]  # absent objects stay absent
    assert "initialSegments" not in example_topic["spec"]  # the request is left alone


def test_nulls_are_dropped_or_defaulted() -> None:
    example_topic = load_example()
    example_topic["spec"]["retention"] = None  # not nullable, no default: pruned
    example_topic["spec"]["initialSegments"] = None  # not nullable, defaulted
    admitted = admit_topic(example_topic).object
    assert "retention" not in admitted["spec"]
    assert admitted["spec"]["initialSegments"] == 1


def test_a_whole_float_is_an_integer() -> None:
    example_topic = load_example()
    example_topic["spec"]["initialSegments"] = 4.0
    assert admit_topic(example_topic).object["spec"]["initialSegments"] == 4.0


def _set(path: str, value: Any) -> Callable[[dict[str, Any]], None]:
    """A change to the example topic: set (or with value DELETE, remove) ``path``."""

    def change(obj: dict[str, Any]) -> None:
        parts = path.split(".")
        node: Any = obj
        for part in parts[:-1]:
            node = node[int(part)] if isinstance(node, list) else node.setdefault(part, {})
        last: Any = int(parts[-1]) if isinstance(node, list) else parts[-1]
        if value is DELETE:
            del node[last]
        else:
            node[last] = copy.deepcopy(value)

    return change


DELETE = object()
SEGMENT_STATUS = {
    "id": 1,
    "hashRange": {"start": 0, "end": 100},
    "state": "Active",
    "createdAtEpoch": 0,
    "createdAt": "2024-05-01T10:00:00Z",
}

# (change, field, reason, message): the first cause of the refusal.
TOPIC_REFUSALS: list[tuple[str, Callable[[dict[str, Any]], None], str, CauseType, str]] = [
    (
        "below minimum",
        _set("spec.initialSegments", 0),
        "spec.initialSegments",
        CauseType.INVALID,
        "Invalid value: 0: spec.initialSegments in body should be greater than or equal to 1",
    ),
    (
        "above maximum",
        _set("spec.initialSegments", 2000),
        "spec.initialSegments",
        CauseType.INVALID,
        "Invalid value: 2000: spec.initialSegments in body should be less than or equal to 1024",
    ),
    (
        "string for integer",
        _set("spec.initialSegments", "four"),
        "spec.initialSegments",
        CauseType.TYPE_INVALID,
        'Invalid value: "string": spec.initialSegments in body must be of type integer: "string"',
    ),
    (
        "boolean for integer",
        _set("spec.initialSegments", True),
        "spec.initialSegments",
        CauseType.TYPE_INVALID,
        'Invalid value: "boolean": spec.initialSegments in body must be of type integer: "boolean"',
    ),
    (
        "fraction for integer",
        _set("spec.initialSegments", 2.5),
        "spec.initialSegments",
        CauseType.TYPE_INVALID,
        'Invalid value: "number": spec.initialSegments in body must be of type integer: "number"',
    ),
    ("spec missing", _set("spec", DELETE), "spec", CauseType.REQUIRED, "Required value"),
    (
        "spec not an object",
        _set("spec", "big"),
        "spec",
        CauseType.TYPE_INVALID,
        'Invalid value: "string": spec in body must be of type object: "string"',
    ),
    (
        "subscription without name",
        _set("spec.subscriptions.0.name", DELETE),
        "spec.subscriptions[0].name",
        CauseType.REQUIRED,
        "Required value",
    ),
    (
        "empty subscription name",
        _set("spec.subscriptions.0.name", ""),
        "spec.subscriptions[0].name",
        CauseType.INVALID,
        'Invalid value: "": spec.subscriptions[0].name in body should be at least 1 chars long',
    ),
    (
        "long subscription name",
        _set("spec.subscriptions.1.name", "a" * 129),
        "spec.subscriptions[1].name",
        CauseType.TOO_LONG,
        "Too long: may not be more than 128 bytes",
    ),
    (
        "subscription name pattern",
        _set("spec.subscriptions.0.name", "-billing"),
        "spec.subscriptions[0].name",
        CauseType.INVALID,
        'Invalid value: "-billing": spec.subscriptions[0].name in body should match '
        "'^[A-Za-z0-9][A-Za-z0-9._-]*$'",
    ),
    (
        "subscription type enum",
        _set("spec.subscriptions.0.type", "Fanout"),
        "spec.subscriptions[0].type",
        CauseType.NOT_SUPPORTED,
        'Unsupported value: "Fanout": supported values: "Queue", "Stream", "Checkpoint"',
    ),
    (
        "more subscriptions than maxSubscriptionsPerTopic",
        _set("spec.subscriptions", [{"name": f"s{index}"} for index in range(1001)]),
        "spec.subscriptions",
        CauseType.TOO_MANY,
        "Too many: 1001: must have at most 1000 items",
    ),
    (
        "duplicate subscription",
        _set("spec.subscriptions.1.name", "billing"),
        "spec.subscriptions[1]",
        CauseType.DUPLICATE,
        'Duplicate value: {"name":"billing"}',
    ),
    (
        "subscriptions not a list",
        _set("spec.subscriptions", "billing"),
        "spec.subscriptions",
        CauseType.TYPE_INVALID,
        'Invalid value: "string": spec.subscriptions in body must be of type array: "string"',
    ),
    (
        "map value of the wrong type",
        _set("spec.properties.tier", 5),
        "spec.properties.tier",
        CauseType.TYPE_INVALID,
        'Invalid value: "integer": spec.properties.tier in body must be of type string: "integer"',
    ),
    (
        "autoScale bound below minimum",
        _set("spec.autoScale.minSegments", 0),
        "spec.autoScale.minSegments",
        CauseType.INVALID,
        "Invalid value: 0: spec.autoScale.minSegments in body should be greater than or equal to 1",
    ),
    (
        "autoScale bounds out of order (CEL)",
        _set("spec.autoScale.minSegments", 40),
        "spec.autoScale.minSegments",
        CauseType.INVALID,
        "Invalid value: minSegments must not exceed maxSegments",
    ),
    (
        "split threshold zero (CEL)",
        _set("spec.autoScale.splitThresholds.msgRateIn", 0),
        "spec.autoScale.splitThresholds.msgRateIn",
        CauseType.INVALID,
        "Invalid value: splitThresholds.msgRateIn must be greater than 0",
    ),
    (
        "split byte rate zero (CEL)",
        _set("spec.autoScale.splitThresholds.byteRateIn", 0.0),
        "spec.autoScale.splitThresholds.byteRateIn",
        CauseType.INVALID,
        "Invalid value: splitThresholds.byteRateIn must be greater than 0",
    ),
    (
        "split not above merge (CEL)",
        _set("spec.autoScale.mergeThresholds", {"msgRateIn": 5000.0}),
        "spec.autoScale.splitThresholds.msgRateIn",
        CauseType.INVALID,
        "Invalid value: splitThresholds.msgRateIn must be greater than mergeThresholds.msgRateIn",
    ),
    (
        "negative rate",
        _set("spec.autoScale.splitThresholds.msgRateOut", -1),
        "spec.autoScale.splitThresholds.msgRateOut",
        CauseType.INVALID,
        "Invalid value: -1: spec.autoScale.splitThresholds.msgRateOut in body should be greater "
        "than or equal to 0",
    ),
    (
        "boolean of the wrong type",
        _set("spec.autoScale.enabled", "yes"),
        "spec.autoScale.enabled",
        CauseType.TYPE_INVALID,
        'Invalid value: "string": spec.autoScale.enabled in body must be of type boolean: "string"',
    ),
    (
        "negative retention",
        _set("spec.retention.maxAgeSeconds", -5),
        "spec.retention.maxAgeSeconds",
        CauseType.INVALID,
        "Invalid value: -5: spec.retention.maxAgeSeconds in body should be greater than or equal to 0",
    ),
    (
        "status phase enum",
        _set("status.phase", "Weird"),
        "status.phase",
        CauseType.NOT_SUPPORTED,
        'Unsupported value: "Weird": supported values: "Pending", "Ready", "Scaling", "Deleting", '
        '"Failed"',
    ),
    (
        "segment range out of order (CEL in a list item)",
        _set("status.segments", [{**SEGMENT_STATUS, "hashRange": {"start": 9, "end": 3}}]),
        "status.segments[0].hashRange",
        CauseType.INVALID,
        "Invalid value: start must not exceed end",
    ),
    (
        "segment missing required fields",
        _set("status.segments", [{"id": 1}]),
        "status.segments[0].hashRange",
        CauseType.REQUIRED,
        "Required value",
    ),
    (
        "date-time format",
        _set("status.segments", [{**SEGMENT_STATUS, "createdAt": "yesterday"}]),
        "status.segments[0].createdAt",
        CauseType.TYPE_INVALID,
        'Invalid value: "yesterday": status.segments[0].createdAt in body must be of type '
        'date-time: "yesterday"',
    ),
    (
        "too many parents",
        _set(
            "status.pendingOperation",
            {
                "kind": "Merge",
                "baseEpoch": 1,
                "parentIds": [1, 2, 3],
                "children": [{"id": 4, "hashRange": {"start": 0, "end": 9}}],
            },
        ),
        "status.pendingOperation.parentIds",
        CauseType.TOO_MANY,
        "Too many: 3: must have at most 2 items",
    ),
    (
        "too few parents",
        _set(
            "status.pendingOperation",
            {
                "kind": "Split",
                "baseEpoch": 1,
                "parentIds": [],
                "children": [{"id": 4, "hashRange": {"start": 0, "end": 9}}],
            },
        ),
        "status.pendingOperation.parentIds",
        CauseType.INVALID,
        "Invalid value: 0: status.pendingOperation.parentIds in body should have at least 1 items",
    ),
    (
        "condition reason pattern",
        _set(
            "status.conditions",
            [
                {
                    "type": "Ready",
                    "status": "True",
                    "reason": "not ok",
                    "lastTransitionTime": "2024-05-01T10:00:00Z",
                }
            ],
        ),
        "status.conditions[0].reason",
        CauseType.INVALID,
        'Invalid value: "not ok": status.conditions[0].reason in body should match '
        "'^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$'",
    ),
    (
        "wrong kind",
        _set("kind", "Topic"),
        "kind",
        CauseType.INVALID,
        'Invalid value: "Topic": must be ScalableTopic',
    ),
    (
        "wrong apiVersion",
        _set("apiVersion", "scalabletopics.dev/v1"),
        "apiVersion",
        CauseType.INVALID,
        'Invalid value: "scalabletopics.dev/v1": must be scalabletopics.dev/v1alpha1',
    ),
]


@pytest.mark.parametrize(
    ("change", "field", "reason", "message"),
    [case[1:] for case in TOPIC_REFUSALS],
    ids=[case[0] for case in TOPIC_REFUSALS],
)
def test_invalid_topics_are_refused_naming_the_field(
    change: Callable[[dict[str, Any]], None],
    field: str,
    reason: CauseType,
    message: str,
) -> None:
    example_topic = load_example()
    change(example_topic)
    error = refuse_topic(example_topic)
    assert error.code == 422
    assert error.status()["reason"] == "Invalid"
    assert (error.causes[0].field, error.causes[0].reason, error.causes[0].message) == (
        field,
        reason,
        message,
    )
    assert error.message.startswith('ScalableTopic.scalabletopics.dev "orders" is invalid: ')


def test_a_fraction_for_an_integer_also_fails_the_range_check() -> None:
    example_topic = load_example()
    example_topic["spec"]["initialSegments"] = 2.5
    error = refuse_topic(example_topic)
    assert [c.describe() for c in error.causes[1:]] == [
        '<nil>: Invalid value: "": Checked value must be of type integer (default format) in '
        "spec.initialSegments",
        f"<nil>: {RULES_NOT_CHECKED}",
    ]


def test_blocking_errors_skip_cel_rules_with_a_note() -> None:
    example_topic = load_example()
    example_topic["spec"]["autoScale"]["minSegments"] = 40  # breaks a rule ...
    example_topic["spec"]["subscriptions"][0]["type"] = "Fanout"  # ... that is not evaluated
    error = refuse_topic(example_topic)
    assert [c.field for c in error.causes] == ["spec.subscriptions[0].type", "<nil>"]
    assert error.causes[1].message == RULES_NOT_CHECKED
    assert error.message == (
        'ScalableTopic.scalabletopics.dev "orders" is invalid: [spec.subscriptions[0].type: '
        'Unsupported value: "Fanout": supported values: "Queue", "Stream", "Checkpoint", <nil>: '
        f"{RULES_NOT_CHECKED}]"
    )


def test_non_blocking_errors_still_evaluate_cel_rules() -> None:
    example_topic = load_example()
    example_topic["spec"]["autoScale"]["splitThresholds"]["msgRateIn"] = -1
    error = refuse_topic(example_topic)
    assert [c.describe() for c in error.causes] == [
        "spec.autoScale.splitThresholds.msgRateIn: Invalid value: -1: "
        "spec.autoScale.splitThresholds.msgRateIn in body should be greater than or equal to 0",
        "spec.autoScale.splitThresholds.msgRateIn: Invalid value: "
        "splitThresholds.msgRateIn must be greater than 0",
    ]


def test_unknown_fields_strict_is_a_bad_request() -> None:
    example_topic = load_example()
    example_topic["spec"]["replicas"] = 3
    example_topic["spec"]["subscriptions"][1]["color"] = "red"
    example_topic["spec"]["autoScale"]["bogus"] = True
    error = refuse_topic(example_topic)
    assert error.code == 400
    assert error.status()["reason"] == "BadRequest"
    assert error.message == (
        'ScalableTopic in version "v1alpha1" cannot be handled as a ScalableTopic: strict decoding '
        'error: unknown field "spec.autoScale.bogus", unknown field "spec.replicas", unknown field '
        '"spec.subscriptions[1].color"'
    )


def test_unknown_fields_warn_drops_them_with_a_warning_each() -> None:
    example_topic = load_example()
    example_topic["spec"]["replicas"] = 3
    example_topic["spec"]["subscriptions"][1]["color"] = "red"
    admitted = admit_topic(example_topic, validation=FieldValidation.WARN)
    assert admitted.warnings == (
        'unknown field "spec.replicas"',
        'unknown field "spec.subscriptions[1].color"',
    )
    assert "replicas" not in admitted.object["spec"]
    assert admitted.object["spec"]["subscriptions"][1] == {"name": "audit", "type": "Queue"}


def test_an_object_where_a_list_belongs_is_pruned_first() -> None:
    example_topic = load_example()
    example_topic["spec"]["subscriptions"] = {"name": "billing"}
    with pytest.raises(ApiError) as raised:
        admit_topic(example_topic, validation=FieldValidation.WARN)
    assert raised.value.causes[0].describe() == (
        'spec.subscriptions: Invalid value: "object": spec.subscriptions in body must be of type '
        'array: "object"'
    )
    assert refuse_topic(example_topic).message.endswith('unknown field "spec.subscriptions.name"')


def test_unknown_fields_ignore_drops_them_silently() -> None:
    example_topic = load_example()
    example_topic["spec"]["replicas"] = 3
    example_topic["metadata"]["labels"] = {"app": "orders"}  # metadata is the server's
    admitted = admit_topic(example_topic, validation=FieldValidation.IGNORE)
    assert admitted.warnings == ()
    assert "replicas" not in admitted.object["spec"]
    assert admitted.object["metadata"]["labels"] == {"app": "orders"}


def test_unknown_fields_in_a_patch_are_invalid_on_the_patch() -> None:
    example_topic = load_example()
    example_topic["spec"]["replicas"] = 3
    with pytest.raises(ApiError) as raised:
        admit(
            TOPIC_SCHEMA,
            example_topic,
            None,
            field_validation=FieldValidation.STRICT,
            kind="ScalableTopic",
            name="orders",
            group="scalabletopics.dev",
            patched='{"spec":{"replicas":3}}',
        )
    assert raised.value.code == 422
    assert raised.value.message == (
        ' "" is invalid: patch: Invalid value: "{\\"spec\\":{\\"replicas\\":3}}": strict decoding '
        'error: unknown field "spec.replicas"'
    )


def test_field_validation_parameter() -> None:
    assert parse_field_validation(None) is FieldValidation.WARN
    assert parse_field_validation("Strict") is FieldValidation.STRICT
    with pytest.raises(ApiError) as raised:
        parse_field_validation("Loud", "UpdateOptions")
    assert raised.value.message == (
        'UpdateOptions.meta.k8s.io "" is invalid: fieldValidation: Unsupported value: "Loud": '
        'supported values: "", "Ignore", "Strict", "Warn"'
    )


def test_initial_segments_are_immutable() -> None:
    example_topic = load_example()
    stored = admit_topic(example_topic).object
    update = copy.deepcopy(stored)
    update["spec"]["initialSegments"] = 8
    error = refuse_topic(update, stored)
    assert [c.describe() for c in error.causes] == [
        "spec: Invalid value: initialSegments is immutable"
    ]
    update["spec"]["initialSegments"] = 4
    update["spec"]["retention"]["maxAgeSeconds"] = 60
    assert admit_topic(update, stored).object["spec"]["retention"] == {"maxAgeSeconds": 60}


def test_the_transition_rule_sees_the_defaulted_old_object() -> None:
    example_topic = load_example()
    del example_topic["spec"]["initialSegments"]
    stored = copy.deepcopy(example_topic)  # stored before initialSegments had a default
    update = copy.deepcopy(example_topic)
    assert admit_topic(update, stored).object["spec"]["initialSegments"] == 1
    update["spec"]["initialSegments"] = 2
    assert (
        refuse_topic(update, stored).causes[0].message
        == "Invalid value: initialSegments is immutable"
    )


def test_unchanged_invalid_values_are_ratcheted() -> None:
    example_topic = load_example()
    stored = copy.deepcopy(example_topic)
    stored["spec"]["retention"]["maxAgeSeconds"] = -1  # stored before the minimum existed
    stored["spec"]["autoScale"]["minSegments"] = 40  # ... and before the rule existed
    update = copy.deepcopy(stored)
    update["spec"]["subscriptions"].append({"name": "search"})
    admitted = admit_topic(update, stored)
    assert admitted.warnings == (
        "spec.autoScale.minSegments: Invalid value: minSegments must not exceed maxSegments",
    )
    update["spec"]["retention"]["maxAgeSeconds"] = -2  # a changed value is validated again
    error = refuse_topic(update, stored)
    assert [c.field for c in error.causes] == ["spec.retention.maxAgeSeconds"]


def test_segment_spec_is_immutable_and_its_rules_hold() -> None:
    stored = admit_segment(segment()).object
    moved = copy.deepcopy(stored)
    moved["spec"]["segmentId"] = 4
    with pytest.raises(ApiError) as raised:
        admit_segment(moved, stored)
    assert [c.describe() for c in raised.value.causes] == [
        "spec: Invalid value: a Segment's spec is immutable"
    ]
    status_only = copy.deepcopy(stored)
    status_only["status"] = {"state": "Active", "load": {"msgRateIn": 5}}
    admitted = admit_segment(status_only, stored).object
    assert admitted["status"]["load"] == {
        "msgRateIn": 5,
        "msgRateOut": 0.0,
        "byteRateIn": 0.0,
        "byteRateOut": 0.0,
    }


SEGMENT_REFUSALS: list[tuple[str, dict[str, Any], str, CauseType, str]] = [
    (
        "topic pattern",
        segment(topic="Orders_1"),
        "spec.topic",
        CauseType.INVALID,
        'Invalid value: "Orders_1": spec.topic in body should match '
        "'^[a-z0-9]([-a-z0-9]*[a-z0-9])?$'",
    ),
    (
        "negative id",
        segment(segmentId=-1),
        "spec.segmentId",
        CauseType.INVALID,
        "Invalid value: -1: spec.segmentId in body should be greater than or equal to 0",
    ),
    (
        "range beyond the hash space",
        segment(hashRange={"start": 0, "end": 70000}),
        "spec.hashRange.end",
        CauseType.INVALID,
        "Invalid value: 70000: spec.hashRange.end in body should be less than or equal to 65535",
    ),
    (
        "range out of order",
        segment(hashRange={"start": 10, "end": 2}),
        "spec.hashRange",
        CauseType.INVALID,
        "Invalid value: start must not exceed end",
    ),
    (
        "three parents",
        segment(parents=[1, 2, 3]),
        "spec.parents",
        CauseType.TOO_MANY,
        "Too many: 3: must have at most 2 items",
    ),
    (
        "map value format",
        {**segment(), "status": {"drained": {"audit-log": "soon"}}},
        "status.drained.audit-log",
        CauseType.TYPE_INVALID,
        'Invalid value: "soon": status.drained.audit-log in body must be of type date-time: "soon"',
    ),
    (
        "missing topic",
        {**segment(), "spec": {"segmentId": 1, "hashRange": {"start": 0, "end": 1}}},
        "spec.topic",
        CauseType.REQUIRED,
        "Required value",
    ),
]


@pytest.mark.parametrize(
    ("obj", "field", "reason", "message"),
    [case[1:] for case in SEGMENT_REFUSALS],
    ids=[case[0] for case in SEGMENT_REFUSALS],
)
def test_invalid_segments_are_refused_naming_the_field(
    obj: dict[str, Any], field: str, reason: CauseType, message: str
) -> None:
    with pytest.raises(ApiError) as raised:
        admit_segment(obj)
    first = raised.value.causes[0]
    assert (first.field, first.reason, first.message) == (field, reason, message)


def test_the_project_crds_rules_compile() -> None:
    assert check_crd(crd("scalabletopics.dev_scalabletopics.yaml")) == []
    assert check_crd(crd("scalabletopics.dev_segments.yaml")) == []


def test_stored_objects_read_back_pruned_and_defaulted() -> None:
    stored = segment()
    stored["spec"]["legacy"] = True
    stored["status"] = {"load": {}}
    read = normalize(SEGMENT_SCHEMA, stored)
    assert "legacy" not in read["spec"]
    assert read["status"]["load"]["msgRateIn"] == 0.0


def test_status_updates_check_the_status_schema_as_its_own_document() -> None:
    stored = admit_topic(load_example()).object
    update = copy.deepcopy(stored)
    update["status"] = {"epoch": -1, "phase": "Ready", "segments": [{"id": 0}]}
    with pytest.raises(ApiError) as raised:
        admit(
            TOPIC_SCHEMA,
            update,
            stored,
            field_validation=FieldValidation.STRICT,
            kind="ScalableTopic",
            name="orders",
            group="scalabletopics.dev",
            version="v1alpha1",
            status_subresource=True,
        )
    described = [c.describe() for c in raised.value.causes]
    assert (
        described[0]
        == "status.epoch: Invalid value: -1: epoch in body should be greater than or equal to 0"
    )
    assert "status.segments[0].hashRange: Required value" in described
    assert described[-1] == f"<nil>: {RULES_NOT_CHECKED}"


def test_admit_resource_reads_the_resource_type() -> None:
    topics = ResourceType(
        group="scalabletopics.dev",
        version="v1alpha1",
        kind="ScalableTopic",
        plural="scalabletopics",
        singular="scalabletopic",
        namespaced=True,
        schema=TOPIC_SCHEMA,
    )
    example = load_example()
    example["spec"]["replicas"] = 1
    admitted = admit_resource(
        topics, example, None, field_validation=FieldValidation.WARN, name="orders"
    )
    assert admitted.warnings == ('unknown field "spec.replicas"',)
    example["apiVersion"] = "scalabletopics.dev/v1"
    with pytest.raises(ApiError) as raised:
        admit_resource(topics, example, None, field_validation="Ignore", name="orders")  # type: ignore[arg-type]
    assert raised.value.causes[0].describe() == (
        'apiVersion: Invalid value: "scalabletopics.dev/v1": must be scalabletopics.dev/v1alpha1'
    )
