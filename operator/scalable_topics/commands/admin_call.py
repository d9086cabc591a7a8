"""What every command that talks to the topic admin API shares: where the brokers are, the
token, the topic's name, the output format, and how failures become exit codes.

Exit codes: 0 done; 1 the operation failed, was refused, found nothing or timed out; 2 usage
(argparse's own, and a malformed URL or topic name).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import math
import os
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

from ..client.admin import DEFAULT_CONNECT_TIMEOUT, Admin
from ..client.errors import ClientError
from .output import OUTPUT_FORMATS, fail

DEFAULT_URL = "ws://127.0.0.1:6650"
DEFAULT_NAMESPACE = "default"
URL_VARIABLE, TOKEN_VARIABLE = "STCTL_URL", "STCTL_AUTH_TOKEN"

AdminWork = Callable[[Admin], Awaitable[int]]


def add_connection_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--url",
        default=os.environ.get(URL_VARIABLE, DEFAULT_URL),
        help=f"a broker's URL, or several comma-separated (default ${URL_VARIABLE}, "
        f"else {DEFAULT_URL})",
    )
    parser.add_argument(
        "--auth-token",
        default=os.environ.get(TOKEN_VARIABLE),
        help=f"the brokers' admin token (default ${TOKEN_VARIABLE})",
    )
    parser.add_argument(
        "--connect-timeout",
        type=_seconds,
        default=DEFAULT_CONNECT_TIMEOUT,
        metavar="SECONDS",
        help="give up connecting to a broker (TCP, TLS, the handshake) after this long, "
        f"naming the URL and why (default {DEFAULT_CONNECT_TIMEOUT:g})",
    )


def _seconds(value: str) -> float:
    try:
        seconds = float(value)
    except ValueError:
        seconds = math.nan
    if not math.isfinite(seconds) or seconds <= 0:
        raise argparse.ArgumentTypeError(f"expected a positive number of seconds, not {value!r}")
    return seconds


def add_topic_name(parser: argparse.ArgumentParser) -> None:
    """The one spelling of a topic on every command: ``TOPIC`` is ``NAME`` (in ``-n NS``, by
    default ``default``) or ``NAMESPACE/NAME``."""
    parser.add_argument(
        "topic",
        metavar="TOPIC",
        help="the topic: NAME (in the namespace -n gives) or NAMESPACE/NAME",
    )
    add_namespace_argument(parser)


def add_topic_arguments(parser: argparse.ArgumentParser) -> None:
    add_topic_name(parser)
    add_connection_arguments(parser)


def add_namespace_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "-n",
        "--namespace",
        default=None,
        help=f"the topic's namespace (default: {DEFAULT_NAMESPACE})",
    )


def add_output_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "-o",
        "--output",
        choices=OUTPUT_FORMATS,
        default="table",
        help="table or text (the same: for people, the default), or json for scripts",
    )


def topic_of(args: argparse.Namespace) -> str:
    """``NAMESPACE/NAME`` of the command's TOPIC and -n; ValueError (exit 2) when they name
    different namespaces or TOPIC is malformed."""
    namespace, slash, name = args.topic.rpartition("/")
    if not slash:
        return f"{args.namespace or DEFAULT_NAMESPACE}/{name}"
    if not namespace or not name or "/" in namespace:
        raise ValueError(f"a topic is named NAME or NAMESPACE/NAME, not {args.topic!r}")
    if args.namespace is not None and args.namespace != namespace:
        raise ValueError(
            f"topic {args.topic!r} is in namespace {namespace!r}, but -n says {args.namespace!r}"
        )
    return f"{namespace}/{name}"


def run_admin(args: argparse.Namespace, command: str, work: AdminWork) -> int:
    """Run ``work`` with an Admin on ``--url``; a refusal is one line on stderr and exit 1."""

    async def run() -> int:
        async with Admin(args.url, args.auth_token, connect_timeout=args.connect_timeout) as admin:
            return await work(admin)

    return run_command(command, run)


def run_command(command: str, run: Callable[[], Coroutine[Any, Any, int]]) -> int:
    """Run a command's coroutine: a client error is one line on stderr and exit 1, a
    malformed URL, topic name or input exit 2, Ctrl-C exit 130."""
    try:
        with contextlib.suppress(KeyboardInterrupt):
            return asyncio.run(run())
        return 130
    except ClientError as error:
        return fail(command, error.message)
    except ValueError as error:
        return fail(command, str(error), exit_code=2)
