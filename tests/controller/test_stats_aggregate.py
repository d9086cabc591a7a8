"""Topic stats aggregation (pure): counts, totals and per-subscription sums over segments."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from scalable_topics.admin.stats import (
    Rates,
    SegmentReport,
    SubscriptionReport,
    Unavailable,
    aggregate,
)
from scalable_topics.admin.stats_table import render_table
from scalable_topics.model.errors import LayoutError
from scalable_topics.model.layout import SegmentLayout
from scalable_topics.model.resources import ScalableTopic

AT = datetime(2026, 1, 1, tzinfo=UTC)


def topic(
    declared: Sequence[tuple[str, str]] = (), recorded: Sequence[dict[str, Any]] = ()
) -> ScalableTopic:
    return ScalableTopic.model_validate(
        {
            "metadata": {"name": "orders", "namespace": "default"},
            "spec": {"subscriptions": [{"name": n, "type": t} for n, t in declared]},
            "status": {"epoch": 3, "phase": "Ready", "subscriptions": list(recorded)},
        }
    )


def broker_stats(**overrides: Any) -> dict[str, Any]:
    stats: dict[str, Any] = {
        "state": "Active",
        "firstEntryId": 0,
        "lastEntryId": 9,
        "sizeBytes": 1000,
        "producers": [{"name": "p", "accessMode": "Shared", "epoch": 0}],
        "rates": {"msgRateIn": 5.0, "msgRateOut": 4, "byteRateIn": 50.0, "byteRateOut": 40.0},
        "subscriptions": {
            "billing": {"type": "Exclusive", "backlog": 3, "drained": False, "consumers": 1}
        },
    }
    stats.update(overrides)
    return stats


def test_a_broker_answer_is_read_and_checked() -> None:
    report = SegmentReport.from_broker(broker_stats())
    assert report.entries == 10
    assert report.rates == Rates(5.0, 4.0, 50.0, 40.0)
    assert report.subscriptions == {"billing": SubscriptionReport("Exclusive", 3, False, 1)}
    assert report.backlog == 3
    assert SegmentReport.from_broker(broker_stats(firstEntryId=0, lastEntryId=-1)).entries == 0


@pytest.mark.parametrize(
    ("overrides", "named"),
    [
        ({"sizeBytes": -1}, "'sizeBytes'"),
        ({"rates": {"msgRateIn": "fast"}}, "'msgRateIn'"),
        ({"subscriptions": {"billing": {"backlog": 1, "consumers": 0}}}, "'billing'"),
        ({"subscriptions": []}, "'subscriptions'"),
        ({"state": None}, "'state'"),
    ],
)
def test_a_malformed_answer_is_refused_naming_the_field(
    overrides: dict[str, Any], named: str
) -> None:
    with pytest.raises(ValueError, match=named):
        SegmentReport.from_broker(broker_stats(**overrides))


def test_segments_subscriptions_and_totals() -> None:
    layout = SegmentLayout.initial(2, AT).split(0, AT)  # 0 sealed; 1, 2, 3 active
    reports = {
        0: SegmentReport.from_broker(broker_stats(state="Terminated")),
        1: SegmentReport.from_broker(
            broker_stats(
                subscriptions={
                    "billing": {"type": None, "backlog": 0, "drained": False, "consumers": 0},
                    "adhoc": {"type": "Shared", "backlog": 7, "drained": False, "consumers": 2},
                }
            )
        ),
        2: Unavailable("broker unreachable: connection refused"),
    }
    stats = aggregate(
        topic(
            [("billing", "Stream")],
            [
                {
                    "name": "billing",
                    "type": "Stream",
                    "state": "Ready",
                    "consumers": [{"name": "c1"}, {"name": "c2"}],
                }
            ],
        ),
        layout,
        {0: "ws://b0", 1: "ws://b1", 2: "ws://b0", 3: None},
        reports,
    )
    assert (stats.active_segments, stats.sealed_segments, stats.unavailable_segments) == (3, 1, 2)
    assert [s.segment_id for s in stats.segments] == [0, 1, 2, 3]
    assert stats.segments[2].unavailable == "broker unreachable: connection refused"
    assert stats.segments[3].unavailable == "not asked"
    assert stats.rates == Rates(10.0, 8.0, 100.0, 80.0)
    assert (stats.backlog, stats.size_bytes, stats.producers) == (10, 2000, 2)
    billing, adhoc = (
        next(s for s in stats.subscriptions if s.name == name) for name in ("billing", "adhoc")
    )
    assert (billing.type, billing.declared, billing.state) == ("Stream", True, "Ready")
    assert (billing.backlog, billing.consumers, billing.registered_consumers) == (3, 1, 2)
    assert (billing.segments, billing.drained_segments) == (2, 0)
    assert (adhoc.type, adhoc.declared, adhoc.backlog, adhoc.consumers) == (None, False, 7, 2)

    data = stats.to_dict()
    assert data["segmentCounts"] == {"active": 3, "sealed": 1, "unavailable": 2}
    assert data["segments"][2] == {
        "id": 2,
        "descriptor": "0000-3fff-2",
        "state": "Active",
        "broker": "ws://b0",
        "available": False,
        "reason": "broker unreachable: connection refused",
    }
    table = render_table(stats.to_dict())
    assert "SEGMENTS 3 active, 1 sealed, 2 unavailable" in table
    assert "unavailable: broker unreachable: connection refused" in table
    assert [line.split()[0] for line in table.splitlines() if line.startswith("billing")] == [
        "billing"
    ]


def test_a_topic_without_a_layout_yet_has_empty_stats() -> None:
    stats = aggregate(topic(), None, {}, {})
    assert (stats.active_segments, stats.sealed_segments, stats.segments) == (0, 0, ())
    assert "SEGMENTS 0 active" in render_table(stats.to_dict())


# -- properties ---------------------------------------------------------------------------------

subscription_reports = st.builds(
    SubscriptionReport,
    type=st.sampled_from([None, "Exclusive", "Shared"]),
    backlog=st.integers(0, 10**6),
    drained=st.booleans(),
    consumers=st.integers(0, 50),
)
segment_reports = st.builds(
    SegmentReport,
    state=st.sampled_from(["Active", "Terminated"]),
    entries=st.integers(0, 10**6),
    size_bytes=st.integers(0, 10**12),
    producers=st.integers(0, 5),
    rates=st.builds(
        Rates,
        *(st.floats(0, 1e6, allow_nan=False, allow_infinity=False) for _ in range(4)),
    ),
    subscriptions=st.dictionaries(st.sampled_from(["a", "b", "c"]), subscription_reports),
)


@st.composite
def layouts(draw: st.DrawFn) -> SegmentLayout:
    layout = SegmentLayout.initial(draw(st.integers(1, 4)), AT)
    for step in draw(st.lists(st.integers(0, 10**6), max_size=6)):
        active = layout.active
        try:
            if step % 2 and len(active) > 1:
                first = active[step % (len(active) - 1)]
                second = active[step % (len(active) - 1) + 1]
                layout = layout.merge(first.segment_id, second.segment_id, AT)
            else:
                layout = layout.split(active[step % len(active)].segment_id, AT)
        except LayoutError:
            pass
    return layout


@given(data=st.data(), layout=layouts())
def test_totals_are_the_sums_of_what_was_reported(
    data: st.DataObject, layout: SegmentLayout
) -> None:
    reports = {
        sid: data.draw(st.one_of(segment_reports, st.builds(Unavailable, st.just("down"))))
        for sid in layout.segments
    }
    stats = aggregate(topic([("a", "Stream")]), layout, {}, reports)
    available = [r for r in reports.values() if isinstance(r, SegmentReport)]
    assert stats.active_segments + stats.sealed_segments == len(layout.segments)
    assert stats.active_segments == len(layout.active)
    assert stats.unavailable_segments == len(reports) - len(available)
    assert stats.backlog == sum(r.backlog for r in available)
    assert stats.size_bytes == sum(r.size_bytes for r in available)
    assert stats.rates.msg_rate_in == pytest.approx(sum(r.rates.msg_rate_in for r in available))
    assert sum(s.backlog for s in stats.subscriptions) == stats.backlog
    assert sum(s.consumers for s in stats.subscriptions) == sum(
        sub.consumers for r in available for sub in r.subscriptions.values()
    )
    names = {s.name for s in stats.subscriptions}
    assert names == {"a"} | {n for r in available for n in r.subscriptions}
    for sub in stats.subscriptions:
        assert 0 <= sub.drained_segments <= sub.segments <= len(available)
