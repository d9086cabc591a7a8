"""Topic administration through the store: what ``kubectl apply/get/delete st`` does.

Creating a topic writes only its spec; the controller that wins the topic's Lease makes the
layout, the Segment objects and the storage. Deleting marks it for deletion; the controller's
finalizer removes the segments and then the topic. Errors are the store's (NotFound,
AlreadyExists) and ValueError for a request the resource model refuses, naming the field.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import ValidationError

from ..model.resources import (
    NAME_PATTERN,
    TOPIC_LABEL,
    TOPIC_NAME_MAX,
    ScalableTopic,
    Segment,
)
from ..store import Store
from .topic_views import TopicDescription, TopicSummary, describe, summarize

_NAMESPACE_PATTERN = re.compile(NAME_PATTERN)
_MAX_NAMESPACE = 63


def check_names(namespace: str, name: str) -> None:
    """Raise ValueError unless both are DNS-1123 labels Kubernetes would accept."""
    if len(namespace) > _MAX_NAMESPACE or not _NAMESPACE_PATTERN.match(namespace):
        raise ValueError(
            f"namespace {namespace!r} is not a DNS label: lower-case letters, digits and '-', "
            f"at most {_MAX_NAMESPACE} characters"
        )
    if len(name) > TOPIC_NAME_MAX or not _NAMESPACE_PATTERN.match(name):
        raise ValueError(
            f"topic name {name!r} is not a DNS label: lower-case letters, digits and '-', "
            f"at most {TOPIC_NAME_MAX} characters"
        )


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
    """The ScalableTopic to create, validated by the resource model."""
    check_names(namespace, name)
    spec: dict[str, object] = {
        "initialSegments": initial_segments,
        "subscriptions": [{"name": n, "type": t} for n, t in subscriptions],
        "properties": dict(properties or {}),
    }
    if retention is not None:
        spec["retention"] = dict(retention)
    if auto_scale is not None:
        spec["autoScale"] = dict(auto_scale)
    names = [n for n, _ in subscriptions]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise ValueError(f"invalid topic: spec.subscriptions: {duplicates[0]!r} appears twice")
    try:
        return ScalableTopic.model_validate(
            {"metadata": {"name": name, "namespace": namespace}, "spec": spec}
        )
    except ValidationError as error:
        raise ValueError(validation_message(error, "topic")) from None


async def create_topic(store: Store, topic: ScalableTopic) -> ScalableTopic:
    """Create it; the store's AlreadyExists when the name is taken."""
    created = await store.create(topic.to_wire())
    return ScalableTopic.model_validate(created)


async def list_topics(store: Store, namespace: str | None = None) -> list[TopicSummary]:
    """Every topic of ``namespace`` (of all namespaces with None), by namespace and name."""
    listing = await store.list(ScalableTopic.KIND, namespace=namespace)
    summaries = [summarize(ScalableTopic.model_validate(item)) for item in listing.items]
    return sorted(summaries, key=lambda s: (s.namespace, s.name))


async def read_topic(store: Store, namespace: str, name: str) -> ScalableTopic:
    return ScalableTopic.model_validate(await store.get(ScalableTopic.KIND, namespace, name))


async def describe_topic(store: Store, namespace: str, name: str) -> TopicDescription:
    topic = await read_topic(store, namespace, name)
    listing = await store.list(
        Segment.KIND, namespace=namespace, label_selector=f"{TOPIC_LABEL}={name}"
    )
    return describe(topic, (Segment.model_validate(item) for item in listing.items))


async def delete_topic(store: Store, namespace: str, name: str) -> ScalableTopic:
    """Ask for deletion; the topic stays (marked) until the controller's finalizer is done."""
    return ScalableTopic.model_validate(await store.delete(ScalableTopic.KIND, namespace, name))
