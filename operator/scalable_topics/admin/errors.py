"""Refusals about subscriptions, shaped as the store's own errors so callers that already
handle NotFound and AlreadyExists handle them too."""

from __future__ import annotations

from collections.abc import Mapping

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


class SubscriptionBusy(Exception):
    """Consumers are attached to a subscription that deleting would pull from under them (and
    that their next subscribe would create again)."""

    def __init__(
        self, namespace: str, topic: str, subscription: str, consumers: int, segments: list[int]
    ) -> None:
        super().__init__(
            f"subscription {subscription!r} of topic {namespace}/{topic} has consumers "
            f"attached ({consumers}, over segments {', '.join(map(str, sorted(segments)))}); "
            "close them, then delete it"
        )


class SubscriptionUnreachable(Exception):
    """A segment's broker did not answer (or refused) while a subscription consumers created
    was looked for or deleted: whether that segment has it is unknown."""

    def __init__(
        self,
        namespace: str,
        topic: str,
        subscription: str,
        reasons: Mapping[int, str],
        *,
        started: bool = False,
    ) -> None:
        which = "; ".join(f"segment {i}: {reasons[i]}" for i in sorted(reasons))
        done = "it may be deleted from some segments" if started else "nothing was deleted"
        super().__init__(
            f"cannot delete subscription {subscription!r} of topic {namespace}/{topic} from "
            f"every segment ({which}); {done}; ask again once every broker answers"
        )
