"""Limits on delivered, unacknowledged messages: per consumer and per subscription.

A consumer (or a whole subscription) that holds ``limit`` messages delivered and not
acknowledged is *blocked*: it receives nothing more, whatever its permits, until
acknowledgements (or nacks, or its leaving) bring it down to half the limit; then it may
fill up to the limit again. Pulsar resumes at half too: resuming at the first acknowledgement
would hand out one message per ack, each in a frame of its own. Redeliveries count like first
deliveries: the limit is on what the consumer holds, not on what it was sent once.

Permits are untouched: a blocked consumer keeps the permits it was granted, and uses them
once it is unblocked. The dispatcher applies the limits by lowering, for the span of one
decision, the permits it looks at (see DispatcherCore.take_deliveries).
"""

from __future__ import annotations

from dataclasses import dataclass

NO_LIMIT = 0


@dataclass(frozen=True, slots=True)
class UnackedLimits:
    """``0`` is no limit (as in Pulsar's maxUnackedMessagesPerConsumer)."""

    per_consumer: int = NO_LIMIT
    per_subscription: int = NO_LIMIT

    def __post_init__(self) -> None:
        for name in ("per_consumer", "per_subscription"):
            value = getattr(self, name)
            if value < 0:
                raise ValueError(f"unacked limit {name} is 0 (none) or positive, not {value}")

    @property
    def any(self) -> bool:
        return bool(self.per_consumer or self.per_subscription)


class Gauge:
    """Whether one holder (a consumer, or the subscription) is blocked, with its hysteresis."""

    __slots__ = ("blocked", "limit")

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.blocked = False

    def room(self, held: int) -> int:
        """How many more messages the holder may receive now, holding ``held``."""
        if not self.limit:
            raise ValueError("a gauge without a limit has no room to count")
        if self.blocked:
            if held > self.limit // 2:
                return 0
            self.blocked = False
        return max(0, self.limit - held)

    def update(self, held: int) -> None:
        """After deliveries: at the limit, the holder is blocked."""
        if self.limit and held >= self.limit:
            self.blocked = True
