"""Built-in kinds: what the API server refuses to decode (400) and what it finds invalid (422)."""

from __future__ import annotations

from typing import Any

import pytest
from kubeapi_crds import resource_types

from scalable_topics.kubeapi import builtins, gotime
from scalable_topics.kubeapi.status import ApiError

MICRO = "2026-05-01T10:00:00.123456Z"


def lease(**spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {"name": "l", "namespace": "default"},
        "spec": {"holderIdentity": "me", "leaseDurationSeconds": 15, "renewTime": MICRO, **spec},
    }


def core_event(**fields: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": "e", "namespace": "default"},
        "involvedObject": {"kind": "Lease", "name": "l", "namespace": "default"},
        "reason": "Renewed",
        **fields,
    }


def new_event(**fields: Any) -> dict[str, Any]:
    return {
        "apiVersion": "events.k8s.io/v1",
        "kind": "Event",
        "metadata": {"name": "e", "namespace": "default"},
        "eventTime": MICRO,
        "regarding": {"kind": "Lease", "name": "l", "namespace": "default"},
        "reportingController": "scalabletopics.dev/controller",
        "reportingInstance": "controller-0",
        "action": "Renew",
        "reason": "Renewed",
        "type": "Normal",
        **fields,
    }


def messages(resource: Any, obj: dict[str, Any], old: dict[str, Any] | None = None) -> list[str]:
    return [c.describe() for c in builtins.admission_causes(resource, obj, old)]


def test_the_builtin_kinds() -> None:
    assert [(r.api_version, r.plural, r.short_names) for r in builtins.BUILTIN_RESOURCES] == [
        ("v1", "namespaces", ("ns",)),
        ("v1", "events", ("ev",)),
        ("events.k8s.io/v1", "events", ("ev",)),
        ("coordination.k8s.io/v1", "leases", ()),
        ("v1", "configmaps", ("cm",)),
        ("apiextensions.k8s.io/v1", "customresourcedefinitions", ("crd", "crds")),
    ]
    assert builtins.EVENTS_V1_EVENT.stored_as == "Event"
    assert not builtins.NAMESPACE.namespaced and builtins.NAMESPACE.status_subresource
    assert builtins.is_builtin(builtins.LEASE)
    assert not any(
        builtins.is_builtin(r) for r in resource_types() if r.group == "scalabletopics.dev"
    )
    conversion = builtins.conversions()[("events.k8s.io/v1", "Event")]
    assert conversion.to_storage(new_event())["involvedObject"]["kind"] == "Lease"
    assert builtins.namespace_object("default")["status"] == {"phase": "Active"}


@pytest.mark.parametrize(
    ("renew", "error"),
    [
        (MICRO, None),
        ("2026-05-01T10:00:00.123456+02:00", None),
        (
            "2026-05-01T10:00:00Z",
            'parsing time "2026-05-01T10:00:00Z" as "2006-01-02T15:04:05.000000Z07:00": '
            'cannot parse "Z" as ".000000"',
        ),
        (
            "2026-05-01T10:00:00.123Z",
            'parsing time "2026-05-01T10:00:00.123Z" as "2006-01-02T15:04:05.000000Z07:00": '
            'cannot parse ".123Z" as ".000000"',
        ),
        (
            "2026-05-01T10:00:00.123456789Z",
            'parsing time "2026-05-01T10:00:00.123456789Z" as "2006-01-02T15:04:05.000000Z07:00": '
            'cannot parse "789Z" as "Z07:00"',
        ),
        (
            "2026-05-01 10:00:00.123456Z",
            'parsing time "2026-05-01 10:00:00.123456Z" as "2006-01-02T15:04:05.000000Z07:00": '
            'cannot parse " 10:00:00.123456Z" as "T"',
        ),
        (
            "2026-02-30T10:00:00.123456Z",
            'parsing time "2026-02-30T10:00:00.123456Z": day out of range',
        ),
        (
            "2026-05-01T25:00:00.123456Z",
            'parsing time "2026-05-01T25:00:00.123456Z": hour out of range',
        ),
    ],
)
def test_micro_times_need_exactly_six_fractional_digits(renew: str, error: str | None) -> None:
    assert gotime.micro_time_error(renew) == error
    failure = builtins.decode_failure(builtins.LEASE, lease(renewTime=renew))
    if error is None:
        assert failure is None
    else:
        assert failure is not None and failure.code == 400
        assert failure.status()["reason"] == "BadRequest"
        assert failure.message == f'Lease in version "v1" cannot be handled as a Lease: {error}'


def test_every_micro_time_field() -> None:
    for resource, obj in (
        (builtins.LEASE, lease(acquireTime="2026-05-01T10:00:00Z")),
        (builtins.EVENTS_V1_EVENT, new_event(eventTime="2026-05-01T10:00:00.5Z")),
        (builtins.EVENT, core_event(eventTime="2026-05-01T10:00:00Z")),
        (
            builtins.EVENT,
            core_event(series={"count": 2, "lastObservedTime": "2026-05-01T10:00:00Z"}),
        ),
    ):
        with pytest.raises(ApiError) as raised:
            builtins.admission_causes(resource, obj, None)
        assert raised.value.code == 400
        assert "cannot be handled as a Event" in raised.value.message or resource is builtins.LEASE


def test_times_are_rfc3339_with_any_fraction() -> None:
    assert (
        builtins.decode_error(builtins.EVENT, core_event(lastTimestamp="2026-05-01T10:00:00.5Z"))
        is None
    )
    assert builtins.decode_error(builtins.EVENT, core_event(lastTimestamp="2026-05-01")) == (
        'parsing time "2026-05-01" as "2006-01-02T15:04:05Z07:00": cannot parse "" as "T"'
    )


@pytest.mark.parametrize(
    ("obj", "error"),
    [
        (
            lease(leaseDurationSeconds="15"),
            "json: cannot unmarshal string into Go struct field LeaseSpec.spec.leaseDurationSeconds of type int32",
        ),
        (
            lease(leaseDurationSeconds=2**31),
            "json: cannot unmarshal number 2147483648 into Go struct field LeaseSpec.spec.leaseDurationSeconds "
            "of type int32",
        ),
        (
            lease(leaseDurationSeconds=1.5),
            "json: cannot unmarshal number 1.5 into Go struct field LeaseSpec.spec.leaseDurationSeconds of type int32",
        ),
        (
            lease(holderIdentity=7),
            "json: cannot unmarshal number into Go struct field LeaseSpec.spec.holderIdentity of type string",
        ),
        (
            {**lease(), "spec": "x"},
            "json: cannot unmarshal string into Go struct field Lease.spec of type v1.LeaseSpec",
        ),
        (
            lease(renewTime=5),
            "json: cannot unmarshal number into Go value of type string",
        ),
        (
            core_event(count="3"),
            "json: cannot unmarshal string into Go struct field Event.count of type int32",
        ),
        (
            core_event(involvedObject={"kind": 1}),
            "json: cannot unmarshal number into Go struct field ObjectReference.involvedObject.kind of type string",
        ),
    ],
)
def test_wrong_json_types_do_not_decode(obj: dict[str, Any], error: str) -> None:
    resource = builtins.LEASE if obj["kind"] == "Lease" else builtins.EVENT
    assert builtins.decode_error(resource, obj) == error


def test_a_bad_time_wins_over_an_earlier_type_error() -> None:
    obj = lease(holderIdentity=1, renewTime="2026-05-01T10:00:00Z")
    assert builtins.decode_error(builtins.LEASE, obj) == (
        'parsing time "2026-05-01T10:00:00Z" as "2006-01-02T15:04:05.000000Z07:00": cannot parse "Z" as ".000000"'
    )


def test_lease_validation() -> None:
    assert messages(builtins.LEASE, lease()) == []
    assert messages(builtins.LEASE, lease(leaseDurationSeconds=0, leaseTransitions=-1)) == [
        "spec.leaseDurationSeconds: Invalid value: 0: must be greater than 0",
        "spec.leaseTransitions: Invalid value: -1: must be greater than or equal to 0",
    ]
    assert messages(builtins.LEASE, lease(preferredHolder="you")) == [
        "spec.preferredHolder: Forbidden: may only be specified if `strategy` is defined"
    ]
    assert messages(builtins.LEASE, lease(strategy="Newest")) == [
        'spec.strategy.strategy: Unsupported value: "Newest": supported values: "OldestEmulationVersion"'
    ]


def config_map(**fields: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "c", "namespace": "default"},
        **fields,
    }


def test_config_map_validation() -> None:
    assert messages(builtins.CONFIG_MAP, config_map(data={"autoscale.yaml": "x: 1"})) == []
    found = messages(
        builtins.CONFIG_MAP,
        config_map(data={"bad key": "", "..": "", "k": ""}, binaryData={"k": "AA=="}),
    )
    assert [m.split(":")[0] for m in found] == ["data[bad key]", "data[..]", "binaryData[k]"]
    assert "a valid config key must consist of alphanumeric characters" in found[0]
    assert found[2] == 'binaryData[k]: Invalid value: "k": duplicate of key present in data'
    assert messages(builtins.CONFIG_MAP, config_map(data={"k" * 254: ""}))[0] == (
        f"data[{'k' * 254}]: Too long: may not be more than 253 bytes"
    )
    assert messages(builtins.CONFIG_MAP, config_map(data={"big": "x" * 1024 * 1024})) == [
        "[]: Too long: may not be more than 1048576 bytes"
    ]
    frozen = config_map(data={"k": "1"}, immutable=True)
    assert messages(builtins.CONFIG_MAP, config_map(data={"k": "2"}, immutable=True), frozen) == [
        "data: Forbidden: field is immutable when `immutable` is set"
    ]
    assert messages(builtins.CONFIG_MAP, config_map(data={"k": "1"}), frozen) == [
        "immutable: Forbidden: field is immutable when `immutable` is set"
    ]
    assert messages(builtins.CONFIG_MAP, config_map(data={"k": "2"}), config_map()) == []
    assert builtins.decode_error(builtins.CONFIG_MAP, config_map(data={"k": 1})) is not None


def test_core_event_validation() -> None:
    assert messages(builtins.EVENT, core_event()) == []
    moved = core_event()
    moved["involvedObject"]["namespace"] = "other"
    assert messages(builtins.EVENT, moved) == [
        'involvedObject.namespace: Invalid value: "other": does not match event.namespace'
    ]
    found = messages(builtins.EVENT, core_event(eventTime=MICRO))
    assert found[:2] == [
        "reportingController: Required value",
        'reportingController: Invalid value: "": name part must be non-empty',
    ]
    assert found[2].startswith('reportingController: Invalid value: "": name part must consist of')
    assert found[3:] == ["reportingInstance: Required value", "action: Required value"]


def test_events_v1_validation() -> None:
    assert messages(builtins.EVENTS_V1_EVENT, new_event()) == []
    assert messages(
        builtins.EVENTS_V1_EVENT,
        new_event(type="Info", deprecatedCount=2, series={"count": 1, "lastObservedTime": MICRO}),
    ) == [
        'series.count: Invalid value: "": should be at least 2',
        'type: Invalid value: "": has invalid value: Info',
        'count: Invalid value: "": needs to be unset',
    ]
    old = new_event()
    assert messages(builtins.EVENTS_V1_EVENT, new_event(note="changed"), old) == [
        'message: Invalid value: "changed": field is immutable'
    ]


def test_namespace_finalizers() -> None:
    namespace = builtins.namespace_object("team-a")
    namespace["spec"]["finalizers"] = ["kubernetes", "example.com/cleanup", "cleanup"]
    assert messages(builtins.NAMESPACE, namespace) == [
        'spec.finalizers: Invalid value: "cleanup": name is neither a standard finalizer name nor is it '
        "fully qualified"
    ]


def test_crd_admission_is_crd_validation() -> None:
    crd = {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "x.example.com"},
        "spec": {
            "group": "example.com",
            "names": {"plural": "widgets", "kind": "Widget"},
            "scope": "Namespaced",
        },
    }
    found = messages(builtins.CUSTOM_RESOURCE_DEFINITION, crd)
    assert (
        found[0]
        == 'metadata.name: Invalid value: "x.example.com": must be spec.names.plural+"."+spec.group'
    )
    assert messages(builtins.NAMESPACE, {"metadata": {}}) == []
