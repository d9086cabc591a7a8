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
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ..listening import read_address_file
from ..store import BudgetSettings
from .broker_limits import limit_argv
from .supervised_process import Backoff, SupervisedProcess
from .timeout_flags import timeout_argv

log = logging.getLogger(__name__)

_BACKOFF = Backoff(first=0.5, most=10.0, stable=30.0)
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


class SupervisedBroker(SupervisedProcess):
    """One child broker, restarted whenever it exits until :meth:`stop`."""

    def __init__(self, child: ChildBroker) -> None:
        super().__init__(child.broker_id, _BACKOFF, _STOP_SECONDS)
        self.child = child
        self.port = child.port  # known once the first run has reported it, for port 0

    async def _spawn(self) -> asyncio.subprocess.Process:
        self.child.data_dir.mkdir(parents=True, exist_ok=True)
        self.child.address_file.unlink(missing_ok=True)  # a previous run's
        output = await asyncio.to_thread(open, self.child.log_path, "ab")
        with output:  # the child keeps its own descriptor
            return await asyncio.create_subprocess_exec(
                *self.child.argv(self.port),
                stdout=output,
                stderr=asyncio.subprocess.STDOUT,
                stdin=asyncio.subprocess.PIPE,
                env={**os.environ, "PYTHONUNBUFFERED": "1"},
                start_new_session=True,
            )

    async def _running(self, process: asyncio.subprocess.Process) -> None:
        if self.port == 0:
            self.port = await self._reported_port(process)

    def _exited(self, code: int | None, delay: float) -> None:
        log.warning(
            "%s exited with code %s; starting it again in %.1f s (log: %s)",
            self.name,
            code,
            delay,
            self.child.log_path,
        )

    async def _reported_port(self, process: asyncio.subprocess.Process) -> int:
        """The port the child wrote to its address file, or 0 if it exited before."""
        while process.returncode is None:
            address = await asyncio.to_thread(read_address_file, self.child.address_file)
            if address is not None:
                log.info("%s listens on port %d", self.name, address[1])
                return address[1]
            await asyncio.sleep(_ADDRESS_POLL_SECONDS)
        return 0
