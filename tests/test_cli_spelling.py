"""One spelling across the client commands: a topic is ``NAME`` with ``-n/--namespace NS``, or
``NAMESPACE/NAME``; every one takes ``--url``, ``--auth-token``, ``--connect-timeout`` and
``-o``."""

from __future__ import annotations

import argparse

import pytest

from scalable_topics.cli import build_parser
from scalable_topics.commands.admin_call import topic_of

# Each client command that names a topic, with what else it needs to parse.
TOPIC_COMMANDS = [
    ("topics", "create"),
    ("topics", "describe"),
    ("topics", "delete"),
    ("topics", "split", "{topic}", "0"),
    ("topics", "merge", "{topic}", "0", "1"),
    ("topics", "stats"),
    ("topics", "load"),
    ("subscriptions", "create", "{topic}", "billing"),
    ("subscriptions", "delete", "{topic}", "billing"),
    ("subscriptions", "list"),
    ("produce", "{topic}", "-m", "x"),
    ("consume", "{topic}", "-s", "billing"),
    ("watch",),
]


def parsed(command: tuple[str, ...], topic: str | None, *extra: str) -> argparse.Namespace:
    words = [word.format(topic=topic) for word in command]
    if "{topic}" not in command and topic is not None:
        words.append(topic)
    return build_parser().parse_args([*words, *extra])


@pytest.mark.parametrize("command", TOPIC_COMMANDS, ids=" ".join)
def test_every_topic_command_takes_both_forms(command: tuple[str, ...]) -> None:
    assert topic_of(parsed(command, "orders")) == "default/orders"
    assert topic_of(parsed(command, "orders", "-n", "team")) == "team/orders"
    assert topic_of(parsed(command, "orders", "--namespace", "team")) == "team/orders"
    assert topic_of(parsed(command, "team/orders")) == "team/orders"
    assert topic_of(parsed(command, "team/orders", "-n", "team")) == "team/orders"
    with pytest.raises(ValueError, match="is in namespace 'team', but -n says 'other'"):
        topic_of(parsed(command, "team/orders", "-n", "other"))
    with pytest.raises(ValueError, match="NAME or NAMESPACE/NAME"):
        topic_of(parsed(command, "a/b/c"))


# Client commands that name a namespace and no topic.
NAMESPACE_COMMANDS = [("topics", "list"), ("topics", "watch")]


@pytest.mark.parametrize("command", [*TOPIC_COMMANDS, *NAMESPACE_COMMANDS], ids=" ".join)
def test_every_client_command_takes_the_same_connection_and_output_flags(
    command: tuple[str, ...],
) -> None:
    topic = None if command in NAMESPACE_COMMANDS else "orders"
    args = parsed(
        command,
        topic,
        *("--url", "ws://broker:1", "--auth-token", "t", "--connect-timeout", "2"),
        *("-o", "json"),
    )
    assert (args.url, args.auth_token, args.connect_timeout, args.output) == (
        "ws://broker:1",
        "t",
        2.0,
        "json",
    )
    for human in ("table", "text"):
        assert parsed(command, topic, "-o", human).output == human
