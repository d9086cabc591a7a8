import subprocess
import sys

import yaml

from scalable_topics import __version__


def _stctl(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "scalable_topics.cli", *args],
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_version_names_the_installed_release() -> None:
    result = _stctl("--version")
    assert result.returncode == 0
    assert result.stdout.strip() == f"stctl {__version__}"


def test_no_command_prints_usage_and_fails() -> None:
    result = _stctl()
    assert result.returncode == 2
    assert "usage: stctl" in result.stderr


def test_crds_prints_applyable_definitions() -> None:
    result = _stctl("crds")
    assert result.returncode == 0
    documents = list(yaml.safe_load_all(result.stdout))
    assert sorted(d["metadata"]["name"] for d in documents) == [
        "scalabletopics.scalabletopics.dev",
        "segments.scalabletopics.dev",
    ]


def test_controller_refuses_timing_that_could_overlap_leaders() -> None:
    result = _stctl(
        "controller",
        "--store",
        "embedded:unused.db",
        "--lease-duration",
        "5",
        "--renew-deadline",
        "6",
    )
    assert result.returncode == 2
    assert "must exceed renew_deadline" in result.stderr


def test_help_lists_only_working_commands() -> None:
    result = _stctl("--help")
    assert result.returncode == 0
    listed = result.stdout.split("commands:")[1]
    for command in ("crds", "broker", "controller"):
        assert command in listed


def test_produce_documents_its_failures_and_refuses_a_send_timeout_that_is_not_positive() -> None:
    described = " ".join(_stctl("produce", "--help").stdout.split())
    assert "--send-timeout SECONDS" in described
    assert "prints both counts and exits 1" in described
    result = _stctl("produce", "orders", "-m", "x", "--send-timeout", "0")
    assert result.returncode == 2
    assert result.stderr == "stctl produce: --send-timeout must be positive (seconds)\n"
