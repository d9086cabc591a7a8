"""Refusals about subscriptions, shaped as the store's own errors so callers that already
handle NotFound and AlreadyExists handle them too."""

from __future__ import annotations

from ..model.resources import ScalableTopic
from ..store import AlreadyExists, NotFound


class SubscriptionExists(AlreadyExists):
    """The topic declares a subscription of that name already."""

    def __init__(self, namespace: str, topic: str, subscription: str) -> None:
        super().__init__(ScalableTopic.KIND, namespace, topic)
        self.args = (f"topic {namespace}/{topic} already has a subscription {subscription!r}",)
        self.subscription = subscription


class SubscriptionNotFound(NotFound):
    """The topic declares no subscription of that name."""

    def __init__(self, namespace: str, topic: str, subscription: str) -> None:
        super().__init__(ScalableTopic.KIND, namespace, topic)
        self.args = (f"topic {namespace}/{topic} has no subscription {subscription!r}",)
        self.subscription = subscription
