"""The load job as a child process of ``stctl standalone``: a local Spark (local[2]) that runs
every ``--load-job-interval`` seconds on one SparkSession.

The child starts one interval after standalone is up: there is no history to read before the
brokers have sampled for a while, and a short-lived standalone (a script, a test) never pays
for a JVM. Its output (the job's one line per run, Spark's warnings) goes line by line to this process's
log. A child that exits while the system is up is logged and started again after a backoff
that doubles up to a ceiling, and starts over once a run has lasted a while; it never takes
standalone down. Without PySpark or Java there is no child: standalone says so once, and the
controller's own evaluation of the load records keeps autoscale working.
"""

from __future__ import annotations

import asyncio
import importlib.util
import logging
import os
import shutil
import signal
import sys
from dataclasses import dataclass
from pathlib import Path

from ..tasks import cancel_and_wait

log = logging.getLogger(__name__)

_FIRST_DELAY, _MAX_DELAY = 1.0, 60.0
_STABLE_SECONDS = 120.0  # a run this long resets the backoff
# SIGTERM, then SIGKILL of its process group (the JVM too) after this: stopping Spark takes
# a few seconds on a busy machine.
_STOP_SECONDS = 30.0
_LINE_LIMIT = 1024 * 1024  # a longer output line is cut, not fatal


def load_job_problem() -> str | None:
    """Why the load job cannot run on this machine, or None."""
    if importlib.util.find_spec("pyspark") is None:
        return "PySpark is not installed (pip install 'scalable-topics[spark]')"
    java_home = os.environ.get("JAVA_HOME")
    java = Path(java_home, "bin", "java") if java_home else shutil.which("java")
    if java is None or not Path(java).is_file():
        return "Java is not installed (Spark needs a JVM: java on PATH, or JAVA_HOME)"
    return None


@dataclass(frozen=True, slots=True)
class LoadJobChild:
    store_url: str
    history: Path
    every: float  # seconds between runs
    windows: str  # --windows, as the job parses it
    system_namespace: str

    def argv(self) -> list[str]:
        return [
            sys.executable,
            "-m",
            "scalable_topics.loadjob",
            "--store",
            self.store_url,
            "--history",
            str(self.history),
            "--master",
            "local[2]",
            "--every",
            f"{self.every:g}",
            "--windows",
            self.windows,
            "--system-namespace",
            self.system_namespace,
            "--stop-on-stdin-eof",
        ]


class SupervisedLoadJob:
    """The load job child, restarted whenever it exits until :meth:`stop`."""

    def __init__(self, child: LoadJobChild) -> None:
        self.child = child
        self.starts = 0
        self._process: asyncio.subprocess.Process | None = None
        self._task: asyncio.Task[None] | None = None

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process is not None else None

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(
            self._supervise(), name="supervise the load job"
        )

    async def _spawn(self) -> asyncio.subprocess.Process:
        return await asyncio.create_subprocess_exec(
            *self.child.argv(),
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
            # Never written: the child stops when it closes, i.e. when we are gone.
            stdin=asyncio.subprocess.PIPE,
            env={
                **os.environ,
                "PYTHONUNBUFFERED": "1",
                "SPARK_LOCAL_IP": "127.0.0.1",  # one machine: no need to find a public address
                "PYSPARK_PYTHON": sys.executable,
            },
            start_new_session=True,  # its own process group: the JVM is stopped with it
            limit=_LINE_LIMIT,
        )

    async def _supervise(self) -> None:
        loop = asyncio.get_running_loop()
        delay = _FIRST_DELAY
        await asyncio.sleep(self.child.every)
        while True:
            started = loop.time()
            self._process = process = await self._spawn()
            self.starts += 1
            log.info("load job running as pid %d", process.pid)
            await _relay(process)
            code = await process.wait()
            _close_stdin(process)
            if loop.time() - started >= _STABLE_SECONDS:
                delay = _FIRST_DELAY
            log.warning("load job exited with code %s; starting it again in %.0f s", code, delay)
            await asyncio.sleep(delay)
            delay = min(delay * 2, _MAX_DELAY)

    async def stop(self) -> None:
        """Stop supervising first, so the exit is not taken for a crash; then SIGTERM, and
        SIGKILL of its process group if it has not left within the grace period."""
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
            log.warning("the load job did not stop within %ss; killing it", _STOP_SECONDS)
            os.killpg(process.pid, signal.SIGKILL)
            await process.wait()
        _close_stdin(process)


async def _relay(process: asyncio.subprocess.Process) -> None:
    """Each output line of the child to this process's log, until its output closes."""
    assert process.stdout is not None
    while True:
        try:
            line = await process.stdout.readline()
        except ValueError:
            log.info("load job: (an output line over %d bytes, cut)", _LINE_LIMIT)
            continue
        if not line:
            return
        text = line.decode(errors="replace").rstrip()
        if text:
            log.info("load job: %s", text)


def _close_stdin(process: asyncio.subprocess.Process) -> None:
    if process.stdin is not None:
        process.stdin.close()
