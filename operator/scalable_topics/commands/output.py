"""How commands print: tables for people, JSON for scripts, one line on stderr for a failure."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable, Sequence

from ..admin.stats_table import columns

MISSING = "-"
OUTPUT_FORMATS = ("table", "text", "json")  # table and text are the same: for people


def text(value: object) -> str:
    """A table cell: ``-`` for nothing, comma-separated for lists."""
    if value is None or value == []:
        return MISSING
    if isinstance(value, list | tuple):
        return ",".join(str(item) for item in value)
    return str(value)


def print_json(data: object) -> None:
    sys.stdout.write(json.dumps(data, indent=2) + "\n")


def print_table(header: Sequence[str], rows: Iterable[Sequence[object]]) -> None:
    lines = columns([list(header), *([text(cell) for cell in row] for row in rows)])
    sys.stdout.write("\n".join(lines) + "\n")


def fail(command: str, message: str, exit_code: int = 1) -> int:
    """Print ``<command>: <message>`` as one line on stderr; return the exit code."""
    one_line = " ".join(message.split())
    print(f"{command}: {one_line}", file=sys.stderr)
    return exit_code
