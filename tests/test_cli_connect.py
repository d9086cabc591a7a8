"""Every ``stctl`` client command gives up connecting after ``--connect-timeout`` (or at once
when refused) with one line naming the URL and the reason, and exits 1."""

from __future__ import annotations

import socket
import subprocess
import sys

import pytest

from support.blackholes import unaccepted_port

COMMANDS = [
    ("topics", "list"),
    ("topics", "describe", "orders"),
    ("topics", "stats", "orders"),
    ("topics", "load", "orders"),
    ("subscriptions", "list", "orders"),
    ("produce", "orders", "-m", "hello"),
    ("consume", "orders", "-s", "billing"),
    ("consume", "orders", "-s", "billing", "-t", "queue"),
    ("watch", "orders"),
]


def closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def stctl(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "scalable_topics.cli", *args],
        capture_output=True,
        text=True,
        timeout=120,  # bounds a failing run only
    )


def name(command: tuple[str, ...]) -> str:
    return " ".join(command[:2] if command[0] in ("topics", "subscriptions") else command[:1])


@pytest.mark.parametrize("command", COMMANDS, ids=" ".join)
def test_a_refused_connection_is_one_line(command: tuple[str, ...]) -> None:
    url = f"ws://127.0.0.1:{closed_port()}"
    result = stctl(*command, "--url", url)
    assert result.returncode == 1, result.stderr
    assert result.stderr.count("\n") == 1, result.stderr
    assert result.stderr.startswith(
        f"stctl {name(command)}: cannot connect to {url}: connection refused"
    )


@pytest.mark.parametrize("command", COMMANDS, ids=" ".join)
def test_an_address_that_never_answers_times_out(command: tuple[str, ...]) -> None:
    with unaccepted_port() as port:
        url = f"ws://127.0.0.1:{port}"
        result = stctl(*command, "--url", url, "--connect-timeout", "0.5")
    assert result.returncode == 1, result.stderr
    assert result.stderr.count("\n") == 1, result.stderr
    assert result.stderr.startswith(
        f"stctl {name(command)}: cannot connect to {url}: no answer within 0.5 s"
    )


@pytest.mark.parametrize("value", ["0", "-1", "soon", "nan"])
def test_the_connect_timeout_is_a_positive_number(value: str) -> None:
    result = stctl("topics", "list", "--connect-timeout", value)
    assert result.returncode == 2
    assert "expected a positive number of seconds" in result.stderr
