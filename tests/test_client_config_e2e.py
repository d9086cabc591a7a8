"""The client configuration file end to end: a real broker process on loopback that requires a
token, driven by ``stctl`` with nothing but ``--config`` or ``$STCTL_CONFIG`` (the token in a
token file, the namespace from the context), and by ``Admin.from_config`` and
``Client.from_config``."""

from __future__ import annotations

import asyncio
import os
import re
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from scalable_topics.client import AuthenticationFailed, Client, write_client_config
from scalable_topics.client.admin import Admin
from support.broker_process import BrokerProcess

pytestmark = pytest.mark.slow

TOKEN = "s3cret-cluster-token"
STCTL_SECONDS = 120.0  # bounds a failing run only


@pytest.fixture
async def broker(tmp_path: Path) -> AsyncIterator[BrokerProcess]:
    process = BrokerProcess(
        tmp_path / "server", f"embedded://{tmp_path / 'store.db'}", None, "--auth-token", TOKEN
    )
    (tmp_path / "server").mkdir()
    await process.start()
    try:
        yield process
    finally:
        process.stop()


async def stctl(*args: str, config: Path | None = None) -> tuple[int, str, str]:
    """``stctl ARGS`` with no STCTL_* variable but ``STCTL_CONFIG=config`` when given."""
    environ = {k: v for k, v in os.environ.items() if not k.startswith("STCTL_")}
    if config is not None:
        environ["STCTL_CONFIG"] = str(config)
    process = await asyncio.create_subprocess_exec(
        *(sys.executable, "-m", "scalable_topics.cli", *args),
        env=environ,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        async with asyncio.timeout(STCTL_SECONDS):
            out, err = await process.communicate()
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
    assert process.returncode is not None
    return process.returncode, out.decode(), err.decode()


async def test_stctl_and_the_client_connect_with_the_file_alone(
    tmp_path: Path, broker: BrokerProcess
) -> None:
    config = tmp_path / "client" / "config"
    write_client_config(
        config,
        context="local",
        service_url=broker.ws_url,
        token_file="admin.token",  # beside the config file
        namespace="team-a",
    )
    token_file = tmp_path / "client" / "admin.token"
    token_file.write_text(TOKEN + "\n")

    code, out, err = await stctl("topics", "create", "orders", "--config", str(config))
    assert (code, err) == (0, "")
    assert out == "topic team-a/orders created: 1 segments, subscriptions none\n"

    code, out, err = await stctl("topics", "list", "-o", "json", config=config)
    assert (code, err) == (0, "")
    assert '"namespace": "team-a"' in out and '"name": "orders"' in out

    code, out, err = await stctl("config", "view", config=config)
    assert code == 0 and TOKEN not in out
    shown = {line.split()[0]: re.split(r"\s{2,}", line)[1:] for line in out.splitlines()[1:]}
    assert shown["token"] == ["set", f"user local (token-file {token_file})"]
    assert shown["namespace"] == ["team-a", "context local"]

    async with Admin.from_config(config) as admin:
        assert [(t["namespace"], t["name"]) for t in await admin.list_topics()] == [
            ("team-a", "orders")
        ]

    # A rotated token file is read by the next command: here a wrong one, refused in one line
    # by the admin API (HTTP 401) and by the WebSocket handshake (AuthenticationFailed).
    token_file.write_text("wrong-token\n")
    refusals = (
        (
            ("topics", "list", "--config", str(config)),
            "stctl topics list: a valid 'Authorization: Bearer <token>' is required\n",
        ),
        (
            ("topics", "describe", "orders"),
            "stctl topics describe: a valid 'Authorization: Bearer <token>' is required\n",
        ),
        (("produce", "orders", "-m", "x"), "stctl produce: AuthenticationFailed: "),
    )
    for args, line in refusals:
        code, out, err = await stctl(*args, config=config)
        assert (code, out) == (1, ""), err
        assert err.startswith(line) and err.count("\n") == 1, err
    async with Client.from_config(config) as client:
        with pytest.raises(AuthenticationFailed):
            await client.create_producer("team-a/orders")

    # A flag still beats the file.
    code, out, err = await stctl("topics", "list", "--auth-token", TOKEN, config=config)
    assert (code, err) == (0, "")
    assert "orders" in out
