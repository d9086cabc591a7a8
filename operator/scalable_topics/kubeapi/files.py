"""Files the API server keeps beside its store: written whole or not at all, with the mode
given from the moment they exist (a token or a key is never readable by others, not even while
it is written)."""

from __future__ import annotations

import os
from pathlib import Path


def write_replacing(path: Path, data: bytes, mode: int) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.tmp")
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    with os.fdopen(fd, "wb") as file:
        file.write(data)
    os.replace(temporary, path)
