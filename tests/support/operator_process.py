"""A real ``stctl operator`` process (kopf and a controller) on loopback, against a Kubernetes
API named by a kubeconfig; tests can kill it, or arm it to die at a failpoint."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path

import aiohttp

from scalable_topics.controller.failpoints import ENVIRONMENT_VARIABLE

from .child_process import kill, terminate
from .ports import reported_address

READY_SECONDS = 60.0  # bounds a failing start only
# Leases short enough that a failover takes seconds, long enough for a loaded CI machine.
FAST_TIMING = ("--lease-duration", "4", "--renew-deadline", "3", "--retry-period", "0.5")


class OperatorProcess:
    def __init__(
        self,
        root: Path,
        kubeconfig: Path,
        identity: str,
        *,
        extra: tuple[str, ...] = (),
        failpoints: str = "",
        timing: tuple[str, ...] = FAST_TIMING,
    ) -> None:
        self.identity = identity
        self.kubeconfig = kubeconfig
        self.extra = extra
        self.failpoints = failpoints
        self.timing = timing
        self.address_file = root / f"operator-{identity}.address"
        self.log_path = root / f"operator-{identity}.log"
        self.process: subprocess.Popen[bytes] | None = None
        self.port = 0

    @property
    def url(self) -> str:
        """The controller endpoint: /readyz, /healthz, /metrics."""
        assert self.port, "the operator has not started yet"
        return f"http://127.0.0.1:{self.port}"

    async def start(self) -> None:
        """Start it; return once its endpoint listens (not yet ready: see ``wait_ready``)."""
        self.address_file.unlink(missing_ok=True)
        environment = {**os.environ, "PYTHONUNBUFFERED": "1"}
        environment.pop(ENVIRONMENT_VARIABLE, None)
        if self.failpoints:
            environment[ENVIRONMENT_VARIABLE] = self.failpoints
        with open(self.log_path, "ab") as log:
            self.process = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "scalable_topics.cli",
                    "operator",
                    "--kubeconfig",
                    str(self.kubeconfig),
                    "--identity",
                    self.identity,
                    "--listen",
                    "127.0.0.1:0",
                    "--address-file",
                    str(self.address_file),
                    "--health-listen",
                    "off",
                    *self.timing,
                    *self.extra,
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
                env=environment,
            )
        self.port = (await reported_address(self.address_file, self.process, self.log_path))[1]

    async def readiness(self) -> tuple[int, str]:
        """/readyz: (status, body); (0, why) when the endpoint does not answer."""
        try:
            async with (
                aiohttp.ClientSession() as http,
                http.get(self.url + "/readyz", timeout=aiohttp.ClientTimeout(total=5)) as answer,
            ):
                return answer.status, await answer.text()
        except (aiohttp.ClientError, TimeoutError) as error:
            return 0, str(error)

    async def wait_ready(self) -> None:
        async with asyncio.timeout(READY_SECONDS):
            while (await self.readiness())[0] != 200:
                if self.exit_code is not None:
                    raise RuntimeError(f"operator {self.identity} exited:\n{self.log()}")
                await asyncio.sleep(0.05)

    async def wait_exit(self, timeout: float = 60.0) -> int:
        assert self.process is not None
        async with asyncio.timeout(timeout):
            while (code := self.process.poll()) is None:
                await asyncio.sleep(0.05)
        return code

    @property
    def exit_code(self) -> int | None:
        assert self.process is not None
        return self.process.poll()

    def kill(self) -> None:
        kill(self.process)

    def stop(self) -> None:
        """SIGTERM: kopf stops, the controller releases its Leases, the process exits."""
        terminate(self.process, timeout=30)

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")
