"""The server commands on a configuration no retry mends: one line on stderr and exit 1 (exit 2
for bad flags), never a traceback or a loop logging the same failure; and, where retrying is
by design (an API server that cannot be reached), one WARNING line per attempt, no traceback."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from support.kubeconfig import write_kubeconfig

RUN_SECONDS = 60  # bounds a failing run only


def stctl(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "scalable_topics.cli", *args],
        capture_output=True,
        text=True,
        timeout=RUN_SECONDS,
        cwd=cwd,
        env={**os.environ, "KUBECONFIG": "", "HOME": str(cwd or Path.cwd())},
    )


def closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def one_line(result: subprocess.CompletedProcess[str], command: str, code: int) -> str:
    assert result.returncode == code, result.stderr
    assert result.stderr.count("\n") == 1, result.stderr
    assert "Traceback" not in result.stderr
    assert result.stderr.startswith(f"stctl {command}: ")
    return result.stderr.removeprefix(f"stctl {command}: ").strip()


def store_cases(tmp_path: Path) -> list[tuple[str, str]]:
    """(store URL, what the line says) for stores no retry can open."""
    not_a_kubeconfig = tmp_path / "garbage.yaml"
    not_a_kubeconfig.write_text("{ this is not yaml")
    kubeconfig = write_kubeconfig(tmp_path / "kubeconfig", "https://127.0.0.1:1", "token")
    a_file = tmp_path / "a-file"
    a_file.write_text("not a database, and no directory")
    return [
        (
            f"embedded://{tmp_path}/missing/store.db",
            f"cannot open the store {tmp_path}/missing/store.db: directory {tmp_path}/missing "
            "does not exist",
        ),
        (f"embedded://{a_file}", "file is not a database"),
        (f"embedded://{a_file}/store.db", "is not a directory"),
        (f"kubernetes://{tmp_path}/no-such-kubeconfig", "no kubeconfig at"),
        (f"kubernetes://{not_a_kubeconfig}", "cannot load the client configuration"),
        (f"kubernetes://{kubeconfig}?context=nope", "context 'nope'"),
    ]


def test_the_controller_refuses_a_store_it_cannot_use(tmp_path: Path) -> None:
    for url, says in store_cases(tmp_path):
        line = one_line(stctl("controller", "--store", url, cwd=tmp_path), "controller", 1)
        assert says in line, (url, line)


def test_the_broker_refuses_a_store_it_cannot_use(tmp_path: Path) -> None:
    for url, says in store_cases(tmp_path):
        result = stctl(
            "broker",
            "--data-dir",
            str(tmp_path / "data"),
            "--port",
            "0",
            "--store",
            url,
            cwd=tmp_path,
        )
        assert says in one_line(result, "broker", 1), url


def test_the_broker_refuses_a_data_directory_it_cannot_write(tmp_path: Path) -> None:
    a_file = tmp_path / "a-file"
    a_file.write_text("")
    store = f"embedded://{tmp_path}/store.db"
    for data_dir, says in ((a_file, "File exists"), (a_file / "sub", "Not a directory")):
        result = stctl("broker", "--data-dir", str(data_dir), "--port", "0", "--store", store)
        assert one_line(result, "broker", 1) == f"cannot use data directory {data_dir}: {says}"


def test_the_standalone_refuses_a_data_directory_it_cannot_use(tmp_path: Path) -> None:
    a_file = tmp_path / "a-file"
    a_file.write_text("")
    result = stctl("standalone", "--data-dir", str(a_file / "sub"), "--port", "0")
    assert one_line(result, "standalone", 1) == (
        f"cannot use data directory {a_file}/sub: Not a directory"
    )


def test_the_operator_refuses_a_kubeconfig_it_cannot_read(tmp_path: Path) -> None:
    result = stctl(
        "operator",
        *("--kubeconfig", str(tmp_path / "missing")),
        *("--listen", "127.0.0.1:0", "--health-listen", "off"),
        cwd=tmp_path,
    )
    assert one_line(result, "operator", 1).startswith(f"no kubeconfig at {tmp_path}/missing")


def test_the_kube_api_refuses_a_store_it_cannot_use(tmp_path: Path) -> None:
    result = stctl(
        "kube-api",
        *("--store", f"embedded://{tmp_path}/missing/store.db"),
        *("--token-file", str(tmp_path / "token"), "--port", "0"),
    )
    assert one_line(result, "kube-api", 1).startswith("cannot start: ")


@pytest.mark.parametrize(
    ("command", "args"),
    [
        ("controller", ("--store", "embedded:x.db", "--address-file", "a")),
        ("controller", ("--store", "memory:x")),
        ("broker", ("--data-dir", "d", "--store", "embedded:x.db", "--store-burst", "5")),
        ("standalone", ("--data-dir", "d", "--brokers", "0")),
    ],
)
def test_bad_flags_exit_2_with_one_line(
    command: str, args: tuple[str, ...], tmp_path: Path
) -> None:
    one_line(stctl(command, *args, cwd=tmp_path), command, 2)


def test_an_unreachable_api_server_is_one_warning_per_attempt(tmp_path: Path) -> None:
    """Retried by design: nothing refuses the configuration, the server is just not there."""
    kubeconfig = write_kubeconfig(
        tmp_path / "kubeconfig", f"https://127.0.0.1:{closed_port()}", "token"
    )
    process = subprocess.Popen(
        [
            *(sys.executable, "-m", "scalable_topics.cli", "controller"),
            *("--store", f"kubernetes://{kubeconfig}"),
        ],
        stderr=subprocess.PIPE,
        text=True,
    )
    assert process.stderr is not None
    lines: list[str] = []
    try:
        while sum("watch failed" in line for line in lines) < 6:  # two rounds of 3 informers
            line = process.stderr.readline()
            assert line, f"the controller exited: {''.join(lines)}"
            lines.append(line)
        process.send_signal(signal.SIGTERM)
        _, rest = process.communicate(timeout=RUN_SECONDS)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    logged = lines + rest.splitlines(keepends=True)
    assert process.returncode == 0, "".join(logged)
    assert not any("Traceback" in line or " ERROR " in line for line in logged), "".join(logged)
    attempts = [line for line in logged if "watch failed" in line]
    assert all(
        " WARNING " in line and "cannot reach the Kubernetes API server" in line
        for line in attempts
    )
