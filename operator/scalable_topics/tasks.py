"""Owning background tasks: stopping them without swallowing the stopper's own cancellation.

``task.cancel()`` followed by ``await task`` under ``suppress(CancelledError)`` has a trap: if
the awaiting task is itself cancelled meanwhile, its own CancelledError is suppressed too, and
it carries on as if nobody had asked it to stop (a controller that never shut down, say). The
helpers here wait with ``asyncio.wait``, which never raises the awaited task's outcome, so a
CancelledError that reaches the caller is always the caller's own.

A failed background task is reported once: :class:`TaskOwner` logs it when it happens (which
also marks it retrieved, so asyncio never reports "Task exception was never retrieved").
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Coroutine, Iterable
from typing import Any, TypeVar

T = TypeVar("T")

log = logging.getLogger(__name__)


async def cancel_and_wait(task: asyncio.Task[Any]) -> None:
    """Cancel ``task`` and return once it has ended; raise what it failed with, if anything
    but the cancellation. A cancellation of the caller propagates."""
    task.cancel()
    await asyncio.wait({task})
    if not task.cancelled():
        task.result()


async def gather_settled(*work: Awaitable[T]) -> list[T]:
    """Run ``work`` side by side and return the results in order. A failure is raised only
    once every one has ended (the first, in order), so none is left running behind the
    caller's error; ``asyncio.gather`` alone raises at once and abandons the rest. A
    cancellation of the caller cancels them all."""
    outcomes = await asyncio.gather(*work, return_exceptions=True)
    results: list[T] = []
    for outcome in outcomes:
        if isinstance(outcome, BaseException):
            raise outcome
        results.append(outcome)
    return results


async def cancel_all(
    tasks: Iterable[asyncio.Task[Any]], logger: logging.Logger = log, what: str = "a task"
) -> None:
    """Cancel every task and return once all have ended; a failure other than the
    cancellation is logged (``what`` names the tasks), not raised. A cancellation of the
    caller propagates."""
    pending = set(tasks)
    if not pending:
        return
    for task in pending:
        task.cancel()
    await asyncio.wait(pending)
    for task in pending:
        report_failure(task, logger, what)


def report_failure(task: asyncio.Task[Any], logger: logging.Logger, what: str) -> None:
    """Log a finished task's failure (marking it retrieved); nothing for success or
    cancellation."""
    if task.cancelled():
        return
    error = task.exception()
    if error is not None:
        logger.error("%s (%s) failed", what, task.get_name(), exc_info=error)


class TaskOwner:
    """The background tasks of one component. Each is cancelled and awaited by :meth:`close`;
    a failure is logged once, as it happens, unless ``on_done`` takes the finished task and
    deals with it itself."""

    def __init__(self, what: str, logger: logging.Logger = log) -> None:
        self._what = what
        self._log = logger
        self._tasks: set[asyncio.Task[Any]] = set()
        self._closed = False

    def __len__(self) -> int:
        return len(self._tasks)

    @property
    def closed(self) -> bool:
        return self._closed

    def spawn(
        self,
        work: Coroutine[Any, Any, T],
        name: str,
        on_done: Callable[[asyncio.Task[T]], None] | None = None,
    ) -> asyncio.Task[T]:
        if self._closed:
            work.close()
            raise RuntimeError(f"{self._what} is closed: it starts no more tasks")
        task = asyncio.get_running_loop().create_task(work, name=name)
        self._tasks.add(task)

        def finished(done: asyncio.Task[T]) -> None:
            self._tasks.discard(done)
            if on_done is not None:
                on_done(done)
            else:
                report_failure(done, self._log, self._what)

        task.add_done_callback(finished)
        return task

    async def close(self) -> None:
        """Cancel every task and return once all have ended. A cancellation of the caller
        propagates; the tasks' failures are reported by their done callbacks."""
        self._closed = True
        pending = set(self._tasks)
        for task in pending:
            task.cancel()
        if pending:
            await asyncio.wait(pending)
