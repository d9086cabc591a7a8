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
import sys
from dataclasses import dataclass
from pathlib import Path

from .supervised_process import Backoff, SupervisedProcess

log = logging.getLogger(__name__)

_BACKOFF = Backoff(first=1.0, most=60.0, stable=120.0)
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


class SupervisedLoadJob(SupervisedProcess):
    """The load job child, restarted whenever it exits until :meth:`stop`; its first run
    comes one interval after start."""

    def __init__(self, child: LoadJobChild) -> None:
        super().__init__("load job", _BACKOFF, _STOP_SECONDS, first_run_after=child.every)
        self.child = child

    async def _spawn(self) -> asyncio.subprocess.Process:
        return await asyncio.create_subprocess_exec(
            *self.child.argv(),
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
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

    async def _running(self, process: asyncio.subprocess.Process) -> None:
        await _relay(process)


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
