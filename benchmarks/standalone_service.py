"""``stctl standalone`` for the benchmarks that drive it through the public client."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path

START_SECONDS = 60.0


async def start_standalone(root: Path) -> tuple[subprocess.Popen[bytes], Path]:
    """Standalone on ports of its own choosing (--port 0), and its client configuration (the
    URL and the admin token), written once it serves. Its output goes to a file: a pipe nobody
    reads would fill up and stall it. The caller terminates the process."""
    output = root / "standalone.log"
    data = root / "data"
    with output.open("wb") as log:
        process = subprocess.Popen(  # noqa: ASYNC220 - a long-lived child, started once
            [
                *(sys.executable, "-m", "scalable_topics.cli", "standalone"),
                *("--data-dir", str(data), "--port", "0", "--controller-port", "0"),
                "--no-kube-api",
                # No Spark load job: it would share the cores with what is measured.
                *("--load-job-interval", "0"),
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
    async with asyncio.timeout(START_SECONDS):
        while "stctl standalone: serving" not in output.read_text():
            if process.poll() is not None:
                raise RuntimeError(f"standalone did not start:\n{output.read_text()}")
            await asyncio.sleep(0.1)
    return process, data / "stctl-config"
