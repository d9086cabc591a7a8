"""A real ``stctl controller`` process on loopback that tests can kill, or arm to die at a
failpoint."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from scalable_topics.controller.failpoints import ENVIRONMENT_VARIABLE

from .child_process import kill, terminate
from .ports import reported_address

# Short leases so that a failover takes about two seconds.
FAST_TIMING = ("--lease-duration", "2", "--renew-deadline", "1.5", "--retry-period", "0.25")


class ControllerProcess:
    """``listen`` serves consumer sessions on a loopback port the controller picks itself (it
    publishes that endpoint on the Leases of the topics it leads; ``listening_port`` reads it
    from the controller's address file)."""

    def __init__(
        self,
        root: Path,
        store_url: str,
        identity: str,
        *,
        listen: bool = False,
        failpoints: str = "",
        extra: tuple[str, ...] = (),
    ) -> None:
        self.identity = identity
        self.store_url = store_url
        self.failpoints = failpoints
        self.address_file = root / f"controller-{identity}.address"
        listening = ("--listen", "127.0.0.1:0", "--address-file", str(self.address_file))
        self.extra = (*listening, *extra) if listen else extra
        self.log_path = root / f"controller-{identity}.log"
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
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
                    "controller",
                    "--store",
                    self.store_url,
                    "--identity",
                    self.identity,
                    *FAST_TIMING,
                    *self.extra,
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
                env=environment,
            )

    async def listening_port(self) -> int:
        """The port this run listens on (``listen``), once it has bound it."""
        assert self.process is not None
        return (await reported_address(self.address_file, self.process, self.log_path))[1]

    @property
    def exit_code(self) -> int | None:
        assert self.process is not None
        return self.process.poll()

    def kill(self) -> None:
        kill(self.process)

    def stop(self) -> None:
        """SIGTERM: the controller releases its leases and exits."""
        terminate(self.process)

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")
