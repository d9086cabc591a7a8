"""Stopping a background task from another task.

``task.cancel()`` followed by ``await task`` under ``suppress(CancelledError)`` has a trap: if
the awaiting task is itself cancelled meanwhile, its own CancelledError is suppressed too, and
it carries on as if nobody had asked it to stop (a controller that never shut down, say).
"""

from __future__ import annotations

import asyncio
from typing import Any


async def cancel_and_wait(task: asyncio.Task[Any]) -> None:
    """Cancel ``task`` and return once it has ended; raise what it failed with, if anything
    but the cancellation. A cancellation of the caller propagates."""
    task.cancel()
    await asyncio.wait({task})
    if not task.cancelled():
        task.result()
