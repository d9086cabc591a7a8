"""``stctl kube-api`` as a process: HTTPS with its own CA, the kubeconfig it writes, its errors."""

from __future__ import annotations

import base64
import ssl
import subprocess
import sys
from pathlib import Path

import aiohttp
import pytest
import yaml

from scalable_topics.kubeapi.audit import read_audit_log
from support.kubeapi_process import KubeApiProcess

pytestmark = pytest.mark.slow


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "scalable_topics.cli", "kube-api", *args],
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_an_unsupported_store_url_is_one_line_and_exit_2(tmp_path: Path) -> None:
    done = run("--store", "bogus://x", "--token-file", str(tmp_path / "t"), "--port", "0")
    assert done.returncode == 2
    assert done.stderr.startswith("stctl kube-api: unsupported store URL 'bogus://x'")
    assert "Traceback" not in done.stderr


def test_a_store_that_cannot_open_is_one_line_and_exit_1(tmp_path: Path) -> None:
    url = f"embedded://{tmp_path / 'missing-dir' / 'store.db'}"
    done = run("--store", url, "--token-file", str(tmp_path / "t"), "--port", "0")
    assert done.returncode == 1
    assert done.stderr.startswith("stctl kube-api: cannot start:")
    assert "Traceback" not in done.stderr


async def test_it_serves_https_to_the_kubeconfig_it_writes(tmp_path: Path) -> None:
    server = KubeApiProcess(tmp_path, f"embedded://{tmp_path / 'store.db'}")
    url = await server.start()
    try:
        config = yaml.safe_load(server.kubeconfig.read_text())
        cluster = config["clusters"][0]["cluster"]
        token = config["users"][0]["user"]["token"]
        assert cluster["server"].startswith("https://127.0.0.1:")
        authority = base64.b64decode(cluster["certificate-authority-data"]).decode()
        context = ssl.create_default_context(cadata=authority)
        async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=context)) as http:
            async with http.get(f"{cluster['server']}/version") as response:
                assert response.status == 200  # public, as in Kubernetes
            async with http.get(f"{cluster['server']}/api/v1/namespaces") as response:
                assert response.status == 401
            headers = {"Authorization": f"Bearer {token}"}
            async with http.get(f"{cluster['server']}/api/v1/namespaces", headers=headers) as r:
                names = [n["metadata"]["name"] for n in (await r.json())["items"]]
        assert "default" in names and url == cluster["server"]
    finally:
        server.stop()
    assert server.process is not None and server.process.returncode == 0, server.log()


def test_a_malformed_token_auth_file_is_refused_at_startup_naming_its_line(
    tmp_path: Path,
) -> None:
    tokens = tmp_path / "tokens.csv"
    tokens.write_text("# users\nsecret-1,alice,uid-1\nsecret-2,bob\n")
    url = f"embedded://{tmp_path / 'store.db'}"
    done = run("--store", url, "--token-auth-file", str(tokens), "--port", "0")
    assert done.returncode == 2
    assert done.stderr == (
        f'stctl kube-api: {tokens}, line 3: 2 fields, expected token,user,uid[,"group1,group2"]\n'
    )
    assert not (tmp_path / "store.db").exists()  # refused before the store was opened


@pytest.mark.parametrize(
    "flags",
    [
        (),
        ("--token-file", "t", "--token-auth-file", "tokens.csv"),
    ],
)
def test_exactly_one_token_file_is_needed(tmp_path: Path, flags: tuple[str, ...]) -> None:
    done = run("--store", f"embedded://{tmp_path / 'store.db'}", "--port", "0", *flags)
    assert done.returncode == 2
    assert "--token-file" in done.stderr and "--token-auth-file" in done.stderr


async def test_every_user_of_a_token_auth_file_is_let_in_and_audited(tmp_path: Path) -> None:
    tokens = tmp_path / "tokens.csv"
    tokens.write_text('token-a,alice,uid-a,"team-a"\ntoken-b,bob,uid-b\n')
    audit_log = tmp_path / "audit.log"
    server = KubeApiProcess(
        tmp_path,
        f"embedded://{tmp_path / 'store.db'}",
        token_auth_file=tokens,
        audit_log=audit_log,
    )
    await server.start()
    try:
        config = yaml.safe_load(server.kubeconfig.read_text())
        assert config["users"][0]["user"]["token"] == "token-a"  # the first line's
        cluster = config["clusters"][0]["cluster"]
        authority = base64.b64decode(cluster["certificate-authority-data"]).decode()
        context = ssl.create_default_context(cadata=authority)
        namespaces = f"{cluster['server']}/api/v1/namespaces"
        async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=context)) as http:
            for token, status in [("token-a", 200), ("token-b", 200), ("token-c", 401)]:
                headers = {"Authorization": f"Bearer {token}"}
                async with http.get(namespaces, headers=headers) as response:
                    assert response.status == status, token
    finally:
        server.stop()
    assert server.process is not None and server.process.returncode == 0, server.log()
    assert not server.token_file.exists()  # no single token was made
    assert [
        (event["user"], event["groups"], event["verb"], event["resource"], event["code"])
        for event in read_audit_log(audit_log)
    ] == [
        ("alice", ["team-a", "system:authenticated"], "list", "namespaces", 200),
        ("bob", ["system:authenticated"], "list", "namespaces", 200),
        ("", [], "list", "namespaces", 401),
    ]
