"""Free ports without bind races.

Binding port 0, closing the probe and handing its number to a server races with every other
process on the machine: the port can be taken before the server binds it. Instead a server in
this process is built on a socket that stays bound (``loopback_socket``), and a server process
binds port 0 itself and writes the port it got to an address file (``--address-file``), which
``reported_address`` waits for.
"""

from __future__ import annotations

import asyncio
import random
import socket
import subprocess
from pathlib import Path

from scalable_topics.listening import bound_address, listening_socket, read_address_file

ADDRESS_SECONDS = 30.0  # bounds a failing start only
_POLL_SECONDS = 0.02


def loopback_socket(port: int = 0) -> socket.socket:
    """A socket listening on a free port of 127.0.0.1 (or on ``port``, say the one a stopped
    server used, to start it again at the same address), held until a server serves on it."""
    return listening_socket("127.0.0.1", port)


def port_of(sock: socket.socket) -> int:
    return bound_address(sock)[1]


async def reported_address(
    path: Path,
    process: subprocess.Popen[bytes] | asyncio.subprocess.Process,
    log: Path | None = None,
) -> tuple[str, int]:
    """The (host, port) a server process wrote to ``path``; fail at once if it exits first."""
    async with asyncio.timeout(ADDRESS_SECONDS):
        while True:
            address = read_address_file(path)
            if address is not None:
                return address
            code = process.poll() if isinstance(process, subprocess.Popen) else process.returncode
            if code is not None:
                output = (
                    "" if log is None else await asyncio.to_thread(log.read_text, errors="replace")
                )
                raise RuntimeError(f"the server exited with {code} before listening:\n{output}")
            await asyncio.sleep(_POLL_SECONDS)


def port_below_the_ephemeral_range() -> int:
    """A free loopback port for a server that can only be given a number (kopf's liveness
    endpoint binds its own socket and never says which port 0 got). It is taken below the
    kernel's ephemeral range, where no port-0 bind on this machine ever lands, so the
    usual race with the rest of the machine does not apply; what remains is a server that
    binds fixed ports, which the test suite never starts."""
    try:
        text = Path("/proc/sys/net/ipv4/ip_local_port_range").read_text()
        first_ephemeral = int(text.split()[0])
    except (OSError, ValueError, IndexError):
        first_ephemeral = 32768  # Linux's default
    low = max(1024, first_ephemeral - 10000)
    for port in random.sample(range(low, first_ephemeral), 200):
        try:
            listening_socket("127.0.0.1", port).close()
        except OSError:
            continue
        return port
    raise RuntimeError(f"no free port in {low}-{first_ephemeral - 1}")
