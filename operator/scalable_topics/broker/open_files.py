"""How many segments a broker can host: each one keeps files open, and a process may keep only
so many.

A hosted segment holds FILES_PER_SEGMENT descriptors for as long as it is hosted (the log's
data file and sparse index, and the cursor journal; the broker's one lock on its data directory
stands for the segments' own); RESERVED_FILES more are left for connections, the store, and
files read for a moment. Past
its capacity a broker refuses to create segments (BrokerFull, HTTP 507) instead of failing
every open, accept and fsync with EMFILE, and it announces the capacity with its heartbeat so
that the controller places segments on brokers with room.

``stctl broker`` raises its soft open-files limit to the hard one at start (as the Go runtime
does), or to ``--max-open-files`` (raising the hard limit too needs the privilege to).
"""

from __future__ import annotations

import resource

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


def segment_capacity(limit: int) -> int:
    """The segments a broker with ``limit`` open files can host."""
    return max(0, (limit - RESERVED_FILES) // FILES_PER_SEGMENT)
