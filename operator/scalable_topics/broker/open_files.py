"""How many segments and connections a broker can hold: each keeps files open, and a process
may keep only so many.

A hosted segment holds FILES_PER_SEGMENT descriptors for as long as it is hosted (the log's
data file and sparse index, and the cursor journal; the broker's one lock on its data directory
stands for the segments' own), a client's WebSocket one (its socket). The connections come
first: ``--max-connections``, or half the open-files limit when that is lower, so that a broker
with few files still hosts segments. RESERVED_FILES are left for the store, the links to
controllers and files read for a moment, and the segments have the rest. Past its capacity a
broker refuses to create segments (BrokerFull, HTTP 507), and past its connections refuses
upgrades (503, connection_limits.py), instead of failing every open, accept and fsync with
EMFILE; it announces its segment capacity with its heartbeat so that the controller places
segments on brokers with room.

``stctl broker`` raises its soft open-files limit to the hard one at start (as the Go runtime
does), or to ``--max-open-files`` (raising the hard limit too needs the privilege to).
"""

from __future__ import annotations

import resource
from dataclasses import dataclass

FILES_PER_SEGMENT = 3
RESERVED_FILES = 1024


class OpenFilesLimitError(Exception):
    """The open-files limit asked for cannot be set; the message says what to do."""


def raise_open_files_limit(wanted: int | None = None) -> int:
    """Raise the soft limit on open files to ``wanted`` (default: the hard limit); the soft
    limit now."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = hard if wanted is None else wanted
    if target == resource.RLIM_INFINITY:
        return soft
    try:
        if target > hard and hard != resource.RLIM_INFINITY:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, target))
        elif target != soft:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
    except (OSError, ValueError) as error:
        raise OpenFilesLimitError(
            f"cannot raise the open files limit to {target}: the hard limit is {hard} "
            f"({error}); raise it for the broker (ulimit -Hn, LimitNOFILE, the container "
            "runtime) or ask for less"
        ) from None
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


def open_files_limit() -> int:
    soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    return soft if soft != resource.RLIM_INFINITY else 2**31


def segment_capacity(limit: int, *, connections: int) -> int:
    """The segments a broker with ``limit`` open files, ``connections`` of them for
    connections, can host."""
    return max(0, (limit - RESERVED_FILES - connections) // FILES_PER_SEGMENT)


@dataclass(frozen=True)
class FileBudget:
    """How a broker's open files are shared out."""

    limit: int  # the process's open-files limit
    connections: int  # WebSockets served at once
    segments: int  # segments hosted at once


def file_budget(max_connections: int, limit: int | None = None) -> FileBudget:
    """The share of ``limit`` open files (default: the process's) for ``max_connections``
    connections, lowered to half the limit, and for segments."""
    files = open_files_limit() if limit is None else limit
    connections = min(max_connections, files // 2)
    return FileBudget(files, connections, segment_capacity(files, connections=connections))
