"""``stctl controller``'s flags refuse bad values with a message naming them."""

import subprocess
import sys

import pytest


def _controller(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "scalable_topics.cli",
            "controller",
            "--store",
            "embedded:x.db",
            *args,
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--listen", "7000"), "expected HOST:PORT with a port 0-65535, not '7000'"),
        (("--listen", "host:65536"), "expected HOST:PORT"),
        (("--address-file", "addr"), "--address-file needs --listen"),
        (("--listen", "0.0.0.0:7000"), "listening on 0.0.0.0, give the --endpoint"),
        (("--consumer-grace-period", "0"), "the consumer grace period must be positive"),
        (("--broker-delete-timeout", "0"), "the broker delete timeout must be positive"),
    ],
)
def test_bad_consumer_session_settings_are_refused(args: tuple[str, ...], message: str) -> None:
    result = _controller(*args)
    assert result.returncode == 2
    assert message in result.stderr
