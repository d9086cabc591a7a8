"""The pure part of DAG watches: a topic's view from its store objects, and which store events
can change it."""

from __future__ import annotations

import itertools
from typing import Any

import pytest
from dag_objects import AT, segment_object, topic_object
from hypothesis import given, settings
from hypothesis import strategies as st

from scalable_topics.broker.topic_view import (
    build_view,
    layout_key,
    segment_changes_view,
    segment_placement,
    topic_changes_view,
)
from scalable_topics.model.errors import CorruptLayout
from scalable_topics.model.hash_range import HashRange
from scalable_topics.model.hashing import HASH_MAX, HASH_MIN
from scalable_topics.model.layout import SegmentLayout
from scalable_topics.model.ownership import lease_endpoint
from scalable_topics.model.segment import SegmentState
from scalable_topics.protocol import SegmentNode, TopicUpdate, decode_frame, encode_frame
from support.leases import lease_object

NS, TOPIC = "shop", "orders"
BROKERS = ("ws://b0:6650", "ws://b1:6650", "ws://b2:6650")


@st.composite
def layouts(draw: st.DrawFn) -> SegmentLayout:
    """A layout reached from an initial one by random splits, merges and prunes."""
    layout = SegmentLayout.initial(draw(st.integers(1, 6)), AT)
    for _ in range(draw(st.integers(0, 12))):
        action = draw(st.sampled_from(["split", "merge", "prune"]))
        active = layout.active
        if action == "split":
            layout = layout.split(draw(st.sampled_from(active)).segment_id, AT)
        elif action == "merge" and len(active) > 1:
            index = draw(st.integers(0, len(active) - 2))
            layout = layout.merge(active[index].segment_id, active[index + 1].segment_id, AT)
        elif action == "prune":
            prunable = [
                s for s in layout.sealed if not any(p in layout.segments for p in s.parent_ids)
            ]
            if prunable:
                layout = layout.prune(draw(st.sampled_from(prunable)).segment_id)
    return layout


@given(layout=layouts(), data=st.data())
@settings(max_examples=150, deadline=None)
def test_the_view_is_the_layout_with_each_placed_segments_broker(
    layout: SegmentLayout, data: st.DataObject
) -> None:
    ids = sorted(layout.segments)
    placed = data.draw(st.dictionaries(st.sampled_from(ids), st.sampled_from(BROKERS)))
    segments = [segment_object(NS, TOPIC, layout.get(i), b) for i, b in placed.items()]
    # Objects of another topic, unplaced ones and malformed ones change nothing.
    segments += [segment_object(NS, "other", layout.get(i), "ws://elsewhere") for i in ids]
    segments += [{"spec": {"topic": TOPIC, "segmentId": "x"}}, {"metadata": {}}]
    endpoint = data.draw(st.none() | st.just("http://controller:8080"))
    lease = lease_object("controller-0", endpoint)

    view = build_view(topic_object(NS, TOPIC, layout), segments, lease)

    assert view is not None
    assert (view.uid, view.epoch, view.controller_endpoint) == ("uid-1", layout.epoch, endpoint)
    assert [n.segment_id for n in view.segments] == ids
    for node in view.segments:
        info = layout.get(node.segment_id)
        assert (node.hash_range, node.state) == (info.hash_range, info.state)
        assert (node.parent_ids, node.child_ids) == (info.parent_ids, info.child_ids)
        assert node.broker_url == placed.get(node.segment_id)
    # The active nodes partition the hash space, as the layout's do.
    active = sorted(
        (n.hash_range for n in view.segments if n.state is SegmentState.ACTIVE),
        key=lambda r: r.start,
    )
    assert active[0].start == HASH_MIN and active[-1].end == HASH_MAX
    assert all(a.end + 1 == b.start for a, b in itertools.pairwise(active))
    # And the view survives the wire unchanged.
    update = TopicUpdate(1, None, view.epoch, view.segments, view.controller_endpoint)
    assert decode_frame(encode_frame(update)) == update


def test_a_topic_without_a_layout_has_no_view_yet() -> None:
    assert build_view(topic_object(NS, TOPIC, None), [], None) is None


def test_a_corrupt_layout_is_refused_with_the_reason() -> None:
    status = SegmentLayout.initial(2, AT).to_status()
    status["segments"] = status["segments"][1:]
    topic = {**topic_object(NS, TOPIC, None), "status": status}
    with pytest.raises(CorruptLayout, match="partition the hash space"):
        build_view(topic, [], None)


def test_the_nodes_name_pruned_parents_as_the_layout_does() -> None:
    layout = SegmentLayout.initial(1, AT).split(0, AT).split(1, AT).prune(0)
    view = build_view(topic_object(NS, TOPIC, layout), [], None)
    assert view is not None
    assert view.segments[0] == SegmentNode(
        1, HashRange(0, 0x7FFF), SegmentState.SEALED, (0,), (3, 4), None
    )


@pytest.mark.parametrize(
    ("lease", "endpoint"),
    [
        (None, None),
        (lease_object("controller-0", "http://c0"), "http://c0"),
        (lease_object("controller-0", None), None),
        (lease_object("", "http://c0"), None),  # released
        (lease_object("controller-0", ""), None),
    ],
)
def test_the_controller_endpoint_is_announced_only_by_a_held_lease(
    lease: dict[str, Any] | None, endpoint: str | None
) -> None:
    assert lease_endpoint(lease) == endpoint
    view = build_view(topic_object(NS, TOPIC, SegmentLayout.initial(1, AT)), [], lease)
    assert view is not None and view.controller_endpoint == endpoint


def test_segment_placement_reads_topic_id_and_broker() -> None:
    info = SegmentLayout.initial(1, AT).get(0)
    assert segment_placement(segment_object(NS, TOPIC, info, "ws://b")) == (TOPIC, 0, "ws://b")
    assert segment_placement(segment_object(NS, TOPIC, info, None)) == (TOPIC, 0, None)
    assert segment_placement({"spec": {"topic": TOPIC, "segmentId": -1}}) is None
    assert segment_placement({"spec": "nonsense"}) is None


# -- which events can change a view --------------------------------------------------------------


def test_only_layout_or_identity_changes_of_a_topic_matter() -> None:
    layout = SegmentLayout.initial(2, AT)
    topic = topic_object(NS, TOPIC, layout)
    seen = layout_key(topic)
    busy = {**topic, "status": {**topic["status"], "phase": "Ready", "subscriptions": []}}
    assert not topic_changes_view(seen, busy)
    assert topic_changes_view(seen, topic_object(NS, TOPIC, layout.split(0, AT)))
    assert topic_changes_view(seen, topic_object(NS, TOPIC, layout, uid="uid-2"))
    assert topic_changes_view(seen, None)  # deleted
    assert topic_changes_view(None, topic)  # nothing read yet


def test_only_broker_changes_of_segments_in_the_view_matter() -> None:
    layout = SegmentLayout.initial(2, AT)
    seg = [segment_object(NS, TOPIC, layout.get(0), BROKERS[0])]
    view = build_view(topic_object(NS, TOPIC, layout), seg, None)
    assert not segment_changes_view(view, 0, BROKERS[0], deleted=False)
    assert segment_changes_view(view, 0, BROKERS[1], deleted=False)
    assert segment_changes_view(view, 0, BROKERS[0], deleted=True)
    assert segment_changes_view(view, 1, BROKERS[0], deleted=False)  # placed now
    assert not segment_changes_view(view, 1, None, deleted=True)  # was never placed
    assert not segment_changes_view(view, 7, BROKERS[0], deleted=False)  # not in the layout
    assert not segment_changes_view(None, 0, BROKERS[0], deleted=False)
