"""Listening sockets that a server binds before it starts, and the address file that says where.

A server that binds its own port inside its framework learns a port of 0 (any free port) only
after it has announced its address (a broker registers ``ws://HOST:PORT``, a controller
publishes its endpoint). Binding first, then building the server on that socket, lets every
server take ``0`` and announce the port it really has. The socket is held from bind to serve,
so no other process can take the port in between (a probe bound and closed, then handed to a
child, can lose it to anyone).

The address file is how a supervisor, a script or a test learns that port: one line
``HOST:PORT`` (``[HOST]:PORT`` for IPv6), replaced atomically once the socket listens.
"""

from __future__ import annotations

import os
import socket
import tempfile
from pathlib import Path

_BACKLOG = 128  # aiohttp's default for the sites it binds itself


def listening_socket(host: str, port: int) -> socket.socket:
    """A socket listening on ``host:port`` (port 0: one the kernel picks); raise OSError when
    the address cannot be bound. SO_REUSEADDR, as aiohttp's own sites: a port a previous run
    left in TIME_WAIT can be taken again at once."""
    family, kind, proto, _, address = socket.getaddrinfo(
        host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
    )[0]
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        sock.listen(_BACKLOG)
        sock.setblocking(False)
    except BaseException:
        sock.close()
        raise
    return sock


def bound_address(sock: socket.socket) -> tuple[str, int]:
    """(host, port) a listening socket is bound to."""
    name = sock.getsockname()
    return str(name[0]), int(name[1])


def format_address(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def parse_address(text: str) -> tuple[str, int]:
    """``HOST:PORT`` or ``[HOST]:PORT`` -> (host, port); raise ValueError otherwise."""
    host, _, port = text.strip().rpartition(":")
    if not host or not port.isdecimal() or not 0 <= int(port) <= 65535:
        raise ValueError(f"expected HOST:PORT with a port 0-65535, not {text.strip()!r}")
    return host.removeprefix("[").removesuffix("]"), int(port)


def write_address_file(path: Path, host: str, port: int) -> None:
    """Write ``HOST:PORT`` to ``path`` atomically: a reader sees no file or the whole line."""
    directory = path.parent
    directory.mkdir(parents=True, exist_ok=True)
    fd, temporary = tempfile.mkstemp(dir=directory, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "w") as out:
            out.write(format_address(host, port) + "\n")
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def read_address_file(path: Path) -> tuple[str, int] | None:
    """The address in ``path``, or None while there is no such file yet."""
    try:
        text = path.read_text()
    except FileNotFoundError:
        return None
    return parse_address(text)
