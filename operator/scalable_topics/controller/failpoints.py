"""Failpoints: named places where a test can have the controller die, exactly there.

A process started with ``SCALABLE_TOPICS_FAILPOINTS=scale:planned`` (a comma-separated list)
kills itself with SIGKILL the first time it reaches that point, as a crash would: no cleanup,
no lease release. The fault-injection tests use this to stop a leader between every pair of
split and merge steps. Without the variable a failpoint costs one set lookup.
"""

from __future__ import annotations

import os
import signal

ENVIRONMENT_VARIABLE = "SCALABLE_TOPICS_FAILPOINTS"

_armed = frozenset(
    name.strip() for name in os.environ.get(ENVIRONMENT_VARIABLE, "").split(",") if name.strip()
)


def failpoint(name: str) -> None:
    if name in _armed:
        os.kill(os.getpid(), signal.SIGKILL)
