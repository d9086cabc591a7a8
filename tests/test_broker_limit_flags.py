"""The flags of the broker's client limits (commands/broker_limits.py) on ``stctl broker`` and
``stctl standalone``: what they set, the defaults their help states, and clear refusals."""

from __future__ import annotations

from pathlib import Path

import pytest

from scalable_topics.broker.config import BrokerConfig
from scalable_topics.cli import build_parser, main
from scalable_topics.commands.broker_limits import LIMITS, limit_settings
from support.child_brokers import broker_arguments, child_broker

COMMANDS = ["broker", "standalone"]


def _command(command: str, tmp_path: Path) -> list[str]:
    return {
        "broker": ["broker", "--data-dir", str(tmp_path), "--store", "embedded:///x.db"],
        "standalone": ["standalone", "--data-dir", str(tmp_path)],
    }[command]


@pytest.mark.parametrize("command", COMMANDS)
def test_each_flag_sets_its_config_field_and_the_others_keep_their_defaults(
    tmp_path: Path, command: str
) -> None:
    args = build_parser().parse_args(
        [*_command(command, tmp_path), "--max-pending-publishes-per-producer", "7"]
    )
    settings = limit_settings(args)
    assert settings == {"max_pending_publishes_per_producer": 7}
    config = BrokerConfig(data_dir=tmp_path, store_url="embedded:///x.db", **settings)
    assert config.max_pending_publishes_per_producer == 7
    assert config.max_unacked_messages_per_consumer == 50_000


def test_the_defaults_the_help_states_are_the_configs() -> None:
    defaults = BrokerConfig(data_dir=Path("d"), store_url="embedded:///x.db")
    for limit in LIMITS:
        stated = int(limit.default.split(",")[0])
        assert stated == getattr(defaults, limit.field), limit.flag


@pytest.mark.parametrize("command", COMMANDS)
@pytest.mark.parametrize(
    ("flag", "value", "message"),
    [
        ("--max-pending-publishes-per-connection", "0", "must be at least 1, not 0"),
        ("--max-pending-publish-bytes-per-connection", "-5", "must be at least 1, not -5"),
        ("--max-pending-publishes-per-producer", "0", "must be at least 1, not 0"),
        ("--max-unacked-messages-per-consumer", "-1", "must be at least 0, not -1"),
        ("--max-unacked-messages-per-subscription", "-1", "must be at least 0, not -1"),
        ("--max-connections", "0", "must be at least 1, not 0"),
        ("--max-connections-per-ip", "-1", "must be at least 0, not -1"),
        ("--max-open-per-connection", "0", "must be at least 1, not 0"),
    ],
)
def test_values_out_of_range_are_refused_naming_the_flag(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    command: str,
    flag: str,
    value: str,
    message: str,
) -> None:
    assert main([*_command(command, tmp_path), flag, value]) == 2
    assert capsys.readouterr().err == f"stctl {command}: {flag} {message}\n"


def test_standalone_gives_its_child_brokers_the_same_limits(tmp_path: Path) -> None:
    limits = {
        "max_unacked_messages_per_consumer": 0,
        "max_pending_publishes_per_producer": 9,
        "max_connections": 300,
        "max_connections_per_ip": 20,
        "max_open_per_connection": 50,
    }
    parsed = broker_arguments(child_broker(tmp_path, limits=limits))
    assert limit_settings(parsed) == limits
