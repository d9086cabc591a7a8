"""Running a command's work with a client on ``--url``, with admin_call's exit codes."""

from __future__ import annotations

import argparse
from collections.abc import Awaitable, Callable

from ..client import Client
from .admin_call import run_command

ClientWork = Callable[[Client], Awaitable[int]]


def run_client(args: argparse.Namespace, command: str, work: ClientWork) -> int:
    async def run() -> int:
        async with Client(
            args.url,
            args.auth_token,
            client_name="stctl",
            connect_timeout=args.connect_timeout,
        ) as client:
            return await work(client)

    return run_command(command, run)
