"""What the tests of a leader's per-topic coordinators (consumer sessions, exclusive producer
grants) share: topic default/orders in a MemoryStore, its Segment objects, and coordinators
running on loop time."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from typing import Any, Protocol, TypeVar

from scalable_topics.model.clock import SystemClock
from scalable_topics.model.hash_range import HashRange
from scalable_topics.model.resources import TOPIC_LABEL, Segment, segment_object_name
from scalable_topics.model.segment import descriptor
from support.memory_store import MemoryStore

T0 = datetime(2026, 1, 1, tzinfo=UTC)
GRACE = 30.0
NS, NAME = "default", "orders"


async def add_segment_object(store: MemoryStore, segment_id: int, start: int, end: int) -> str:
    """Create the Segment object of ``segment_id``, served by ws://broker-<id % 2>; its
    descriptor."""
    name_of = descriptor(segment_id, HashRange(start, end))
    name = segment_object_name(NAME, name_of)
    await store.create(
        {
            "apiVersion": "scalabletopics.dev/v1alpha1",
            "kind": "Segment",
            "metadata": {"name": name, "namespace": NS, "labels": {TOPIC_LABEL: NAME}},
            "spec": {
                "topic": NAME,
                "segmentId": segment_id,
                "hashRange": {"start": start, "end": end},
            },
        }
    )
    await store.patch_status(
        Segment.KIND, NS, name, {"status": {"broker": f"ws://broker-{segment_id % 2}"}}
    )
    return name_of


def loop_clock() -> SystemClock:
    """A clock on the running loop's time (fake under looptime)."""
    return SystemClock(asyncio.get_running_loop().time)


class _Runs(Protocol):
    async def run(self) -> None: ...


C = TypeVar("C", bound=_Runs)


class Running:
    """Coordinators whose ``run`` was started here; ``stop`` cancels them all."""

    def __init__(self) -> None:
        self._tasks: list[asyncio.Task[Any]] = []

    def start(self, coordinator: C) -> C:
        self._tasks.append(asyncio.get_running_loop().create_task(coordinator.run()))
        return coordinator

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
