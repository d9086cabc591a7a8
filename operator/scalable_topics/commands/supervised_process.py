"""A child process of ``stctl standalone`` that is started again whenever it exits.

The restart backs off (doubling from ``Backoff.first`` to ``Backoff.most``) so that a child
that cannot start does not spin, and forgets its backoff after a run of ``Backoff.stable``
seconds, so that a rare crash is repaired at once. ``stop`` ends the supervision first, so
the exit it causes is not taken for a crash, then sends SIGTERM and, past a grace period,
SIGKILL to the child's process group (each child runs in a session of its own: what it starts,
a JVM for instance, goes with it).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
from abc import ABC, abstractmethod
from dataclasses import dataclass

from ..tasks import cancel_and_wait

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Backoff:
    first: float  # seconds before the first restart
    most: float  # the longest wait between two restarts
    stable: float  # a run this long resets the wait to ``first``


class SupervisedProcess(ABC):
    def __init__(
        self, name: str, backoff: Backoff, stop_seconds: float, first_run_after: float = 0.0
    ) -> None:
        self.name = name
        self._first_run_after = first_run_after
        self.starts = 0
        self._backoff = backoff
        self._stop_seconds = stop_seconds
        self._process: asyncio.subprocess.Process | None = None
        self._task: asyncio.Task[None] | None = None

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process is not None else None

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(
            self._supervise(), name=f"supervise {self.name}"
        )

    @abstractmethod
    async def _spawn(self) -> asyncio.subprocess.Process:
        """Start one run, in a session of its own, its stdin a pipe never written (the child
        stops when it closes, i.e. when this process is gone)."""

    @abstractmethod
    async def _running(self, process: asyncio.subprocess.Process) -> None:
        """What a run needs from its supervisor while it runs; returns early or at its end."""

    def _exited(self, code: int | None, delay: float) -> None:
        log.warning("%s exited with code %s; starting it again in %.1f s", self.name, code, delay)

    async def _supervise(self) -> None:
        loop = asyncio.get_running_loop()
        delay = self._backoff.first
        await asyncio.sleep(self._first_run_after)
        while True:
            started = loop.time()
            self._process = process = await self._spawn()
            self.starts += 1
            log.info("%s running as pid %d", self.name, process.pid)
            await self._running(process)
            code = await process.wait()
            _close_stdin(process)
            if loop.time() - started >= self._backoff.stable:
                delay = self._backoff.first
            self._exited(code, delay)
            await asyncio.sleep(delay)
            delay = min(delay * 2, self._backoff.most)

    async def stop(self) -> None:
        if self._task is not None:
            await cancel_and_wait(self._task)
        process = self._process
        if process is None or process.returncode is not None:
            return
        process.send_signal(signal.SIGTERM)
        try:
            async with asyncio.timeout(self._stop_seconds):
                await process.wait()
        except TimeoutError:
            log.warning("%s did not stop within %ss; killing it", self.name, self._stop_seconds)
            with contextlib.suppress(ProcessLookupError):  # gone since the timeout
                os.killpg(process.pid, signal.SIGKILL)
            await process.wait()
        _close_stdin(process)


def _close_stdin(process: asyncio.subprocess.Process) -> None:
    if process.stdin is not None:
        process.stdin.close()
