"""Subscriptions as the brokers have them, declared or not.

A consumer that subscribes to a name the topic does not declare creates that subscription on
the segments it reads, on their brokers (a queue consumer: every segment); the store knows
nothing of it. Listing asks every segment's broker (its ``/stats``, which also says how many
consumers are attached), so such *runtime* subscriptions show beside the declared ones, and
deleting one removes it from every segment's broker through the segment admin API, then its
drained markers from the Segment objects (a later subscription of that name must not inherit
them), as the controller does for a declared one.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Mapping
from dataclasses import dataclass

from ..model.resources import TOPIC_LABEL, ScalableTopic, Segment
from ..store import NotFound, Store
from ..tasks import gather_settled
from .broker_admin import BrokerAdmin, BrokerAdminError, BrokerUnreachable
from .errors import SubscriptionBusy, SubscriptionNotFound, SubscriptionUnreachable
from .stats import TopicStats
from .stats_gather import gather_topic_stats
from .topic_views import OnBrokers

_PARALLELISM = 16


@dataclass(frozen=True, slots=True)
class BrokerView:
    """Every subscription the segments' brokers have, and the segments that did not answer."""

    subscriptions: Mapping[str, OnBrokers]
    unavailable: Mapping[int, str]  # segment id -> why
    brokers: Mapping[int, str]  # segment id -> broker URL, for the segments that answered
    descriptors: Mapping[int, str]


def broker_view(stats: TopicStats) -> BrokerView:
    found: dict[str, OnBrokers] = {}
    unavailable: dict[int, str] = {}
    brokers: dict[int, str] = {}
    descriptors: dict[int, str] = {}
    for segment in stats.segments:
        descriptors[segment.segment_id] = segment.descriptor
        if segment.report is None or segment.broker is None:
            unavailable[segment.segment_id] = segment.unavailable or "no answer"
            continue
        brokers[segment.segment_id] = segment.broker
        for name, report in segment.report.subscriptions.items():
            entry = found.setdefault(name, OnBrokers())
            entry.segments.append(segment.segment_id)
            entry.attached += report.consumers
            if report.type is not None:
                entry.types.add(report.type)
    return BrokerView(found, unavailable, brokers, descriptors)


async def read_broker_view(
    store: Store, admin: BrokerAdmin, namespace: str, name: str
) -> BrokerView:
    return broker_view(await gather_topic_stats(store, admin, namespace, name))


async def delete_runtime_subscription(
    store: Store, admin: BrokerAdmin, topic: ScalableTopic, subscription: str
) -> list[int]:
    """Delete a subscription the topic does not declare from every segment's broker; returns
    the ids of the segments it was deleted from. Nothing is deleted when a segment's broker
    does not answer (SubscriptionUnreachable: it may have it too; ask again) or a consumer is
    attached to it (SubscriptionBusy: it would create it again), and SubscriptionNotFound
    when no segment has it."""
    namespace, name = topic.metadata.namespace or "default", topic.metadata.name
    view = await read_broker_view(store, admin, namespace, name)
    found = view.subscriptions.get(subscription)
    if view.unavailable:
        raise SubscriptionUnreachable(namespace, name, subscription, view.unavailable)
    if found is None:
        raise SubscriptionNotFound(namespace, name, subscription)
    if found.attached:
        raise SubscriptionBusy(namespace, name, subscription, found.attached, found.segments)
    gate = asyncio.Semaphore(_PARALLELISM)

    async def on(segment_id: int) -> None:
        async with gate:
            try:
                await admin.delete_subscription(
                    view.brokers[segment_id],
                    namespace,
                    name,
                    view.descriptors[segment_id],
                    subscription,
                )
            except (BrokerAdminError, BrokerUnreachable) as error:
                raise SubscriptionUnreachable(
                    namespace, name, subscription, {segment_id: str(error)}, started=True
                ) from None

    await gather_settled(*(on(segment_id) for segment_id in found.segments))
    await _forget_markers(store, namespace, name, subscription)
    return sorted(found.segments)


async def _forget_markers(store: Store, namespace: str, name: str, subscription: str) -> None:
    listing = await store.list(
        Segment.KIND, namespace=namespace, label_selector=f"{TOPIC_LABEL}={name}"
    )
    for item in listing.items:
        drained = (item.get("status") or {}).get("drained") or {}
        if subscription not in drained:
            continue
        with contextlib.suppress(NotFound):  # pruned meanwhile
            await store.patch_status(
                Segment.KIND,
                namespace,
                item["metadata"]["name"],
                {"status": {"drained": {subscription: None}}},
            )
