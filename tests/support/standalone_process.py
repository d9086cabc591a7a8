"""``stctl standalone`` as a user runs it: a real process on loopback ports, its brokers on free
ports it picks itself, up once it printed its hint."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

START_SECONDS = 60.0


@dataclass
class Standalone:
    process: asyncio.subprocess.Process
    url: str
    output: list[str]
    token: str  # DIR/admin.token: admin of every namespace
    data_dir: Path

    async def stop(self) -> int:
        self.process.send_signal(signal.SIGTERM)
        async with asyncio.timeout(60):
            return await self.process.wait()


@asynccontextmanager
async def standalone(data_dir: Path, *extra: str, port: int = 0) -> AsyncIterator[Standalone]:
    """``stctl standalone`` with its brokers on ``port`` and up, by default on free ports it
    picks itself (``--port 0``), and its controller on a free port."""
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "scalable_topics.cli",
        "standalone",
        "--data-dir",
        str(data_dir),
        "--port",
        str(port),
        "--controller-port",
        "0",
        *extra,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    assert process.stdout is not None and process.stderr is not None
    output: list[str] = []
    try:
        async with asyncio.timeout(START_SECONDS):
            while True:
                line = (await process.stdout.readline()).decode()
                if not line:
                    error = (await process.stderr.read()).decode()
                    raise AssertionError(f"standalone exited at start: {error}")
                output.append(line)
                if line.startswith("Stop with Ctrl-C"):  # the last line of the hint
                    break
        [serving] = [line for line in output if line.startswith("stctl standalone: serving ")]
        url = serving.split("serving ", 1)[1].strip()
        token = (data_dir / "admin.token").read_text().strip()
        yield Standalone(process, url, output, token, data_dir)
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
