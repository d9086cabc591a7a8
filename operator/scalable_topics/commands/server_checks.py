"""What a server command checks before it starts, so that a configuration error is one line on
stderr and exit 1, not a traceback or a retry loop logging the same failure for ever: the store
can be used (store/preflight.py) and a data directory can hold data."""

from __future__ import annotations

import tempfile
from pathlib import Path

from ..store.preflight import StoreUnusable, check_store


async def store_problem(url: str) -> str | None:
    """Why the store ``url`` names cannot be used, or None (ValueError for a URL no adapter
    serves: a usage error)."""
    try:
        await check_store(url)
    except StoreUnusable as error:
        return " ".join(str(error).split())  # one line: a YAML error spans several
    return None


def data_directory_problem(path: Path) -> str | None:
    """Create ``path`` if missing; why it cannot hold data, or None."""
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        return f"cannot use data directory {path}: {error.strerror or error}"
    try:
        with tempfile.TemporaryFile(dir=path):
            pass
    except OSError as error:
        return f"data directory {path} is not writable: {error.strerror or error}"
    return None
