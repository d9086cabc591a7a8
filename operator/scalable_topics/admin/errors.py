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


class UnreadableTopic(Exception):
    """The stored topic is not one this release can read (written to the store directly, or
    by an older release): the stored data is at fault, not the request. It can be deleted."""

    def __init__(self, namespace: str, name: str, problem: str) -> None:
        super().__init__(
            f"topic {namespace}/{name} is stored in a form this release cannot read ({problem}); "
            "it can still be deleted"
        )
