"""The load history's flags: standalone gives every broker DIR/load-history, and a location,
broker id or interval that cannot work stops the broker, naming it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from scalable_topics.commands.standalone_system import StandaloneSettings
from support.child_brokers import broker_arguments, child_broker

RUN_SECONDS = 60  # bounds a failing run only


def broker(tmp_path: Path, *flags: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "scalable_topics.cli",
            "broker",
            "--data-dir",
            str(tmp_path / "data"),
            "--port",
            "0",
            "--store",
            f"embedded://{tmp_path}/store.db",
            *flags,
        ],
        capture_output=True,
        text=True,
        timeout=RUN_SECONDS,
        cwd=tmp_path,
        env={**os.environ, "KUBECONFIG": ""},
    )


def one_line(result: subprocess.CompletedProcess[str], code: int) -> str:
    assert result.returncode == code, result.stderr
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr, result.stderr
    return result.stderr.removeprefix("stctl broker: ").strip()


def test_standalone_gives_every_broker_a_history_under_its_data_directory(
    tmp_path: Path,
) -> None:
    settings = StandaloneSettings(
        data_dir=tmp_path, host="127.0.0.1", port=0, brokers=2, controller_port=0
    )
    assert settings.load_history == tmp_path / "load-history"
    child = child_broker(tmp_path, load_history=str(settings.load_history))
    parsed = broker_arguments(child)
    assert parsed.load_history == str(tmp_path / "load-history")
    assert (parsed.load_history_flush, parsed.load_history_retention) == (60.0, 604800.0)


def test_a_history_that_cannot_work_stops_the_broker_with_one_line(tmp_path: Path) -> None:
    line = one_line(broker(tmp_path, "--load-history", "nosuch://bucket/x"), 1)
    assert line.startswith("the load history location 'nosuch://bucket/x' is unusable"), line
    line = one_line(
        broker(tmp_path, "--load-history", str(tmp_path / "h"), "--broker-id", "a/b"), 1
    )
    assert line.startswith("broker id 'a/b' cannot name load history files"), line
    refused = broker(tmp_path, "--load-history-flush", "0")  # argparse: usage, then the error
    assert refused.returncode == 2
    assert "--load-history-flush: must be a number of seconds > 0, not 0" in refused.stderr
