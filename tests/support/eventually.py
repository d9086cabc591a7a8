"""Waiting for a state that a system reaches on its own, when there is no event to wait on."""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Callable

TIMEOUT = 60.0  # bounds a failing test only: a passing one returns as soon as the state holds
INTERVAL = 0.05


async def eventually(
    check: Callable[[], bool | Awaitable[bool]],
    what: str = "the condition",
    *,
    timeout: float = TIMEOUT,
    interval: float = INTERVAL,
) -> None:
    """Return once ``check()`` (a function or a coroutine function) holds; fail naming ``what``
    when it has not within ``timeout`` seconds."""
    try:
        async with asyncio.timeout(timeout):
            while True:
                result = check()
                if inspect.isawaitable(result):
                    result = await result
                if result:
                    return
                await asyncio.sleep(interval)
    except TimeoutError:
        raise AssertionError(f"timed out after {timeout:g} s waiting for {what}") from None
