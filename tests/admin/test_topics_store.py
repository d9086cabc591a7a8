"""Topic administration on the embedded store: create, list, describe, delete, subscriptions."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

import pytest

from scalable_topics.admin.errors import SubscriptionExists, SubscriptionNotFound
from scalable_topics.admin.topic_subscriptions import (
    add_subscription,
    list_subscriptions,
    remove_subscription,
)
from scalable_topics.admin.topics import (
    create_topic,
    delete_topic,
    describe_topic,
    list_topics,
    topic_manifest,
)
from scalable_topics.model.layout import SegmentLayout
from scalable_topics.model.resources import TOPIC_LABEL, ScalableTopic, Segment
from scalable_topics.store import AlreadyExists, EmbeddedStore, NotFound

AT = datetime(2026, 1, 1, tzinfo=UTC)


async def test_create_writes_the_validated_spec(store: EmbeddedStore) -> None:
    manifest = topic_manifest(
        "team-a",
        "orders",
        3,
        [("billing", "Stream"), ("audit", "Queue")],
        {"tier": "gold"},
        {"maxAgeSeconds": 3600},
    )
    await create_topic(store, manifest)
    stored = ScalableTopic.model_validate(await store.get(ScalableTopic.KIND, "team-a", "orders"))
    assert stored.spec.initial_segments == 3
    assert [(s.name, s.type.value) for s in stored.spec.subscriptions] == [
        ("billing", "Stream"),
        ("audit", "Queue"),
    ]
    assert stored.spec.properties == {"tier": "gold"}
    assert stored.spec.retention is not None and stored.spec.retention.max_age_seconds == 3600
    with pytest.raises(AlreadyExists):
        await create_topic(store, topic_manifest("team-a", "orders"))


@pytest.mark.parametrize(
    ("arguments", "named"),
    [
        ({"initial_segments": 0}, "spec.initialSegments"),
        ({"initial_segments": 5000}, "spec.initialSegments"),
        ({"subscriptions": [("billing", "Fanout")]}, "spec.subscriptions.0.type"),
        ({"subscriptions": [("bad name!", "Queue")]}, "spec.subscriptions.0.name"),
        ({"subscriptions": [("a", "Queue"), ("a", "Stream")]}, "spec.subscriptions: 'a'"),
        ({"retention": {"maxAgeSeconds": -1}}, "spec.retention.maxAgeSeconds"),
        ({"retention": {"forever": 1}}, "spec.retention.forever"),
    ],
)
def test_an_invalid_topic_names_the_field(arguments: dict[str, object], named: str) -> None:
    with pytest.raises(ValueError, match="invalid topic") as refused:
        topic_manifest("default", "orders", **arguments)  # type: ignore[arg-type]
    assert named in str(refused.value)


@pytest.mark.parametrize(
    ("namespace", "name", "field"),
    [
        ("Default", "orders", "metadata.namespace"),
        ("", "orders", "metadata.namespace"),
        ("default", "Orders_1", "metadata.name"),
        ("default", "o" * 64, "metadata.name"),
        ("default", "my.orders", "metadata.name"),
    ],
)
def test_names_must_be_dns_labels(namespace: str, name: str, field: str) -> None:
    """At most 63 characters and no '.': a topic's name labels its Segments (a 64-character
    name once made a topic whose Segments could not be created)."""
    with pytest.raises(ValueError, match="invalid topic: ") as refused:
        topic_manifest(namespace, name)
    assert str(refused.value).startswith(f"invalid topic: {field}: ")
    assert "at most 63 lower-case letters, digits and '-'" in str(refused.value) or (
        "must not be empty" in str(refused.value)
    )


async def test_a_subscription_name_is_checked_before_anything_is_written(
    store: EmbeddedStore,
) -> None:
    await create_topic(store, topic_manifest("default", "orders"))
    before = await store.get(ScalableTopic.KIND, "default", "orders")
    for bad in ("bad name", "-starts-with-a-dash", "x" * 129, ""):
        with pytest.raises(ValueError, match="invalid subscription: name: ") as refused:
            await add_subscription(store, "default", "orders", bad)
        assert "subscription name" in str(refused.value)
    after = await store.get(ScalableTopic.KIND, "default", "orders")
    assert after["metadata"]["resourceVersion"] == before["metadata"]["resourceVersion"]


async def test_list_summarizes_one_namespace_or_all(store: EmbeddedStore) -> None:
    for namespace, name in (("b", "two"), ("a", "one"), ("b", "one")):
        await create_topic(store, topic_manifest(namespace, name, subscriptions=[("s", "Queue")]))
    await give_layout(store, "b", "one", 2)
    assert [(s.namespace, s.name) for s in await list_topics(store)] == [
        ("a", "one"),
        ("b", "one"),
        ("b", "two"),
    ]
    one, two = await list_topics(store, "b")
    assert one.to_dict() == {
        "namespace": "b",
        "name": "one",
        "phase": "Ready",
        "epoch": 1,
        "activeSegments": 3,
        "sealedSegments": 1,
        "subscriptions": ["s"],
        "controller": "c-0",
        "deleting": False,
    }
    assert (two.epoch, two.active_segments) == (None, 0)
    assert await list_topics(store, "c") == []


async def give_layout(store: EmbeddedStore, namespace: str, name: str, count: int) -> None:
    """Write what a controller would: the layout and one Segment object per segment."""
    raw = await store.get(ScalableTopic.KIND, namespace, name)
    layout = SegmentLayout.initial(count, AT).split(0, AT)
    raw["status"] = {**layout.to_status(), "phase": "Ready", "controller": {"identity": "c-0"}}
    await store.replace_status(raw)
    for info in layout.segments.values():
        await store.create(
            {
                "apiVersion": "scalabletopics.dev/v1alpha1",
                "kind": Segment.KIND,
                "metadata": {
                    "name": f"{name}-{info.descriptor}",
                    "namespace": namespace,
                    "labels": {TOPIC_LABEL: name},
                },
                "spec": {
                    "topic": name,
                    "segmentId": info.segment_id,
                    "hashRange": {"start": info.hash_range.start, "end": info.hash_range.end},
                },
            }
        )
        segment = await store.get(Segment.KIND, namespace, f"{name}-{info.descriptor}")
        segment["status"] = {"state": "Active", "broker": f"ws://broker-{info.segment_id % 2}"}
        await store.replace_status(segment)


async def test_describe_shows_the_dag_with_brokers(store: EmbeddedStore) -> None:
    await create_topic(store, topic_manifest("default", "orders", 2, [("billing", "Stream")]))
    bare = (await describe_topic(store, "default", "orders")).to_dict()
    assert (bare["epoch"], bare["segments"], bare["phase"]) == (None, [], None)

    await give_layout(store, "default", "orders", 2)
    described = (await describe_topic(store, "default", "orders")).to_dict()
    assert (described["epoch"], described["nextSegmentId"], described["phase"]) == (1, 4, "Ready")
    assert [
        (s["id"], s["range"], s["state"], s["parents"], s["children"], s["broker"])
        for s in described["segments"]
    ] == [
        (0, "0000-7fff", "Sealed", [], [2, 3], "ws://broker-0"),
        (1, "8000-ffff", "Active", [], [], "ws://broker-1"),
        (2, "0000-3fff", "Active", [0], [], "ws://broker-0"),
        (3, "4000-7fff", "Active", [0], [], "ws://broker-1"),
    ]
    assert described["controller"] == {"identity": "c-0", "term": 0}
    assert described["subscriptions"] == [
        {
            "name": "billing",
            "type": "Stream",
            "declared": True,
            "state": None,
            "consumers": [],
            "segments": None,  # the store alone: the brokers were not asked
            "attachedConsumers": None,
        }
    ]
    assert described["spec"]["initialSegments"] == 2
    with pytest.raises(NotFound):
        await describe_topic(store, "default", "missing")


async def test_delete_removes_a_topic_without_finalizers(store: EmbeddedStore) -> None:
    await create_topic(store, topic_manifest("default", "orders"))
    await delete_topic(store, "default", "orders")
    with pytest.raises(NotFound):
        await store.get(ScalableTopic.KIND, "default", "orders")
    with pytest.raises(NotFound):
        await delete_topic(store, "default", "orders")


async def test_subscriptions_are_added_removed_and_listed(store: EmbeddedStore) -> None:
    await create_topic(store, topic_manifest("default", "orders", subscriptions=[("a", "Queue")]))
    await add_subscription(store, "default", "orders", "b", "Checkpoint")
    with pytest.raises(SubscriptionExists, match="already has a subscription 'b'"):
        await add_subscription(store, "default", "orders", "b")
    with pytest.raises(ValueError, match="subscription: type"):
        await add_subscription(store, "default", "orders", "c", "Fanout")
    assert [
        (s["name"], s["type"]) for s in await list_subscriptions(store, "default", "orders")
    ] == [
        ("a", "Queue"),
        ("b", "Checkpoint"),
    ]
    await remove_subscription(store, "default", "orders", "a")
    with pytest.raises(SubscriptionNotFound, match="has no subscription 'a'"):
        await remove_subscription(store, "default", "orders", "a")
    with pytest.raises(NotFound):
        await add_subscription(store, "default", "missing", "x")
    topic = ScalableTopic.model_validate(await store.get(ScalableTopic.KIND, "default", "orders"))
    assert [s.name for s in topic.spec.subscriptions] == ["b"]


async def test_concurrent_edits_are_all_kept(store: EmbeddedStore) -> None:
    """Each edit is a compare-and-swap retried on Conflict: none overwrites another."""
    await create_topic(store, topic_manifest("default", "orders"))
    names = [f"s{i}" for i in range(8)]
    await asyncio.gather(*(add_subscription(store, "default", "orders", n) for n in names))
    listed = await list_subscriptions(store, "default", "orders")
    assert sorted(s["name"] for s in listed) == names
