"""meta.k8s.io Tables, PartialObjectMetadata, and the Accept negotiation asking for them."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from scalable_topics.kubeapi import ages, builtins, tables
from scalable_topics.kubeapi.resources import ResourceType
from scalable_topics.kubeapi.status import ApiError
from scalable_topics.kubeapi.tables import IncludeObject, Target

NOW = datetime(2026, 5, 1, 12, 0, 0, tzinfo=UTC)
KUBECTL_GET = (
    "application/json;as=Table;v=v1;g=meta.k8s.io,"
    "application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json"
)

WIDGET = ResourceType(
    group="example.com",
    version="v1",
    kind="Widget",
    plural="widgets",
    singular="widget",
    namespaced=True,
    printer_columns=(
        {"name": "Size", "type": "integer", "jsonPath": ".spec.size"},
        {"name": "Ratio", "type": "number", "jsonPath": ".spec.ratio", "priority": 1},
        {"name": "On", "type": "boolean", "jsonPath": ".spec.on"},
        {"name": "Owner", "type": "string", "jsonPath": ".spec.owner", "description": "who"},
        {
            "name": "Ready",
            "type": "string",
            "jsonPath": '.status.conditions[?(@.type=="Ready")].status',
        },
        {"name": "Since", "type": "date", "jsonPath": ".status.since"},
    ),
)
BARE = ResourceType(
    group="example.com",
    version="v1",
    kind="Bare",
    plural="bares",
    singular="bare",
    namespaced=False,
)


def widget(**spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "example.com/v1",
        "kind": "Widget",
        "metadata": {
            "name": "w",
            "namespace": "default",
            "resourceVersion": "7",
            "creationTimestamp": "2026-05-01T11:00:00Z",
        },
        "spec": spec,
        "status": {
            "conditions": [{"type": "Ready", "status": "True"}],
            "since": "2026-04-29T12:00:00Z",
        },
    }


# -- negotiation --------------------------------------------------------------------------------


def test_kubectl_get_asks_for_a_v1_table() -> None:
    wanted = tables.negotiate(KUBECTL_GET)
    assert wanted.table and wanted.target is Target.TABLE
    assert (wanted.media_type, wanted.group_version) == ("application/json", "meta.k8s.io/v1")
    assert wanted.include_object is IncludeObject.METADATA


@pytest.mark.parametrize(
    ("accept", "target", "media_type"),
    [
        (None, Target.OBJECT, "application/json"),
        ("", Target.OBJECT, "application/json"),
        ("*/*", Target.OBJECT, "application/json"),
        ("application/json", Target.OBJECT, "application/json"),
        ("application/yaml", Target.OBJECT, "application/yaml"),
        ("application/vnd.kubernetes.protobuf,application/json", Target.OBJECT, "application/json"),
        ("application/json;as=Table;v=v1beta1;g=meta.k8s.io", Target.TABLE, "application/json"),
        ("application/yaml;as=Table;v=v1;g=meta.k8s.io", Target.TABLE, "application/yaml"),
        (
            "application/vnd.kubernetes.protobuf;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,"
            "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json",
            Target.PARTIAL_OBJECT_METADATA_LIST,
            "application/json",
        ),
        (
            "application/json;as=Table;v=v2;g=meta.k8s.io,application/json",
            Target.OBJECT,
            "application/json",
        ),
        ("application/json;q=0.5,application/yaml", Target.OBJECT, "application/yaml"),
    ],
)
def test_negotiate(accept: str | None, target: Target, media_type: str) -> None:
    wanted = tables.negotiate(accept)
    assert (wanted.target, wanted.media_type) == (target, media_type)


@pytest.mark.parametrize(
    "accept",
    ["application/vnd.kubernetes.protobuf", "text/html", "application/json;as=Table;v=v1;g=apps"],
)
def test_unservable_accept_is_406(accept: str) -> None:
    with pytest.raises(ApiError) as raised:
        tables.negotiate(accept)
    assert raised.value.code == 406
    assert raised.value.status()["reason"] == "NotAcceptable"
    assert raised.value.message == (
        "only the following media types are accepted: application/json, application/yaml"
    )


def test_include_object() -> None:
    assert (
        tables.negotiate(KUBECTL_GET, {"includeObject": "Object"}).include_object
        is IncludeObject.OBJECT
    )
    assert (
        tables.negotiate(KUBECTL_GET, {"includeObject": "None"}).include_object
        is IncludeObject.NONE
    )
    with pytest.raises(ApiError) as raised:
        tables.negotiate(KUBECTL_GET, {"includeObject": "All"})
    assert (raised.value.code, raised.value.message) == (
        400,
        'unrecognized includeObject value: "All"',
    )


# -- tables -------------------------------------------------------------------------------------


def test_column_definitions() -> None:
    definitions = tables.column_definitions(WIDGET)
    assert [d["name"] for d in definitions] == [
        "Name",
        "Size",
        "Ratio",
        "On",
        "Owner",
        "Ready",
        "Since",
    ]
    assert definitions[0] == {
        "name": "Name",
        "type": "string",
        "format": "name",
        "description": tables.NAME_DESCRIPTION,
        "priority": 0,
    }
    assert definitions[2]["priority"] == 1
    assert definitions[4]["description"] == "who"
    assert definitions[1]["description"] == (
        "Custom resource definition column (in JSONPath format): .spec.size"
    )


def test_a_kind_without_columns_gets_name_and_age() -> None:
    assert [(d["name"], d["type"]) for d in tables.column_definitions(BARE)] == [
        ("Name", "string"),
        ("Age", "date"),
    ]
    obj = {"metadata": {"name": "b", "creationTimestamp": "2026-05-01T11:58:30Z"}}
    assert tables.cells(BARE, obj, NOW) == ["b", "90s"]


def test_cells_are_typed_as_the_api_server_types_them() -> None:
    obj = widget(size=3.7, ratio=2, on=True, owner=12)
    assert tables.cells(WIDGET, obj, NOW) == ["w", 3, 2.0, True, "12", "True", "2d"]


def test_missing_values_are_null_cells() -> None:
    obj = widget(size="big", on="yes")
    del obj["status"]
    assert tables.cells(WIDGET, obj, NOW) == ["w", None, None, None, None, None, None]


def test_a_null_in_a_string_column_reads_no_value() -> None:
    assert tables.cells(WIDGET, widget(owner=None), NOW)[4] == "<no value>"


@pytest.mark.parametrize(
    ("since", "cell"),
    [
        ("2026-05-01T11:59:50.123456Z", "9s"),
        ("yesterday", "<invalid>"),
        ("", "<unknown>"),
        (5, None),
    ],
)
def test_date_cells(since: Any, cell: Any) -> None:
    obj = widget()
    obj["status"]["since"] = since
    assert tables.cells(WIDGET, obj, NOW)[6] == cell


def test_object_table() -> None:
    table = tables.object_table(WIDGET, widget(size=1), now=NOW)
    assert table["kind"] == "Table" and table["apiVersion"] == "meta.k8s.io/v1"
    assert table["metadata"] == {"resourceVersion": "7"}
    [row] = table["rows"]
    assert row["object"] == {
        "kind": "PartialObjectMetadata",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": widget()["metadata"],
    }


def test_list_table_and_include_object() -> None:
    items = [widget(size=1), widget(size=2)]
    metadata = {"resourceVersion": "9", "continue": "abc", "remainingItemCount": 4, "selfLink": "x"}
    table = tables.list_table(WIDGET, items, metadata, IncludeObject.OBJECT, now=NOW)
    assert table["metadata"] == {"resourceVersion": "9", "continue": "abc", "remainingItemCount": 4}
    assert [r["object"] for r in table["rows"]] == items
    none = tables.list_table(WIDGET, items, {"resourceVersion": "9"}, IncludeObject.NONE, now=NOW)
    assert [r["object"] for r in none["rows"]] == [None, None]
    beta = tables.list_table(WIDGET, [], {}, group_version="meta.k8s.io/v1beta1", now=NOW)
    assert beta["apiVersion"] == "meta.k8s.io/v1beta1" and beta["rows"] == []


def test_watch_tables_send_headers_once_and_pass_statuses() -> None:
    transform = tables.WatchTransform(WIDGET, tables.negotiate(KUBECTL_GET))
    first = transform(widget(size=1), now=NOW)
    second = transform(widget(size=2), now=NOW)
    assert first["kind"] == "Table" and len(first["columnDefinitions"]) == 7
    assert second["columnDefinitions"] is None
    assert [r["cells"][1] for r in (*first["rows"], *second["rows"])] == [1, 2]
    gone = {
        "kind": "Status",
        "apiVersion": "v1",
        "status": "Failure",
        "code": 410,
        "reason": "Expired",
    }
    assert transform(gone) == gone
    assert tables.watch_table(WIDGET, gone) == gone


def test_partial_object_metadata() -> None:
    listed = tables.partial_object_metadata_list([widget()], {"resourceVersion": "3"})
    assert listed["kind"] == "PartialObjectMetadataList"
    assert listed["items"][0]["kind"] == "PartialObjectMetadata"
    wanted = tables.negotiate("application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1")
    with pytest.raises(ApiError) as raised:
        tables.check_list_target(wanted, is_list=True)
    assert raised.value.code == 406


# -- built-in kinds -----------------------------------------------------------------------------


def test_event_rows_as_kubectl_get_events_shows_them() -> None:
    event = {
        "metadata": {"name": "orders.1", "namespace": "default"},
        "involvedObject": {"kind": "ScalableTopic", "name": "orders", "fieldPath": "spec"},
        "reason": "Split",
        "message": " split \n",
        "type": "Normal",
        "source": {"component": "controller", "host": "node-1"},
        "firstTimestamp": "2026-05-01T11:00:00Z",
        "lastTimestamp": "2026-05-01T11:59:00Z",
        "count": 4,
    }
    assert [d["name"] for d in tables.column_definitions(builtins.EVENT)][:5] == [
        "Last Seen",
        "Type",
        "Reason",
        "Object",
        "Subobject",
    ]
    assert tables.cells(builtins.EVENT, event, NOW) == [
        "60s",
        "Normal",
        "Split",
        "scalabletopic/orders",
        "spec",
        "controller, node-1",
        "split",
        "60m",
        4,
        "orders.1",
    ]


def test_new_style_events_show_their_event_time_and_series() -> None:
    event = {
        "metadata": {"name": "e"},
        "eventTime": "2026-05-01T11:59:30.000000Z",
        "regarding": {"kind": "Lease"},
        "reportingController": "ctl",
        "reportingInstance": "ctl-0",
        "type": "Warning",
        "note": "n",
    }
    cells = tables.cells(builtins.EVENTS_V1_EVENT, event, NOW)
    assert cells == ["30s", "Warning", "", "lease", "", "ctl, ctl-0", "n", "30s", 1, "e"]
    event["series"] = {"count": 5, "lastObservedTime": "2026-05-01T11:59:58.000000Z"}
    assert tables.cells(builtins.EVENTS_V1_EVENT, event, NOW)[0] == "2s"
    assert tables.cells(builtins.EVENTS_V1_EVENT, event, NOW)[8] == 5


def test_builtin_tables() -> None:
    namespace = {
        "metadata": {"name": "default", "creationTimestamp": "2026-04-28T12:00:00Z"},
        "status": {"phase": "Active"},
    }
    assert tables.cells(builtins.NAMESPACE, namespace, NOW) == ["default", "Active", "3d"]
    lease = {"metadata": {"name": "l"}, "spec": {"holderIdentity": "me"}}
    assert tables.cells(builtins.LEASE, lease, NOW) == ["l", "me", "<unknown>"]
    crd = {"metadata": {"name": "a.b.c", "creationTimestamp": "2026-04-28T12:00:00.5+02:00"}}
    assert tables.cells(builtins.CUSTOM_RESOURCE_DEFINITION, crd, NOW) == [
        "a.b.c",
        "2026-04-28T10:00:00Z",
    ]


@pytest.mark.parametrize(
    ("seconds", "shown"),
    [
        (-3, "<invalid>"),
        (-1, "0s"),
        (0, "0s"),
        (119, "119s"),
        (125, "2m5s"),
        (600, "10m"),
        (3 * 3600 - 1, "179m"),
        (3 * 3600, "3h"),
        (7 * 3600 + 60 * 5, "7h5m"),
        (30 * 3600, "30h"),
        (3 * 86400 + 4 * 3600, "3d4h"),
        (200 * 86400, "200d"),
        (800 * 86400, "2y70d"),
        (9 * 365 * 86400, "9y"),
    ],
)
def test_human_duration(seconds: int, shown: str) -> None:
    assert ages.human_duration(seconds) == shown
