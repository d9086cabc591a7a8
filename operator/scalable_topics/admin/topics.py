"""Topic administration through the store: what ``kubectl apply/get/delete st`` does.

Creating a topic writes only its spec; the controller that wins the topic's Lease makes the
layout, the Segment objects and the storage. Deleting marks it for deletion; the controller's
finalizer removes the segments and then the topic. Errors are the store's (NotFound,
AlreadyExists) and ValueError for a request the resource model refuses, naming the field.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import ValidationError

from ..model.resources import (
    TOPIC_LABEL,
    ScalableTopic,
    Segment,
    namespace_problem,
    subscription_count_problem,
    subscription_name_problem,
    topic_name_problem,
)
from ..store import Store
from .errors import UnreadableTopic
from .topic_views import OnBrokers, TopicDescription, TopicSummary, describe, summarize_stored


def check_names(namespace: str, name: str) -> None:
    """Raise ValueError, naming the field and its rule, unless both are DNS labels Kubernetes
    would accept (a topic name at most TOPIC_NAME_MAX characters: it labels its Segments)."""
    for field, problem in (
        ("metadata.namespace", namespace_problem(namespace)),
        ("metadata.name", topic_name_problem(name)),
    ):
        if problem is not None:
            raise ValueError(f"invalid topic: {field}: {problem}")


def check_subscription_name(name: str, field: str = "name") -> None:
    """Raise ValueError naming the field and the rule unless ``name`` can name a
    subscription."""
    problem = subscription_name_problem(name)
    if problem is not None:
        raise ValueError(f"invalid subscription: {field}: {problem}")


def validation_message(error: ValidationError, what: str) -> str:
    """The first problem pydantic found, naming the field in its wire (camelCase) spelling."""
    first = error.errors()[0]
    field = ".".join(str(part) for part in first["loc"]) or "body"
    message = first["msg"]
    if first["type"] == "value_error":  # a model's own check: its message, without the prefix
        message = str(first.get("ctx", {}).get("error", message))
    return f"invalid {what}: {field}: {message}"


def topic_manifest(
    namespace: str,
    name: str,
    initial_segments: int = 1,
    subscriptions: Sequence[tuple[str, str]] = (),
    properties: Mapping[str, str] | None = None,
    retention: Mapping[str, int] | None = None,
    auto_scale: Mapping[str, Any] | None = None,
) -> ScalableTopic:
    """The ScalableTopic to create, validated by the resource model strictly (no value of one
    type is taken for another: "2" is not 2). The work is linear in the number of
    subscriptions, which is checked against the limit first."""
    check_names(namespace, name)
    problem = subscription_count_problem(len(subscriptions))
    if problem is not None:
        raise ValueError(f"invalid topic: spec.subscriptions: {problem}")
    seen: set[str] = set()
    for index, (subscription, _) in enumerate(subscriptions):
        problem = subscription_name_problem(subscription)
        if problem is not None:
            raise ValueError(f"invalid topic: spec.subscriptions.{index}.name: {problem}")
        if subscription in seen:
            raise ValueError(f"invalid topic: spec.subscriptions: {subscription!r} appears twice")
        seen.add(subscription)
    spec: dict[str, object] = {
        "initialSegments": initial_segments,
        "subscriptions": [{"name": n, "type": t} for n, t in subscriptions],
        "properties": dict(properties or {}),
    }
    if retention is not None:
        spec["retention"] = dict(retention)
    if auto_scale is not None:
        spec["autoScale"] = dict(auto_scale)
    try:
        text = json.dumps({"metadata": {"name": name, "namespace": namespace}, "spec": spec})
    except TypeError as error:  # a value JSON cannot carry
        raise ValueError(f"invalid topic: spec: {error}") from None
    try:
        # JSON's strict mode: enums from their values, and nothing coerced.
        return ScalableTopic.model_validate_json(text, strict=True)
    except ValidationError as error:
        raise ValueError(validation_message(error, "topic")) from None


async def create_topic(store: Store, topic: ScalableTopic) -> ScalableTopic:
    """Create it; the store's AlreadyExists when the name is taken."""
    created = await store.create(topic.to_wire())
    return ScalableTopic.model_validate(created)


async def list_topics(store: Store, namespace: str | None = None) -> list[TopicSummary]:
    """Every topic of ``namespace`` (of all namespaces with None), by namespace and name."""
    listing = await store.list(ScalableTopic.KIND, namespace=namespace)
    summaries = [summarize_stored(item) for item in listing.items]
    return sorted(summaries, key=lambda s: (s.namespace, s.name))


async def read_topic(store: Store, namespace: str, name: str) -> ScalableTopic:
    """The store's NotFound when there is none; UnreadableTopic when the model refuses it."""
    raw = await store.get(ScalableTopic.KIND, namespace, name)
    try:
        return ScalableTopic.model_validate(raw)
    except ValidationError as error:
        raise UnreadableTopic(namespace, name, validation_message(error, "topic")) from None


async def describe_topic(
    store: Store,
    namespace: str,
    name: str,
    on_brokers: Mapping[str, OnBrokers] | None = None,
) -> TopicDescription:
    """``on_brokers``: the subscriptions the segments' brokers have (runtime_subscriptions),
    to show the ones consumers created beside the declared ones."""
    topic = await read_topic(store, namespace, name)
    listing = await store.list(
        Segment.KIND, namespace=namespace, label_selector=f"{TOPIC_LABEL}={name}"
    )
    return describe(topic, listing.items, on_brokers)


async def delete_topic(store: Store, namespace: str, name: str) -> TopicSummary:
    """Ask for deletion; the topic stays (marked) until the controller's finalizer is done.
    Whatever state the topic is in (half created, a spec the model refuses), it is deleted:
    its summary is read without the model if need be."""
    return summarize_stored(await store.delete(ScalableTopic.KIND, namespace, name))
