"""Running a command's work with a client on ``--url``: failures become one line on stderr
and the exit codes of admin_call (1 failed, 2 usage, 130 interrupted)."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
from collections.abc import Awaitable, Callable

from ..client import Client
from ..client.errors import ClientError
from .output import fail

ClientWork = Callable[[Client], Awaitable[int]]


def run_client(args: argparse.Namespace, command: str, work: ClientWork) -> int:
    async def run() -> int:
        async with Client(args.url, args.auth_token, client_name="stctl") as client:
            return await work(client)

    try:
        with contextlib.suppress(KeyboardInterrupt):
            return asyncio.run(run())
        return 130
    except ClientError as error:
        return fail(command, error.message)
    except ValueError as error:  # a malformed URL, topic name or input
        return fail(command, str(error), exit_code=2)
