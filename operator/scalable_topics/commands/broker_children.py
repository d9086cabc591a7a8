"""Broker child processes that ``stctl standalone`` keeps running.

Each child is ``stctl broker`` on its own data directory and port, its output appended to its
log file. A child that exits while the system is up is started again after a backoff that
doubles up to a ceiling and starts over once a run has lasted a while, so a broker that crashes
at start-up does not spin. Children run in their own session: Ctrl-C in the terminal reaches
only the standalone process, which then stops them in order. Each child's stdin is a pipe from
this process that is never written to; if this process dies without stopping them (SIGKILL,
OOM), the pipe closes and the children stop themselves instead of holding their ports.

A child given port 0 picks a free port and writes it to its address file; the supervisor reads
it there and starts the child on that same port every later time, so the broker's address does
not change across restarts.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ..listening import read_address_file
from ..store import BudgetSettings
from ..tasks import cancel_and_wait
from .broker_limits import limit_argv
from .timeout_flags import timeout_argv

log = logging.getLogger(__name__)

_FIRST_DELAY, _MAX_DELAY = 0.5, 10.0
_STABLE_SECONDS = 30.0  # a run this long resets the backoff
_STOP_SECONDS = 10.0  # SIGTERM, then SIGKILL after this
_ADDRESS_POLL_SECONDS = 0.05


@dataclass(frozen=True, slots=True)
class ChildBroker:
    broker_id: str
    data_dir: Path
    store_url: str
    host: str
    port: int  # 0: a free port, reported in address_file
    log_path: Path
    address_file: Path
    store_budget: BudgetSettings | None = None  # None: the store's default
    timeouts: Mapping[str, float] = field(default_factory=dict)  # --handshake-timeout...
    # BrokerConfig limits set on the command line (broker_limits.py); the rest default.
    limits: Mapping[str, int] = field(default_factory=dict)
    credentials: Sequence[str] = ()  # --auth-token-file FILE --token-public-key FILE...
    load_history: str = ""  # --load-history; empty: none
    load_history_flush: float = 60.0  # --load-history-flush

    def argv(self, port: int) -> list[str]:
        """The command line of a run on ``port`` (the child's own, or the one it reported)."""
        budget = self.store_budget
        flags = [] if budget is None else ["--store-qps", str(budget.qps)]
        if budget is not None and budget.limited:
            flags += ["--store-burst", str(budget.burst)]
        return [
            sys.executable,
            "-m",
            "scalable_topics.cli",
            "broker",
            "--data-dir",
            str(self.data_dir),
            "--store",
            self.store_url,
            "--host",
            self.host,
            "--port",
            str(port),
            "--address-file",
            str(self.address_file),
            "--broker-id",
            self.broker_id,
            "--stop-on-stdin-eof",
            *flags,
            *timeout_argv(self.timeouts),
            *limit_argv(dict(self.limits)),
            *self.credentials,
            *self._history_flags(),
        ]

    def _history_flags(self) -> list[str]:
        if not self.load_history:
            return []
        flush = str(self.load_history_flush)
        return ["--load-history", self.load_history, "--load-history-flush", flush]


class SupervisedBroker:
    """One child broker, restarted whenever it exits until :meth:`stop`."""

    def __init__(self, child: ChildBroker) -> None:
        self.child = child
        self.port = child.port  # known once the first run has reported it, for port 0
        self.starts = 0
        self._process: asyncio.subprocess.Process | None = None
        self._task: asyncio.Task[None] | None = None

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process is not None else None

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(
            self._supervise(), name=f"supervise {self.child.broker_id}"
        )

    async def _spawn(self) -> asyncio.subprocess.Process:
        self.child.data_dir.mkdir(parents=True, exist_ok=True)
        self.child.address_file.unlink(missing_ok=True)  # a previous run's
        output = await asyncio.to_thread(open, self.child.log_path, "ab")
        with output:  # the child keeps its own descriptor
            return await asyncio.create_subprocess_exec(
                *self.child.argv(self.port),
                stdout=output,
                stderr=asyncio.subprocess.STDOUT,
                # Never written: the child stops when it closes, i.e. when we are gone.
                stdin=asyncio.subprocess.PIPE,
                env={**os.environ, "PYTHONUNBUFFERED": "1"},
                start_new_session=True,
            )

    async def _supervise(self) -> None:
        loop = asyncio.get_running_loop()
        delay = _FIRST_DELAY
        while True:
            started = loop.time()
            self._process = await self._spawn()
            self.starts += 1
            log.info("%s running as pid %d", self.child.broker_id, self._process.pid)
            if self.port == 0:
                self.port = await self._reported_port(self._process)
            code = await self._process.wait()
            _close_stdin(self._process)
            if loop.time() - started >= _STABLE_SECONDS:
                delay = _FIRST_DELAY
            log.warning(
                "%s exited with code %s; starting it again in %.1f s (log: %s)",
                self.child.broker_id,
                code,
                delay,
                self.child.log_path,
            )
            await asyncio.sleep(delay)
            delay = min(delay * 2, _MAX_DELAY)

    async def _reported_port(self, process: asyncio.subprocess.Process) -> int:
        """The port the child wrote to its address file, or 0 if it exited before."""
        while process.returncode is None:
            address = await asyncio.to_thread(read_address_file, self.child.address_file)
            if address is not None:
                log.info("%s listens on port %d", self.child.broker_id, address[1])
                return address[1]
            await asyncio.sleep(_ADDRESS_POLL_SECONDS)
        return 0

    async def stop(self) -> None:
        """Stop supervising first, so the exit is not taken for a crash; then SIGTERM, and
        SIGKILL if the broker has not left within the grace period."""
        if self._task is not None:
            await cancel_and_wait(self._task)
        process = self._process
        if process is None or process.returncode is not None:
            return
        process.send_signal(signal.SIGTERM)
        try:
            async with asyncio.timeout(_STOP_SECONDS):
                await process.wait()
        except TimeoutError:
            log.warning(
                "%s did not stop within %ss; killing it", self.child.broker_id, _STOP_SECONDS
            )
            process.kill()
            await process.wait()
        _close_stdin(process)


def _close_stdin(process: asyncio.subprocess.Process) -> None:
    if process.stdin is not None:
        process.stdin.close()
