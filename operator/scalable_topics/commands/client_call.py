"""Running a command's work with a client on the command's URL and token (admin_call.settings_of),
with admin_call's exit codes."""

from __future__ import annotations

import argparse
from collections.abc import Awaitable, Callable

from ..client import Client
from ..client.client_config import ClientConfigError
from .admin_call import run_command, settings_of
from .output import fail

ClientWork = Callable[[Client], Awaitable[int]]


def run_client(args: argparse.Namespace, command: str, work: ClientWork) -> int:
    try:
        settings = settings_of(args)
    except ClientConfigError as error:
        return fail(command, str(error), exit_code=2)

    async def run() -> int:
        async with Client(
            settings.service_url,
            settings.auth_token,
            client_name="stctl",
            connect_timeout=args.connect_timeout,
        ) as client:
            return await work(client)

    return run_command(command, run)
