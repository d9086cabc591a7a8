"""The TopicSupervisor: one controller task per led topic, and nothing else makes them.

Discovery (which topics this replica leads, from shard ownership and the topic informer, or
kopf's event handler under ``stctl operator``) is kept apart from supervision: whoever discovers calls ``lead`` and
``stop``; the supervisor starts, stops and restarts the tasks. A task that fails is restarted
with a growing delay (exponential, with jitter; reset once a run lasted a while); one that
returns is done (its topic is gone). The tasks run their passes through a shared semaphore, so
that the burst of a start-up or a failover over thousands of topics makes progress at a
bounded concurrency instead of all at once.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Callable, Coroutine, Iterable
from dataclasses import dataclass
from typing import Any

from ..tasks import TaskOwner, cancel_all

log = logging.getLogger(__name__)

TopicKey = tuple[str, str]  # namespace, name
RunTopic = Callable[[TopicKey, int], Coroutine[Any, Any, None]]

RESTART_FIRST, RESTART_MAX = 0.5, 60.0
# Passes over topics running at once: a start-up or failover over thousands of topics goes
# through this many at a time.
DEFAULT_CONCURRENT_PASSES = 32
# A run that lasted this long counts as healthy: its next failure restarts at once.
HEALTHY_RUN_SECONDS = 60.0


@dataclass(eq=False, slots=True)
class _Run:
    key: TopicKey
    term: int
    task: asyncio.Task[None]


class TopicSupervisor:
    """Runs ``run_topic(key, term)`` for every topic it is told to lead."""

    def __init__(
        self,
        run_topic: RunTopic,
        *,
        restart_first: float = RESTART_FIRST,
        restart_max: float = RESTART_MAX,
        jitter: Callable[[], float] = random.random,
    ) -> None:
        self._run_topic = run_topic
        self._restart_first, self._restart_max = restart_first, restart_max
        self._jitter = jitter
        self._runs: dict[TopicKey, _Run] = {}
        self._tasks = TaskOwner("topic supervisor", log)
        self.restarts = 0

    @property
    def led(self) -> frozenset[TopicKey]:
        return frozenset(self._runs)

    def term_of(self, key: TopicKey) -> int | None:
        run = self._runs.get(key)
        return None if run is None else run.term

    def lead(self, key: TopicKey, term: int) -> None:
        """Run the topic's controller for ``term``; one running for an older term is stopped
        first (a shard lost and won again)."""
        run = self._runs.get(key)
        if run is not None and run.term == term:
            return
        previous = run.task if run is not None else None
        task = self._tasks.spawn(
            self._keep_running(key, term, previous), f"topic {key[0]}/{key[1]} term {term}"
        )
        self._runs[key] = _Run(key, term, task)

    async def stop(self, keys: Iterable[TopicKey]) -> None:
        """Stop the topics' controllers and return once they have stopped."""
        runs = [run for key in keys if (run := self._runs.pop(key, None)) is not None]
        await cancel_all([run.task for run in runs], log, "a topic controller")

    async def close(self) -> None:
        self._runs.clear()
        await self._tasks.close()

    async def _keep_running(
        self, key: TopicKey, term: int, previous: asyncio.Task[None] | None
    ) -> None:
        if previous is not None:
            await cancel_all([previous], log, "a topic controller")
        loop = asyncio.get_running_loop()
        delay = self._restart_first
        try:
            while True:
                started = loop.time()
                try:
                    await self._run_topic(key, term)
                    return  # done: the topic is gone
                except Exception:
                    log.exception("the controller of %s/%s failed; restarting", *key)
                self.restarts += 1
                if loop.time() - started >= HEALTHY_RUN_SECONDS:
                    delay = self._restart_first
                await asyncio.sleep(delay * (0.5 + self._jitter()))
                delay = min(delay * 2, self._restart_max)
        finally:
            run = self._runs.get(key)
            if run is not None and run.task is asyncio.current_task():
                del self._runs[key]
