"""The client configuration file end to end: a real broker process on loopback that requires a
token (the cluster token, or a client token signed by the test's key), driven by ``stctl`` with
nothing but ``--config`` or ``$STCTL_CONFIG`` (a client token granted on team-a in a token file,
the namespace team-a from the context), and by ``Admin.from_config`` and ``Client.from_config``."""

from __future__ import annotations

import asyncio
import os
import re
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from scalable_topics import tokens
from scalable_topics.client import AuthenticationFailed, Client, write_client_config
from scalable_topics.client.admin import Admin
from support.broker_process import BrokerProcess

pytestmark = pytest.mark.slow

CLUSTER_TOKEN = "s3cret-cluster-token"
STCTL_SECONDS = 120.0  # bounds a failing run only


@pytest.fixture
def token_key(tmp_path: Path) -> Path:
    private, public = tokens.generate_key()
    (tmp_path / "token.key").write_bytes(private)
    (tmp_path / "token.pub").write_bytes(public)
    return tmp_path / "token.key"


@pytest.fixture
async def broker(tmp_path: Path, token_key: Path) -> AsyncIterator[BrokerProcess]:
    server = tmp_path / "server"
    server.mkdir()
    process = BrokerProcess(
        server,
        f"embedded://{tmp_path / 'store.db'}",
        None,
        *("--auth-token", CLUSTER_TOKEN),
        *("--token-public-key", str(token_key.with_suffix(".pub"))),
    )
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
    tmp_path: Path, broker: BrokerProcess, token_key: Path
) -> None:
    alice = tokens.issue(tokens.load_private_key(token_key), "alice", ["admin:team-a"], 3600)
    config = tmp_path / "client" / "config"
    write_client_config(
        config,
        context="local",
        service_url=broker.ws_url,
        token_file="admin.token",  # beside the config file
        namespace="team-a",
    )
    token_file = tmp_path / "client" / "admin.token"
    token_file.write_text(alice + "\n")

    code, out, err = await stctl("topics", "create", "orders", "--config", str(config))
    assert (code, err) == (0, "")
    assert out == "topic team-a/orders created: 1 segments, subscriptions none\n"

    code, out, err = await stctl("topics", "list", "-o", "json", config=config)
    assert (code, err) == (0, "")
    assert '"namespace": "team-a"' in out and '"name": "orders"' in out

    # The context's namespace is what the token is granted on: another one is refused.
    code, out, err = await stctl("topics", "list", "-n", "team-b", config=config)
    assert (code, out) == (1, "")
    assert err.startswith("stctl topics list: ") and err.count("\n") == 1, err
    assert "team-b" in err

    code, out, err = await stctl("config", "view", config=config)
    assert code == 0 and alice not in out
    shown = {line.split()[0]: re.split(r"\s{2,}", line)[1:] for line in out.splitlines()[1:]}
    assert shown["token"] == ["set", f"user local (token-file {token_file})"]
    assert shown["namespace"] == ["team-a", "context local"]

    async with Admin.from_config(config) as admin:
        assert [(t["namespace"], t["name"]) for t in await admin.list_topics("team-a")] == [
            ("team-a", "orders")
        ]

    # A rotated token file is read by the next command: here a token of another cluster (signed
    # by another key), refused in one line by the admin API (401) and by the WebSocket handshake.
    other_cluster = tokens.issue(Ed25519PrivateKey.generate(), "alice", ["admin:team-a"], 3600)
    token_file.write_text(other_cluster + "\n")
    for args, line in (
        (("topics", "list", "--config", str(config)), "stctl topics list: "),
        (("topics", "describe", "orders"), "stctl topics describe: "),
        (("produce", "orders", "-m", "x"), "stctl produce: AuthenticationFailed: "),
    ):
        code, out, err = await stctl(*args, config=config)
        assert (code, out) == (1, ""), err
        assert err.startswith(line + "the token is not valid: Signature verification failed"), err
        assert err.count("\n") == 1 and other_cluster not in err
    async with Client.from_config(config) as client:
        with pytest.raises(AuthenticationFailed):
            await client.create_producer("team-a/orders")

    # A flag still beats the file.
    code, out, err = await stctl("topics", "list", "--auth-token", CLUSTER_TOKEN, config=config)
    assert (code, err) == (0, "")
    assert "orders" in out
