"""``--handshake-timeout``, ``--auth-timeout`` and ``--body-timeout``: how long a broker
waits for a slow or silent peer (BrokerConfig's fields of the same names), for ``stctl broker``
and ``stctl standalone``, which passes them to every broker it runs."""

from __future__ import annotations

import argparse
import math
from collections.abc import Mapping

# flag, BrokerConfig field, default (BrokerConfig's), what it bounds
_FLAGS = (
    (
        "--handshake-timeout",
        "handshake_timeout",
        10,
        "seconds a connection has to send a whole HTTP request head, the WebSocket upgrade "
        "included, from connecting or from its previous response; then it is closed. Also how "
        "long an idle keep-alive HTTP connection stays open",
    ),
    (
        "--auth-timeout",
        "auth_timeout",
        10,
        "seconds a WebSocket has after the upgrade to authenticate (send Connect); then it is "
        "closed with "
        "1008 (policy violation)",
    ),
    (
        "--body-timeout",
        "body_timeout",
        30,
        "seconds an HTTP request body (the admin APIs') has to arrive whole; then it is "
        "answered 408 and the connection closed",
    ),
)


def _seconds(value: str) -> float:
    try:
        seconds = float(value)
    except ValueError:
        seconds = math.nan
    if not math.isfinite(seconds) or seconds <= 0:
        raise argparse.ArgumentTypeError(f"expected seconds, a number > 0, not {value!r}")
    return seconds


def add_timeout_flags(parser: argparse.ArgumentParser) -> None:
    for flag, _, default, bounds in _FLAGS:
        parser.add_argument(flag, type=_seconds, metavar="S", help=f"{bounds} (default {default})")


def timeouts(args: argparse.Namespace) -> dict[str, float]:
    """The BrokerConfig fields of the flags given (the others keep BrokerConfig's default)."""
    given = {field: getattr(args, field) for _, field, _, _ in _FLAGS}
    return {field: seconds for field, seconds in given.items() if seconds is not None}


def timeout_argv(settings: Mapping[str, float]) -> list[str]:
    """The flags that give a ``stctl broker`` child the same ``settings``."""
    argv: list[str] = []
    for flag, field, _, _ in _FLAGS:
        if field in settings:
            argv += [flag, repr(settings[field])]
    return argv
