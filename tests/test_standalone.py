"""``stctl standalone`` as a user runs it: a real process on loopback ports, driven through the
client's Admin and the ``stctl`` commands, stopped with SIGTERM and started again."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import aiohttp
import pytest

from scalable_topics.client.admin import Admin
from scalable_topics.listening import format_address, listening_socket, read_address_file
from scalable_topics.protocol import BatchMessage
from support.standalone_process import START_SECONDS, Standalone, standalone
from support.wire_client import WireClient

pytestmark = pytest.mark.slow


async def topic_layout_epoch(admin: Admin, topic: str) -> int:
    async with asyncio.timeout(30):
        while True:
            described = await admin.describe_topic(topic)
            if described["epoch"] is not None and described["phase"] == "Ready":
                return described["epoch"]
            await asyncio.sleep(0.05)


async def produce_one(broker_url: str, token: str, topic: str, segment_id: int) -> None:
    client = await WireClient.connect(broker_url.replace("ws://", "http://", 1), token)
    try:
        await client.open_producer(1, topic, segment_id)
        await client.send(1, 0, BatchMessage(b"kept until consumed", "key"))
    finally:
        await client.close()


async def test_standalone_serves_topics_and_resumes_them(tmp_path: Path) -> None:
    async with standalone(tmp_path) as running:
        port = int(running.url.rpartition(":")[2])
        assert running.url == f"ws://127.0.0.1:{port}" and port != 0
        assert any("stctl topics create" in line for line in running.output)
        async with Admin.from_config(running.data_dir / "stctl-config") as admin:
            await admin.create_topic("orders", 1, [("billing", "Stream")])
            assert await topic_layout_epoch(admin, "orders") == 0
            [summary] = await admin.list_topics()
            assert (summary["name"], summary["activeSegments"]) == ("orders", 1)

            described = await admin.describe_topic("orders")
            [segment] = described["segments"]
            assert (segment["range"], segment["broker"]) == ("0000-ffff", running.url)
            assert described["controller"] is not None

            # A message nobody consumed keeps the sealed parent in the DAG after the split.
            await produce_one(running.url, running.token, "default/orders", 0)
            operation = await admin.split("orders", 0)
            assert (operation["result"], operation["childIds"]) == ("Succeeded", [1, 2])
            described = await admin.describe_topic("orders")
            assert described["epoch"] == 1
            assert [(s["id"], s["state"], s["children"]) for s in described["segments"]] == [
                (0, "Sealed", [1, 2]),
                (1, "Active", []),
                (2, "Active", []),
            ]

            await admin.create_topic("kept", 2)
            assert await topic_layout_epoch(admin, "kept") == 0
            await admin.delete_topic("orders")
            async with asyncio.timeout(30):
                while [t["name"] for t in await admin.list_topics()] != ["kept"]:
                    await asyncio.sleep(0.05)
        assert await running.stop() == 0

    # Segments are placed on a broker's URL: the same data is served again on the same port.
    async with standalone(tmp_path, port=port) as again, Admin(again.url, again.token) as admin:
        assert [t["name"] for t in await admin.list_topics()] == ["kept"]
        described = await admin.describe_topic("kept")
        assert [(s["id"], s["state"]) for s in described["segments"]] == [
            (0, "Active"),
            (1, "Active"),
        ]
        stats = await admin.stats("kept")
        assert stats["segmentCounts"] == {"active": 2, "sealed": 0, "unavailable": 0}
        assert await again.stop() == 0


def broker_pid(data_dir: Path, broker_id: str) -> int | None:
    """The pid of the child broker with this identity and data directory, from /proc."""
    wanted = {b"--broker-id", broker_id.encode(), str(data_dir / broker_id).encode()}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdecimal():
            continue
        with contextlib.suppress(OSError):
            if wanted <= set((entry / "cmdline").read_bytes().split(b"\0")):
                return int(entry.name)
    return None


async def healthy(url: str) -> bool:
    try:
        async with aiohttp.ClientSession() as http, http.get(url + "/healthz") as response:
            return response.status == 200
    except aiohttp.ClientError:
        return False


def child_url(data_dir: Path, broker_id: str) -> str:
    """Where a child broker listens, from the address file it writes."""
    address = read_address_file(data_dir / f"{broker_id}.address")
    assert address is not None, f"{broker_id} reported no address"
    return f"http://{format_address(*address)}"


async def test_a_killed_child_broker_is_started_again_on_its_port(tmp_path: Path) -> None:
    async with standalone(tmp_path, "--brokers", "2") as running:
        second = child_url(tmp_path, "broker-1")
        assert await healthy(second)
        first_pid = broker_pid(tmp_path, "broker-1")
        assert first_pid is not None
        os.kill(first_pid, signal.SIGKILL)
        async with asyncio.timeout(60):
            while True:
                pid = broker_pid(tmp_path, "broker-1")
                if pid not in (None, first_pid) and await healthy(second):
                    break
                await asyncio.sleep(0.1)
        assert (tmp_path / "logs" / "broker-1.log").stat().st_size > 0
        assert await running.stop() == 0
    assert broker_pid(tmp_path, "broker-1") is None


async def test_child_brokers_stop_when_standalone_is_killed(tmp_path: Path) -> None:
    async with standalone(tmp_path, "--brokers", "2") as running:
        second = child_url(tmp_path, "broker-1")
        assert await healthy(second)
        assert broker_pid(tmp_path, "broker-1") is not None
        running.process.kill()  # no chance to stop its children
        await running.process.wait()
        async with asyncio.timeout(30):
            while broker_pid(tmp_path, "broker-1") is not None:
                await asyncio.sleep(0.1)
    assert "supervising process is gone" in (tmp_path / "logs" / "broker-1.log").read_text()
    listening_socket("127.0.0.1", int(second.rpartition(":")[2])).close()  # its port is free
    async with standalone(tmp_path, "--brokers", "2") as again:
        assert await healthy(child_url(tmp_path, "broker-1"))
        assert await again.stop() == 0


def test_a_port_in_use_is_one_clear_error(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = subprocess.run(
            [
                *(sys.executable, "-m", "scalable_topics.cli", "standalone"),
                *("--data-dir", str(tmp_path), "--port", str(port)),
            ],
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert result.returncode == 1
    assert result.stderr.count("\n") == 1
    assert result.stderr.startswith(f"stctl standalone: cannot listen on 127.0.0.1:{port}")
    assert "in use" in result.stderr


async def test_a_second_standalone_on_the_same_directory_is_refused(tmp_path: Path) -> None:
    """Before it touches anything there: it would share the store, take the controller's
    leases and rewrite the kubeconfig before its broker found its directory locked."""
    async with standalone(tmp_path) as running:
        kubeconfig = (tmp_path / "kubeconfig").read_text()
        process = await asyncio.create_subprocess_exec(
            *(sys.executable, "-m", "scalable_topics.cli", "standalone"),
            *("--data-dir", str(tmp_path), "--port", "0", "--controller-port", "0"),
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        async with asyncio.timeout(START_SECONDS):
            out, err = await process.communicate()
        assert process.returncode == 1
        assert (out, err.decode()) == (
            b"",
            f"stctl standalone: the data directory {tmp_path} is in use by another stctl "
            "standalone\n",
        )
        assert (tmp_path / "kubeconfig").read_text() == kubeconfig
        async with Admin(running.url, running.token) as admin:
            assert await admin.list_topics() == []  # the first one still serves
        assert await running.stop() == 0


# -- stctl against a standalone system ----------------------------------------------------------


async def stctl(running: Standalone, *args: str, token: str | None = None) -> tuple[int, str, str]:
    """``stctl`` against ``running``, configured as a user is told to: by the client
    configuration DIR/stctl-config (its URL and admin token); ``token`` overrides the token,
    through $STCTL_AUTH_TOKEN ("" for none: a URL alone)."""
    env = {**os.environ, "STCTL_CONFIG": str(running.data_dir / "stctl-config")}
    if token == "":
        del env["STCTL_CONFIG"]
        env["STCTL_URL"] = running.url
    elif token is not None:
        env["STCTL_AUTH_TOKEN"] = token
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "scalable_topics.cli",
        *args,
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    async with asyncio.timeout(120):
        out, err = await process.communicate()
    assert process.returncode is not None
    return process.returncode, out.decode(), err.decode()


async def test_stctl_topic_and_subscription_commands(tmp_path: Path) -> None:
    async with standalone(tmp_path) as running:
        url = running.url
        code, out, err = await stctl(
            running,
            "topics",
            "create",
            "orders",
            "--segments",
            "2",
            "--subscription",
            "billing:Stream",
            "--subscription",
            "audit",
            "--property",
            "tier=gold",
        )
        assert (code, err) == (0, "")
        assert out == (
            "topic default/orders created: 2 segments, subscriptions billing:Stream, audit:Queue\n"
        )
        code, _, err = await stctl(running, "topics", "create", "orders")
        assert code == 1
        assert err == "stctl topics create: topic default/orders already exists\n"
        code, _, err = await stctl(running, "topics", "create", "other", "--segments", "0")
        assert code == 1 and "spec.initialSegments" in err and err.count("\n") == 1
        code, _, err = await stctl(running, "topics", "create", "x", "--subscription", ":Queue")
        assert code == 2 and "NAME:TYPE" in err

        async with Admin(url, running.token) as admin:
            await topic_layout_epoch(admin, "orders")

        code, out, _ = await stctl(running, "topics", "list")
        assert code == 0
        header, row = out.splitlines()
        assert header.split() == [
            "NAMESPACE",
            "NAME",
            "PHASE",
            "EPOCH",
            "ACTIVE",
            "SEALED",
            "SUBSCRIPTIONS",
            "CONTROLLER",
        ]
        assert row.split()[:7] == ["default", "orders", "Ready", "0", "2", "0", "billing,audit"]
        code, out, _ = await stctl(running, "topics", "list", "-o", "json")
        assert [t["name"] for t in json.loads(out)] == ["orders"]
        code, out, _ = await stctl(running, "topics", "list", "-n", "empty")
        assert (code, out) == (0, "no topics in namespace empty\n")

        code, out, _ = await stctl(running, "topics", "describe", "orders")
        assert code == 0
        assert "Topic:           default/orders" in out
        assert "Epoch:           0" in out
        assert "Properties:      tier=gold" in out
        segment_rows = [line.split() for line in out.splitlines() if line.startswith("  0 ")]
        assert segment_rows == [["0", "0000-7fff", "Active", "-", "-", url]]
        code, out, _ = await stctl(running, "topics", "describe", "orders", "-o", "json")
        described = json.loads(out)
        assert [s["range"] for s in described["segments"]] == ["0000-7fff", "8000-ffff"]

        code, out, err = await stctl(
            running, "subscriptions", "create", "orders", "late", "--type", "Checkpoint"
        )
        assert (code, err) == (0, "")
        code, _, err = await stctl(running, "subscriptions", "create", "orders", "late")
        assert (code, err) == (
            1,
            "stctl subscriptions create: topic default/orders already has a subscription 'late'\n",
        )
        code, out, _ = await stctl(running, "subscriptions", "list", "orders", "-o", "json")
        assert [(s["name"], s["type"]) for s in json.loads(out)] == [
            ("audit", "Queue"),
            ("billing", "Stream"),
            ("late", "Checkpoint"),
        ]
        code, out, _ = await stctl(running, "subscriptions", "list", "orders")
        assert out.splitlines()[0].split() == [
            "NAME",
            "TYPE",
            "DECLARED",
            "STATE",
            "SEGMENTS",
            "ATTACHED",
            "CONSUMERS",
        ]
        assert [line.split()[0] for line in out.splitlines()[1:]] == ["audit", "billing", "late"]
        code, out, _ = await stctl(
            running, "subscriptions", "delete", "orders", "late", "-o", "json"
        )
        assert (code, json.loads(out)) == (0, {"name": "late", "deleted": True})
        code, _, err = await stctl(running, "subscriptions", "delete", "orders", "late")
        assert (code, err) == (
            1,
            "stctl subscriptions delete: topic default/orders has no subscription 'late'\n",
        )
        code, _, err = await stctl(running, "subscriptions", "delete", "orders")
        assert code == 2 and "SUBSCRIPTION" in err

        # A subscription a consumer made: listed as runtime, deleted from every segment.
        code, _, err = await stctl(running, "produce", "default/orders", "-m", "one")
        assert (code, err) == (0, "")
        code, out, err = await stctl(
            running, "consume", "orders", "-n", "default", "-s", "adhoc", "-c", "1"
        )
        assert (code, err) == (0, "") and out.endswith(" key=- one\n")
        code, out, _ = await stctl(running, "subscriptions", "list", "default/orders", "-o", "json")
        [adhoc] = [s for s in json.loads(out) if s["name"] == "adhoc"]
        # No consumer is attached any more: the brokers no longer know its type.
        assert (adhoc["declared"], adhoc["type"], adhoc["segments"]) == (False, None, [0, 1])
        code, out, _ = await stctl(running, "subscriptions", "list", "orders")
        [row] = [line for line in out.splitlines() if line.startswith("adhoc ")]
        assert "no (runtime)" in row
        code, out, err = await stctl(running, "subscriptions", "delete", "orders", "adhoc")
        assert (code, out, err) == (0, "subscription adhoc removed from topic default/orders\n", "")
        code, out, _ = await stctl(running, "subscriptions", "list", "orders", "-o", "json")
        assert "adhoc" not in [s["name"] for s in json.loads(out)]

        code, out, _ = await stctl(running, "topics", "delete", "orders")
        assert (code, out) == (0, "topic default/orders is being deleted\n")
        async with asyncio.timeout(30):
            while (await stctl(running, "topics", "describe", "orders"))[0] != 1:
                await asyncio.sleep(0.1)
        code, _, err = await stctl(running, "topics", "describe", "orders")
        assert (code, err) == (1, "stctl topics describe: topic default/orders not found\n")
        code, _, err = await stctl(running, "topics", "delete", "orders", "-o", "json")
        assert (code, err) == (1, "stctl topics delete: topic default/orders not found\n")
        code, _, err = await stctl(running, "topics", "describe", "orders", "-o", "yaml")
        assert code == 2 and "invalid choice" in err
        assert await running.stop() == 0

    code, _, err = await stctl(running, "topics", "list")
    assert code == 1
    assert err.startswith(f"stctl topics list: cannot connect to {url}: connection refused")
    assert "stctl standalone" in err and err.count("\n") == 1


async def test_standalone_requires_credentials_and_keeps_its_key(tmp_path: Path) -> None:
    """Every surface asks for a token; DIR holds the cluster token, the token key and an admin
    token (owner-only), and tokens issued with DIR's key stay valid after a restart."""
    async with standalone(tmp_path) as running:
        for name in ("cluster.token", "token.key", "admin.token"):
            assert (tmp_path / name).stat().st_mode & 0o777 == 0o600, name
        assert (tmp_path / "stctl-config").stat().st_mode & 0o777 == 0o600
        code, _, err = await stctl(running, "topics", "list", token="")
        assert code == 1
        assert err.startswith("stctl topics list: ") and "credentials are required" in err
        code, token, _ = await stctl(
            running,
            "tokens",
            "create",
            "--key",
            str(tmp_path / "token.key"),
            "--subject",
            "reader",
            "--grant",
            "consume:team-a",
            "--expires-in",
            "1h",
        )
        assert code == 0
        code, _, err = await stctl(running, "topics", "create", "orders", token=token.strip())
        assert (code, err) == (
            1,
            "stctl topics create: reader may not admin in namespace 'default'\n",
        )
        assert await running.stop() == 0
    async with standalone(tmp_path) as again:
        code, _, err = await stctl(again, "topics", "list", "-n", "team-a", token=token.strip())
        assert (code, err) == (0, "")
