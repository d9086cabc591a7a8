"""Replacing a small file that holds a secret, or names one (a token, a key, a kubeconfig, the
client configuration): whole or not at all, with its mode from the moment it exists (never
readable by others, not even while it is written). Standard library only: the client, the API
server and the commands share it."""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path


def replace_file(path: Path, data: bytes, mode: int = 0o600) -> None:
    """Write ``data`` to a new file beside ``path`` and rename it over ``path``: a reader, or a
    crash, sees the old file or the new one. A symbolic link is followed, so the file it
    points at is replaced, not the link."""
    target = path.resolve()
    target.parent.mkdir(parents=True, exist_ok=True)
    # mkstemp creates the file 0600 and with a unique name: two writers never share one.
    fd, temporary = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as file:
            file.write(data)
            file.flush()
            os.fchmod(file.fileno(), mode)
            os.fsync(file.fileno())
        os.replace(temporary, target)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temporary)
        raise
    _sync_directory(target.parent)


def _sync_directory(directory: Path) -> None:
    """Make the rename durable; a file system that cannot sync a directory is left alone."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        with contextlib.suppress(OSError):
            os.fsync(fd)
    finally:
        os.close(fd)
