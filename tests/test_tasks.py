"""Stopping a background task: the stopper's own cancellation must not be swallowed."""

from __future__ import annotations

import asyncio

import pytest

from scalable_topics.tasks import cancel_and_wait, gather_settled


async def test_a_cancelled_stopper_stays_cancelled() -> None:
    """The stopper is cancelled while the task it stops is still winding down."""
    release = asyncio.Event()

    async def slow_to_stop() -> None:
        try:
            await asyncio.Event().wait()
        finally:
            await release.wait()  # cleanup that takes a while

    async def stopper(task: asyncio.Task[None]) -> str:
        await cancel_and_wait(task)
        await asyncio.Event().wait()  # carrying on as if nobody asked it to stop
        return "carried on"

    background = asyncio.create_task(slow_to_stop())
    await asyncio.sleep(0)
    stopping = asyncio.create_task(stopper(background))
    await asyncio.sleep(0)
    stopping.cancel()
    release.set()
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(stopping, 5)
    assert background.cancelled()


async def test_the_task_failure_is_raised_and_a_finished_task_is_fine() -> None:
    async def fails_on_cancel() -> None:
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            raise RuntimeError("cleanup failed") from None

    failing = asyncio.create_task(fails_on_cancel())
    await asyncio.sleep(0)
    with pytest.raises(RuntimeError, match="cleanup failed"):
        await cancel_and_wait(failing)

    async def done() -> None:
        return None

    finished = asyncio.create_task(done())
    await finished
    await cancel_and_wait(finished)


async def test_a_failure_is_raised_only_once_every_sibling_has_ended() -> None:
    finished: list[str] = []
    release = asyncio.Event()

    async def slow() -> str:
        await release.wait()
        finished.append("slow")
        return "slow"

    async def failing() -> str:
        release.set()  # the sibling can end now, but only after this failure is in
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom"):
        await gather_settled(slow(), failing())
    assert finished == ["slow"]


async def test_results_come_in_order_and_a_cancelled_caller_cancels_them_all() -> None:
    async def value(n: int) -> int:
        await asyncio.sleep(0)
        return n

    assert await gather_settled(value(1), value(2), value(3)) == [1, 2, 3]

    started = asyncio.Event()
    cancelled: list[int] = []

    async def forever(n: int) -> None:
        try:
            started.set()
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.append(n)
            raise

    caller = asyncio.create_task(gather_settled(forever(1), forever(2)))
    await started.wait()
    caller.cancel()
    with pytest.raises(asyncio.CancelledError):
        await caller
    assert sorted(cancelled) == [1, 2]
