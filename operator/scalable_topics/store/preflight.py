"""Whether a store URL can be used at all, checked once before a server starts.

What no retry can mend is a configuration error: an embedded store whose directory does not
exist or whose file cannot be opened, a kubeconfig that is missing, unreadable or names no
such context, an in-cluster service account without its token. A server told so at start says
it in one line and exits, instead of retrying the same failure for ever. What may mend on its
own (an API server that cannot be reached yet) is not checked here: the informers retry it.
"""

from __future__ import annotations

import os
from pathlib import Path
from urllib.parse import unquote, urlsplit

from .embedded import EmbeddedStore
from .errors import StoreError


class StoreUnusable(Exception):
    """The store cannot be used with this configuration; the message says why."""


async def check_store(url: str) -> None:
    """Raise StoreUnusable naming the problem; ValueError for a URL no adapter serves."""
    parts = urlsplit(url)
    if parts.scheme == "embedded":
        await _check_embedded(Path(unquote(parts.path)))
    elif parts.scheme == "kubernetes":
        # Imported here, as open_store does: kubernetes_asyncio loads only for this adapter.
        from .kubernetes import load_configuration, parse_url

        try:
            await load_configuration(parse_url(url))
        except StoreError as error:
            raise StoreUnusable(str(error)) from None
    else:
        from .url import default_budget

        default_budget(url)  # raises the ValueError listing the supported forms


async def _check_embedded(path: Path) -> None:
    problem = _file_problem(path)
    if problem is not None:
        raise StoreUnusable(f"cannot open the store {path}: {problem}")
    try:
        store = await EmbeddedStore.open(path)
    except StoreError as error:
        raise StoreUnusable(f"cannot open the store {path}: {error}") from None
    await store.close()


def _file_problem(path: Path) -> str | None:
    directory = path.parent
    if not directory.is_dir():
        return f"directory {directory} {'is not a directory' if directory.exists() else 'does not exist'}"
    if path.exists() and not path.is_file():
        return "it is not a file"
    # SQLite in WAL mode writes -wal and -shm files beside the database.
    if not os.access(directory, os.W_OK | os.X_OK):
        return f"directory {directory} is not writable"
    return None
