"""Stopping the server processes tests start: gently (SIGTERM, as Kubernetes does), or as a
crash would (SIGKILL)."""

from __future__ import annotations

import signal
import subprocess


def terminate(process: subprocess.Popen[bytes] | None, timeout: float = 15.0) -> None:
    """SIGTERM, and SIGKILL if it has not exited within ``timeout`` seconds."""
    if process is None or process.poll() is not None:
        return
    process.terminate()
    try:
        process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def kill(process: subprocess.Popen[bytes] | None) -> None:
    """SIGKILL: no cleanup, no lease released."""
    if process is not None and process.poll() is None:
        process.send_signal(signal.SIGKILL)
        process.wait(timeout=30)
