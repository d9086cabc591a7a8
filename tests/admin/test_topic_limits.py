"""A topic's subscriptions: at most MAX_SUBSCRIPTIONS_PER_TOPIC, checked with work linear in
their number, and values of one type never taken for another (issue: one admin request
stalled the whole broker; admin input accepted that should be refused)."""

from __future__ import annotations

import pytest

from scalable_topics.admin.topic_subscriptions import add_subscription
from scalable_topics.admin.topics import create_topic, topic_manifest
from scalable_topics.model.resources import MAX_SUBSCRIPTIONS_PER_TOPIC, ScalableTopic
from scalable_topics.store import EmbeddedStore


class CountedName(str):
    """A subscription name that counts the comparisons and hashes made of it."""

    __slots__ = ()
    comparisons = 0

    def __eq__(self, other: object) -> bool:
        CountedName.comparisons += 1
        return str.__eq__(self, other)

    def __ne__(self, other: object) -> bool:
        CountedName.comparisons += 1
        return str.__ne__(self, other)

    def __hash__(self) -> int:
        CountedName.comparisons += 1
        return str.__hash__(self)


def declared(count: int) -> list[tuple[str, str]]:
    return [(CountedName(f"s{index}"), "Queue") for index in range(count)]


@pytest.mark.parametrize("duplicate", [False, True])
def test_checking_the_subscriptions_is_linear_in_their_number(duplicate: bool) -> None:
    """The duplicate check was ``names.count(n)`` for every name: 20,000 subscriptions made
    400 million comparisons on the event loop (15 to 25 s during which /healthz waited). At the
    limit it now makes a few per name, counted, not timed."""
    subscriptions = declared(MAX_SUBSCRIPTIONS_PER_TOPIC)
    if duplicate:
        subscriptions[-1] = (CountedName("s0"), "Queue")
    CountedName.comparisons = 0
    if duplicate:
        with pytest.raises(ValueError, match="'s0' appears twice"):
            topic_manifest("default", "orders", subscriptions=subscriptions)
    else:
        manifest = topic_manifest("default", "orders", subscriptions=subscriptions)
        assert len(manifest.spec.subscriptions) == MAX_SUBSCRIPTIONS_PER_TOPIC
    assert CountedName.comparisons <= 4 * MAX_SUBSCRIPTIONS_PER_TOPIC


def test_more_subscriptions_than_the_limit_are_refused_before_any_is_read() -> None:
    subscriptions = declared(20_000)
    CountedName.comparisons = 0
    with pytest.raises(ValueError, match="invalid topic") as refused:
        topic_manifest("default", "orders", subscriptions=subscriptions)
    assert str(refused.value) == (
        "invalid topic: spec.subscriptions: a topic has at most 1000 subscriptions "
        "(maxSubscriptionsPerTopic), not 20000"
    )
    assert CountedName.comparisons == 0


def test_the_model_and_so_the_crd_bound_the_subscriptions() -> None:
    spec = {"subscriptions": [{"name": f"s{i}"} for i in range(MAX_SUBSCRIPTIONS_PER_TOPIC + 1)]}
    with pytest.raises(ValueError, match=r"spec\.subscriptions"):
        ScalableTopic.model_validate({"metadata": {"name": "orders"}, "spec": spec})
    schema = ScalableTopic.model_json_schema(by_alias=True)["$defs"]["ScalableTopicSpec"]
    assert schema["properties"]["subscriptions"]["maxItems"] == MAX_SUBSCRIPTIONS_PER_TOPIC


async def test_declaring_one_more_than_the_limit_is_refused_and_nothing_written(
    store: EmbeddedStore,
) -> None:
    full = [(f"s{index}", "Queue") for index in range(MAX_SUBSCRIPTIONS_PER_TOPIC)]
    await create_topic(store, topic_manifest("default", "orders", subscriptions=full))
    before = await store.get(ScalableTopic.KIND, "default", "orders")
    with pytest.raises(ValueError, match="invalid subscription") as refused:
        await add_subscription(store, "default", "orders", "one-more")
    assert str(refused.value) == (
        "invalid subscription: 'one-more': a topic has at most 1000 subscriptions "
        "(maxSubscriptionsPerTopic), not 1001"
    )
    after = await store.get(ScalableTopic.KIND, "default", "orders")
    assert after["metadata"]["resourceVersion"] == before["metadata"]["resourceVersion"]


@pytest.mark.parametrize(
    ("arguments", "named"),
    [
        ({"initial_segments": "2"}, "spec.initialSegments: Input should be a valid integer"),
        ({"initial_segments": True}, "spec.initialSegments: Input should be a valid integer"),
        ({"initial_segments": 2.0}, "spec.initialSegments: Input should be a valid integer"),
        ({"retention": {"maxAgeSeconds": "60"}}, "spec.retention.maxAgeSeconds"),
        ({"auto_scale": {"minSegments": "2"}}, "spec.autoScale.minSegments"),
        ({"auto_scale": {"enabled": "true"}}, "spec.autoScale.enabled"),
        ({"properties": {"tier": 1}}, "spec.properties.tier"),
    ],
)
def test_a_value_of_another_type_is_refused_not_coerced(
    arguments: dict[str, object], named: str
) -> None:
    with pytest.raises(ValueError, match="invalid topic") as refused:
        topic_manifest("default", "orders", **arguments)  # type: ignore[arg-type]
    assert named in str(refused.value)
