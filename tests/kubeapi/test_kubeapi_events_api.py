"""core/v1 and events.k8s.io/v1 Events: field mapping, and lossless round trips."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from scalable_topics.kubeapi import events_api

text = st.text(alphabet="abcdefgh-./ ", min_size=1, max_size=12)
times = st.sampled_from(["2026-05-01T10:00:00Z", "2026-05-01T11:30:00Z"])
micro_times = st.sampled_from(["2026-05-01T10:00:00.000001Z", "2026-05-01T10:00:00.123456Z"])
counts = st.integers(min_value=1, max_value=2**31 - 1)
metadata = st.fixed_dictionaries(
    {"name": text, "namespace": text},
    optional={
        "resourceVersion": text,
        "uid": text,
        "labels": st.dictionaries(text, text, max_size=2),
    },
)
reference = st.fixed_dictionaries(
    {},
    optional={key: text for key in events_api.REFERENCE_FIELDS},
)
source = st.fixed_dictionaries({}, optional={"component": text, "host": text})


def _omitempty(
    draw: st.DrawFn, out: dict[str, Any], key: str, values: st.SearchStrategy[Any]
) -> None:
    if draw(st.booleans()):
        out[key] = draw(values)


@st.composite
def core_events(draw: st.DrawFn) -> dict[str, Any]:
    """Events as the API server serves them in core/v1 (Go's JSON: some zero values present)."""
    event: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": draw(metadata),
        "involvedObject": draw(reference),
    }
    _omitempty(draw, event, "reason", text)
    _omitempty(draw, event, "message", text)
    event["source"] = draw(source)
    event["firstTimestamp"] = draw(st.none() | times)
    event["lastTimestamp"] = draw(st.none() | times)
    _omitempty(draw, event, "count", counts)
    _omitempty(draw, event, "type", st.sampled_from(["Normal", "Warning"]))
    event["eventTime"] = draw(st.none() | micro_times)
    if draw(st.booleans()):
        series: dict[str, Any] = {}
        _omitempty(draw, series, "count", counts)
        series["lastObservedTime"] = draw(st.none() | micro_times)
        event["series"] = series
    _omitempty(draw, event, "action", text)
    if draw(st.booleans()):
        event["related"] = draw(reference)
    event["reportingComponent"] = draw(st.just("") | text)
    event["reportingInstance"] = draw(st.just("") | text)
    return event


@st.composite
def events_v1_events(draw: st.DrawFn) -> dict[str, Any]:
    """Events as the API server serves them in events.k8s.io/v1."""
    event: dict[str, Any] = {
        "apiVersion": "events.k8s.io/v1",
        "kind": "Event",
        "metadata": draw(metadata),
        "eventTime": draw(st.none() | micro_times),
    }
    if draw(st.booleans()):
        event["series"] = {
            "count": draw(st.integers(min_value=0, max_value=100)),
            "lastObservedTime": draw(st.none() | micro_times),
        }
    for key in ("reportingController", "reportingInstance", "action", "reason"):
        _omitempty(draw, event, key, text)
    event["regarding"] = draw(reference)
    if draw(st.booleans()):
        event["related"] = draw(reference)
    _omitempty(draw, event, "note", text)
    _omitempty(draw, event, "type", st.sampled_from(["Normal", "Warning"]))
    event["deprecatedSource"] = draw(source)
    event["deprecatedFirstTimestamp"] = draw(st.none() | times)
    event["deprecatedLastTimestamp"] = draw(st.none() | times)
    _omitempty(draw, event, "deprecatedCount", counts)
    return event


@given(core_events())
def test_core_events_round_trip(event: dict[str, Any]) -> None:
    assert events_api.to_core(events_api.to_events_v1(event)) == event


@given(events_v1_events())
def test_events_v1_events_round_trip(event: dict[str, Any]) -> None:
    assert events_api.to_events_v1(events_api.to_core(event)) == event


def test_fields_map_one_to_one() -> None:
    core = {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": "e", "namespace": "default"},
        "involvedObject": {"kind": "Lease", "name": "l", "namespace": "default"},
        "reason": "Renewed",
        "message": "renewed by controller-0",
        "source": {"component": "controller", "host": "node-1"},
        "firstTimestamp": "2026-05-01T10:00:00Z",
        "lastTimestamp": "2026-05-01T10:05:00Z",
        "count": 6,
        "type": "Normal",
        "eventTime": "2026-05-01T10:00:00.000000Z",
        "series": {"count": 6, "lastObservedTime": "2026-05-01T10:05:00.000000Z"},
        "action": "Renew",
        "related": {"kind": "Pod", "name": "p"},
        "reportingComponent": "scalabletopics.dev/controller",
        "reportingInstance": "controller-0",
        "unknownField": "dropped",
    }
    assert events_api.to_events_v1(core) == {
        "apiVersion": "events.k8s.io/v1",
        "kind": "Event",
        "metadata": {"name": "e", "namespace": "default"},
        "eventTime": "2026-05-01T10:00:00.000000Z",
        "series": {"count": 6, "lastObservedTime": "2026-05-01T10:05:00.000000Z"},
        "reportingController": "scalabletopics.dev/controller",
        "reportingInstance": "controller-0",
        "action": "Renew",
        "reason": "Renewed",
        "regarding": {"kind": "Lease", "name": "l", "namespace": "default"},
        "related": {"kind": "Pod", "name": "p"},
        "note": "renewed by controller-0",
        "type": "Normal",
        "deprecatedSource": {"component": "controller", "host": "node-1"},
        "deprecatedFirstTimestamp": "2026-05-01T10:00:00Z",
        "deprecatedLastTimestamp": "2026-05-01T10:05:00Z",
        "deprecatedCount": 6,
    }


def test_zero_values_as_the_api_server_writes_them() -> None:
    minimal = {"apiVersion": "events.k8s.io/v1", "kind": "Event", "metadata": {"name": "e"}}
    assert events_api.to_core(minimal) == {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": "e"},
        "involvedObject": {},
        "source": {},
        "firstTimestamp": None,
        "lastTimestamp": None,
        "eventTime": None,
        "reportingComponent": "",
        "reportingInstance": "",
    }
    assert events_api.normalize_events_v1(minimal) == {
        **minimal,
        "eventTime": None,
        "regarding": {},
        "deprecatedSource": {},
        "deprecatedFirstTimestamp": None,
        "deprecatedLastTimestamp": None,
    }
