"""``--handshake-timeout``, ``--auth-timeout`` and ``--body-timeout`` of ``stctl broker`` and
``standalone``: what they set, what they refuse, and that standalone's child brokers get them."""

from __future__ import annotations

from pathlib import Path

import pytest

from scalable_topics.broker.config import BrokerConfig
from scalable_topics.cli import build_parser, main
from scalable_topics.commands.timeout_flags import timeout_argv, timeouts
from support.child_brokers import broker_arguments, child_broker

COMMANDS = {
    "broker": ["broker", "--data-dir", "d", "--store", "embedded:///x.db"],
    "standalone": ["standalone", "--data-dir", "d"],
}
FLAGS = ["--handshake-timeout", "2.5", "--auth-timeout", "3", "--body-timeout", "60"]


@pytest.mark.parametrize("command", list(COMMANDS))
def test_the_flags_set_the_broker_fields(command: str) -> None:
    args = build_parser().parse_args([*COMMANDS[command], *FLAGS])
    assert timeouts(args) == {
        "handshake_timeout": 2.5,
        "auth_timeout": 3.0,
        "body_timeout": 60.0,
    }
    config = BrokerConfig(data_dir=Path("d"), store_url="embedded:///x.db", **timeouts(args))
    assert (config.handshake_timeout, config.auth_timeout, config.body_timeout) == (2.5, 3, 60)


@pytest.mark.parametrize("command", list(COMMANDS))
def test_flags_not_given_keep_the_broker_defaults(command: str) -> None:
    args = build_parser().parse_args(COMMANDS[command])
    assert timeouts(args) == {}
    config = BrokerConfig(data_dir=Path("d"), store_url="embedded:///x.db")
    assert (config.handshake_timeout, config.auth_timeout, config.body_timeout) == (10, 10, 30)


@pytest.mark.parametrize("command", list(COMMANDS))
@pytest.mark.parametrize("value", ["0", "-1", "soon", "nan", "inf"])
@pytest.mark.parametrize("flag", ["--handshake-timeout", "--auth-timeout", "--body-timeout"])
def test_a_value_that_is_no_positive_number_is_a_usage_error(
    capsys: pytest.CaptureFixture[str], command: str, flag: str, value: str
) -> None:
    with pytest.raises(SystemExit) as exited:
        main([*COMMANDS[command], flag, value])
    assert exited.value.code == 2
    assert f"expected seconds, a number > 0, not {value!r}" in capsys.readouterr().err


@pytest.mark.parametrize("command", list(COMMANDS))
def test_help_documents_the_flags_and_their_defaults(
    command: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit):
        main([command, "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "--handshake-timeout S" in text and "--auth-timeout S" in text
    assert "1008 (policy violation) (default 10)" in text
    assert "answered 408 and the connection closed (default 30)" in text


def test_standalone_gives_its_child_brokers_the_same_timeouts(tmp_path: Path) -> None:
    args = build_parser().parse_args([*COMMANDS["standalone"], *FLAGS])
    broker_args = broker_arguments(child_broker(tmp_path, timeouts=timeouts(args)), 6651)
    assert timeouts(broker_args) == timeouts(args)
    assert timeout_argv({}) == []
