"""Declared subscriptions: edits of ``spec.subscriptions``, as ``kubectl edit st`` would make.

The controller's subscription sync carries each edit to every segment (a subscription added
later starts at Latest). Each edit is a compare-and-swap on the topic's resourceVersion, read
again and retried when another writer came first, so concurrent edits are never lost.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pydantic import ValidationError

from ..model.resources import ScalableTopic, SubscriptionSpec, subscription_count_problem
from ..store import Conflict, Store
from .broker_admin import BrokerAdmin
from .errors import SubscriptionExists, SubscriptionNotFound
from .runtime_subscriptions import delete_runtime_subscription, read_broker_view
from .topic_views import subscription_rows
from .topics import check_subscription_name, read_topic, validation_message

_ATTEMPTS = 20

Edit = Callable[[list[dict[str, Any]]], list[dict[str, Any]]]


def subscription_spec(name: str, subscription_type: str) -> SubscriptionSpec:
    """Raise ValueError naming the field the resource model refuses."""
    check_subscription_name(name)
    try:
        return SubscriptionSpec.model_validate({"name": name, "type": subscription_type})
    except ValidationError as error:
        raise ValueError(validation_message(error, "subscription")) from None


async def _edit(store: Store, namespace: str, name: str, edit: Edit) -> ScalableTopic:
    conflicts = 0
    while True:
        stored = await store.get(ScalableTopic.KIND, namespace, name)
        spec = stored.setdefault("spec", {})
        spec["subscriptions"] = edit(list(spec.get("subscriptions") or []))
        try:
            return ScalableTopic.model_validate(await store.replace(stored))
        except Conflict:
            conflicts += 1  # another writer came first: read its version and edit that
            if conflicts >= _ATTEMPTS:
                raise


async def add_subscription(
    store: Store,
    namespace: str,
    name: str,
    subscription: str,
    subscription_type: str = "Queue",
) -> ScalableTopic:
    """Declare it; SubscriptionExists when the topic declares that name already, ValueError
    when it declares MAX_SUBSCRIPTIONS_PER_TOPIC already (checked in the compare-and-swap)."""
    entry = subscription_spec(subscription, subscription_type).to_wire()

    def add(current: list[dict[str, Any]]) -> list[dict[str, Any]]:
        if any(item.get("name") == subscription for item in current):
            raise SubscriptionExists(namespace, name, subscription)
        problem = subscription_count_problem(len(current) + 1)
        if problem is not None:
            raise ValueError(f"invalid subscription: {subscription!r}: {problem}")
        return [*current, entry]

    return await _edit(store, namespace, name, add)


async def remove_subscription(
    store: Store,
    namespace: str,
    name: str,
    subscription: str,
    brokers: BrokerAdmin | None = None,
) -> ScalableTopic:
    """Undeclare a declared one (the controller deletes it everywhere). With ``brokers``, one
    the topic does not declare (a consumer created it) is deleted from every segment's broker
    at once (runtime_subscriptions). SubscriptionNotFound when neither has it."""

    def remove(current: list[dict[str, Any]]) -> list[dict[str, Any]]:
        kept = [item for item in current if item.get("name") != subscription]
        if len(kept) == len(current):
            raise SubscriptionNotFound(namespace, name, subscription)
        return kept

    try:
        return await _edit(store, namespace, name, remove)
    except SubscriptionNotFound:
        if brokers is None:
            raise
    topic = await read_topic(store, namespace, name)
    if any(e.name == subscription and e.state is not None for e in topic.status.subscriptions):
        # Undeclared already: the controller is deleting it from every segment.
        raise SubscriptionNotFound(namespace, name, subscription)
    await delete_runtime_subscription(store, brokers, topic, subscription)
    return topic


async def list_subscriptions(
    store: Store, namespace: str, name: str, brokers: BrokerAdmin | None = None
) -> list[dict[str, Any]]:
    """Declared ones and the ones consumers created, with state and consumers, by name; with
    ``brokers``, also the ones only the segments' brokers have, and where each is."""
    on_brokers = None
    if brokers is not None:
        on_brokers = (await read_broker_view(store, brokers, namespace, name)).subscriptions
    return subscription_rows(await read_topic(store, namespace, name), on_brokers)
