"""``stctl`` and the client configuration file: every client command takes ``--config`` and
``--context`` and resolves its URL, token and namespace after parsing (flag, then environment,
then context, then default); a file that cannot be used stops it before it connects, in one line
with exit 2; ``stctl config view|get-contexts|use-context``."""

from __future__ import annotations

import json
import re
import stat
from pathlib import Path

import pytest

from scalable_topics.cli import build_parser, main
from scalable_topics.client.client_config import load_client_config
from scalable_topics.commands.admin_call import settings_of, topic_of

CONFIG = """apiVersion: scalabletopics.dev/v1
kind: ClientConfig
current-context: team
clusters:
- name: here
  cluster: {service-url: "ws://127.0.0.1:1"}
users:
- name: alice
  user: {token-file: alice.token}
contexts:
- name: team
  context: {cluster: here, user: alice, namespace: team-a}
- name: bare
  context: {cluster: here}
"""
TOKEN = "alice-s3cret"

# Every client command, with what else it needs to parse (TOPIC is orders).
CLIENT_COMMANDS = [
    ("topics", "create", "orders"),
    ("topics", "list"),
    ("topics", "describe", "orders"),
    ("topics", "delete", "orders"),
    ("topics", "split", "orders", "0"),
    ("topics", "merge", "orders", "0", "1"),
    ("topics", "stats", "orders"),
    ("topics", "load", "orders"),
    ("subscriptions", "create", "orders", "billing"),
    ("subscriptions", "delete", "orders", "billing"),
    ("subscriptions", "list", "orders"),
    ("produce", "orders", "-m", "x"),
    ("consume", "orders", "-s", "billing"),
    ("watch", "orders"),
]
TOPIC_COMMANDS = [c for c in CLIENT_COMMANDS if c != ("topics", "list")]


def command_name(command: tuple[str, ...]) -> str:
    return " ".join(command[:2] if command[0] in ("topics", "subscriptions") else command[:1])


@pytest.fixture
def config(tmp_path: Path) -> Path:
    path = tmp_path / "config"
    path.write_text(CONFIG)
    (tmp_path / "alice.token").write_text(TOKEN + "\n")
    return path


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize("command", [*CLIENT_COMMANDS, ("config", "view")], ids=" ".join)
def test_a_missing_config_file_stops_the_command_in_one_line(
    command: tuple[str, ...],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    missing = tmp_path / "missing"
    name = "config view" if command[0] == "config" else command_name(command)
    code, out, err = run(capsys, *command, "--config", str(missing))
    assert (code, out) == (2, "")
    assert err == f"stctl {name}: the client config {missing} does not exist\n"
    monkeypatch.setenv("STCTL_CONFIG", str(missing))
    code, out, err = run(capsys, *command)
    assert (code, out) == (2, "")
    assert err == f"stctl {name}: $STCTL_CONFIG names {missing}, which does not exist\n"


@pytest.mark.parametrize("command", CLIENT_COMMANDS, ids=" ".join)
def test_an_invalid_config_file_stops_the_command_naming_the_file_and_field(
    command: tuple[str, ...], config: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config.write_text(CONFIG.replace("namespace: team-a", "namespace: Team"))
    code, out, err = run(capsys, *command, "--config", str(config))
    assert (code, out) == (2, "")
    assert err.startswith(
        f"stctl {command_name(command)}: {config}: contexts.0.context.namespace: "
        "namespace 'Team' is not a DNS label"
    )
    assert err.count("\n") == 1


def test_a_token_file_that_cannot_be_read_stops_the_command(
    config: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (config.parent / "alice.token").unlink()
    code, _, err = run(capsys, "topics", "list", "--config", str(config))
    assert code == 2
    assert err == (
        f"stctl topics list: {config}: users.0.user.token-file: cannot read "
        f"{config.parent / 'alice.token'}: No such file or directory\n"
    )


@pytest.mark.parametrize("command", TOPIC_COMMANDS, ids=" ".join)
def test_a_bare_topic_is_in_the_context_namespace_unless_n_says_otherwise(
    command: tuple[str, ...], config: Path
) -> None:
    def topic(*extra: str) -> str:
        return topic_of(build_parser().parse_args([*command, "--config", str(config), *extra]))

    assert topic() == "team-a/orders"
    assert topic("-n", "other") == "other/orders"
    assert topic("--context", "bare") == "default/orders"
    args = build_parser().parse_args(
        [*(w if w != "orders" else "ns/orders" for w in command), "--config", str(config)]
    )
    assert topic_of(args) == "ns/orders"  # the context's namespace is a default, not a rule


@pytest.mark.parametrize("command", CLIENT_COMMANDS, ids=" ".join)
def test_every_client_command_resolves_its_settings_from_the_file(
    command: tuple[str, ...], config: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("STCTL_CONFIG", str(config))
    settings = settings_of(build_parser().parse_args(list(command)))
    assert (settings.service_url, settings.auth_token, settings.namespace) == (
        "ws://127.0.0.1:1",
        TOKEN,
        "team-a",
    )
    flagged = build_parser().parse_args(
        [*command, "--url", "ws://flag:2", "--auth-token", "t", "-n", "n", "--context", "bare"]
    )
    settings = settings_of(flagged)
    assert (settings.service_url, settings.auth_token, settings.namespace, settings.context) == (
        "ws://flag:2",
        "t",
        "n",
        "bare",
    )


# -- stctl config view --------------------------------------------------------------------------


def shown(out: str) -> dict[str, list[str]]:
    """The rows of ``config view``'s table: SETTING -> [VALUE, FROM]."""
    return {line.split()[0]: re.split(r"\s{2,}", line)[1:] for line in out.splitlines()[1:]}


def test_view_shows_each_setting_and_where_it_comes_from_but_never_the_token(
    config: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    code, out, err = run(capsys, "config", "view", "--config", str(config))
    assert (code, err) == (0, "")
    assert shown(out) == {
        "config": [str(config), "--config"],
        "context": ["team", "current-context"],
        "url": ["ws://127.0.0.1:1", "context team (cluster here)"],
        "namespace": ["team-a", "context team"],
        "token": ["set", f"user alice (token-file {config.parent / 'alice.token'})"],
    }
    monkeypatch.setenv("STCTL_CONFIG", str(config))
    monkeypatch.setenv("STCTL_URL", "ws://variable:2")
    monkeypatch.setenv("STCTL_AUTH_TOKEN", "variable-s3cret")
    code, out, _ = run(capsys, "config", "view", "--context", "bare", "-n", "flag-ns", "-o", "json")
    assert code == 0
    assert json.loads(out) == {
        "config": str(config),
        "configFrom": "$STCTL_CONFIG",
        "context": "bare",
        "contextFrom": "--context",
        "serviceUrl": "ws://variable:2",
        "serviceUrlFrom": "$STCTL_URL",
        "namespace": "flag-ns",
        "namespaceFrom": "--namespace",
        "tokenSet": True,
        "tokenFrom": "$STCTL_AUTH_TOKEN",
    }
    code, out, _ = run(capsys, "config", "view", "--auth-token", "flag-s3cret")
    assert shown(out)["token"] == ["set", "--auth-token"]
    for secret in (TOKEN, "variable-s3cret", "flag-s3cret"):
        assert secret not in out


def test_view_without_a_file_shows_the_defaults(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "config", "view")
    assert code == 0
    rows = shown(out)
    assert rows["config"][0] == "-"
    assert rows["config"][1].startswith("no --config, $STCTL_CONFIG or ")
    assert rows["url"] == ["ws://127.0.0.1:6650", "default"]
    assert rows["namespace"] == ["default", "default"]
    assert rows["token"] == ["not set", "-"]


def test_the_default_file_is_read_from_xdg_config_home(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "xdg" / "stctl").mkdir(parents=True)
    (tmp_path / "xdg" / "stctl" / "config").write_text(
        CONFIG.replace(" {token-file: alice.token}", " {token: t}")
    )
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    code, out, _ = run(capsys, "config", "view")
    assert code == 0
    assert shown(out)["config"] == [str(tmp_path / "xdg" / "stctl" / "config"), "default"]
    assert shown(out)["namespace"] == ["team-a", "context team"]


def test_a_context_without_a_file_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "topics", "list", "--context", "team")
    assert (code, out) == (2, "")
    assert err.startswith("stctl topics list: no client config file to take the context 'team'")


# -- get-contexts and use-context ---------------------------------------------------------------


def test_get_contexts_lists_them_and_marks_the_current_one(
    config: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run(capsys, "config", "get-contexts", "--config", str(config))
    assert code == 0
    assert [line.split() for line in out.splitlines()] == [
        ["CURRENT", "NAME", "CLUSTER", "USER", "NAMESPACE"],
        ["*", "team", "here", "alice", "team-a"],
        ["bare", "here", "-", "-"],
    ]
    code, out, _ = run(capsys, "config", "get-contexts", "--config", str(config), "-o", "json")
    assert json.loads(out) == [
        {
            "name": "team",
            "current": True,
            "cluster": "here",
            "serviceUrl": "ws://127.0.0.1:1",
            "user": "alice",
            "namespace": "team-a",
        },
        {
            "name": "bare",
            "current": False,
            "cluster": "here",
            "serviceUrl": "ws://127.0.0.1:1",
            "user": None,
            "namespace": None,
        },
    ]


def test_get_contexts_without_a_file_lists_none(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "config", "get-contexts")
    assert code == 0 and out.startswith("no contexts: no client configuration file")
    code, out, _ = run(capsys, "config", "get-contexts", "-o", "json")
    assert (code, json.loads(out)) == (0, [])


def test_use_context_switches_and_keeps_the_file_mode(
    config: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    config.chmod(0o640)
    monkeypatch.setenv("STCTL_CONFIG", str(config))
    code, out, err = run(capsys, "config", "use-context", "bare")
    assert (code, err) == (0, "")
    assert out == f"switched to context 'bare' in {config}\n"
    assert load_client_config(config).config.current_context == "bare"
    assert stat.S_IMODE(config.stat().st_mode) == 0o640
    settings = settings_of(build_parser().parse_args(["topics", "list"]))
    assert (settings.context, settings.auth_token, settings.namespace) == ("bare", None, "default")


def test_use_context_refuses_an_unknown_context_and_changes_nothing(
    config: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run(capsys, "config", "use-context", "nope", "--config", str(config))
    assert (code, out) == (2, "")
    assert (
        err
        == f"stctl config use-context: {config}: no context named 'nope' (contexts: team, bare)\n"
    )
    assert config.read_text() == CONFIG


def test_use_context_without_a_file_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "config", "use-context", "team")
    assert (code, out) == (2, "")
    assert err.startswith("stctl config use-context: no client configuration file to change")
