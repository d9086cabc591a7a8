"""What every command that talks to the topic admin API shares: where the brokers are, the
token, the topic's name, the output format, and how failures become exit codes.

The URL, token and namespace are resolved after parsing, as kubectl resolves them: a flag beats
``$STCTL_URL`` / ``$STCTL_AUTH_TOKEN``, which beat the context of the client configuration file
(``--config``, ``$STCTL_CONFIG`` or ``~/.config/stctl/config``; ``--context``), which beats the
defaults (client/client_settings.py).

Exit codes: 0 done; 1 the operation failed, was refused, found nothing or timed out; 2 usage
(argparse's own, a malformed URL or topic name, and a configuration file that cannot be used).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import math
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

from ..client.admin import DEFAULT_CONNECT_TIMEOUT, Admin
from ..client.client_config import ClientConfigError
from ..client.client_settings import (
    CONFIG_VARIABLE,
    DEFAULT_SERVICE_URL,
    TOKEN_VARIABLE,
    URL_VARIABLE,
    ClientSettings,
)
from ..client.errors import ClientError
from ..client.topic_layout import DEFAULT_NAMESPACE
from .output import OUTPUT_FORMATS, fail

DEFAULT_URL = DEFAULT_SERVICE_URL

AdminWork = Callable[[Admin], Awaitable[int]]


def add_config_file_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--config",
        metavar="FILE",
        help=f"the client configuration file (default ${CONFIG_VARIABLE}, else "
        "~/.config/stctl/config if it exists; see docs/client-config.md)",
    )


def add_config_arguments(parser: argparse.ArgumentParser) -> None:
    """``--config`` and ``--context``: which client configuration file, and which context."""
    add_config_file_argument(parser)
    parser.add_argument(
        "--context",
        metavar="NAME",
        help="the context of the configuration file to use (default: its current-context)",
    )


def add_connection_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--url",
        help=f"a broker's URL, or several comma-separated (default ${URL_VARIABLE}, else the "
        f"context's cluster, else {DEFAULT_URL})",
    )
    parser.add_argument(
        "--auth-token",
        help=f"the token (default ${TOKEN_VARIABLE}, else the context's user's; an empty one "
        "sends none)",
    )
    add_config_arguments(parser)
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
        help=f"the topic's namespace (default: the context's, else {DEFAULT_NAMESPACE})",
    )


def add_output_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "-o",
        "--output",
        choices=OUTPUT_FORMATS,
        default="table",
        help="table or text (the same: for people, the default), or json for scripts",
    )


def settings_of(args: argparse.Namespace) -> ClientSettings:
    """The URL, token and namespace of the command: its flags, the environment, the client
    configuration file, the defaults (resolved once, the token file read then);
    ClientConfigError when the file cannot be used."""
    settings: ClientSettings | None = getattr(args, "client_settings", None)
    if settings is None:
        settings = ClientSettings.load(
            args.config,
            args.context,
            url=args.url,
            auth_token=args.auth_token,
            namespace=getattr(args, "namespace", None),
        )
        args.client_settings = settings
    return settings


def topic_of(args: argparse.Namespace) -> str:
    """``NAMESPACE/NAME`` of the command's TOPIC and -n (a bare NAME is in -n's namespace, else
    the context's, else ``default``); ValueError (exit 2) when TOPIC and -n name different
    namespaces or TOPIC is malformed."""
    namespace, slash, name = args.topic.rpartition("/")
    if not slash:
        return f"{settings_of(args).namespace}/{name}"
    if not namespace or not name or "/" in namespace:
        raise ValueError(f"a topic is named NAME or NAMESPACE/NAME, not {args.topic!r}")
    if args.namespace is not None and args.namespace != namespace:
        raise ValueError(
            f"topic {args.topic!r} is in namespace {namespace!r}, but -n says {args.namespace!r}"
        )
    return f"{namespace}/{name}"


def run_admin(args: argparse.Namespace, command: str, work: AdminWork) -> int:
    """Run ``work`` with an Admin on the command's URL and token; a refusal is one line on
    stderr and exit 1, a configuration file that cannot be used one line and exit 2."""
    try:
        settings = settings_of(args)
    except ClientConfigError as error:
        return fail(command, str(error), exit_code=2)

    async def run() -> int:
        async with Admin(
            settings.service_url, settings.auth_token, connect_timeout=args.connect_timeout
        ) as admin:
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
