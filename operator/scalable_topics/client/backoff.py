"""Exponential backoff with full jitter, for reconnects and retried requests.

Jitter spreads the retries of many clients that lost the same broker at the same moment, so
that the broker coming back is not hit by all of them at once.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field


@dataclass
class Backoff:
    initial: float = 0.05
    maximum: float = 5.0
    multiplier: float = 2.0
    _attempt: int = field(default=0, init=False)
    _random: random.Random = field(default_factory=random.Random, repr=False)

    def next_delay(self) -> float:
        """Seconds to wait before the next attempt: uniform in [ceiling/2, ceiling], where the
        ceiling doubles with each attempt up to ``maximum``."""
        ceiling = min(self.maximum, self.initial * self.multiplier**self._attempt)
        self._attempt += 1
        return self._random.uniform(ceiling / 2, ceiling)

    def reset(self) -> None:
        """After a success: the next failure starts from ``initial`` again."""
        self._attempt = 0
