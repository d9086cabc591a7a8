"""``stctl topics watch``: print the topics of a namespace that match property filters, then
each change of that set, one line each, until interrupted (or ``--changes N``)."""

from __future__ import annotations

import argparse
import json
from collections.abc import Iterable

from ..client import Client, TopicSetChange
from ..client.topic_layout import DEFAULT_NAMESPACE
from .admin_call import add_connection_arguments, add_output_argument, settings_of
from .client_call import run_client

COMMAND = "stctl topics watch"


def filter_pair(value: str) -> tuple[str, str]:
    key, equals, item = value.partition("=")
    if not key or not equals:
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, not {value!r}")
    return key, item


def _count(value: str) -> int:
    try:
        count = int(value)
    except ValueError:
        count = -1
    if count < 0:
        raise argparse.ArgumentTypeError(f"expected a number of changes (0 or more), not {value!r}")
    return count


def filters_of(pairs: Iterable[tuple[str, str]]) -> dict[str, str]:
    """The --filter pairs as one mapping; ValueError (exit 2) for a key given two values,
    which no topic could match."""
    filters: dict[str, str] = {}
    for key, value in pairs:
        if filters.get(key, value) != value:
            raise ValueError(
                f"--filter {key} is given twice ({filters[key]!r} and {value!r}): a topic has "
                "one value per property"
            )
        filters[key] = value
    return filters


def _names(namespace: str, topics: Iterable[str]) -> list[str]:
    """Sorted, without the namespace every one of them is in."""
    return sorted(topic.removeprefix(f"{namespace}/") for topic in topics)


def _listed(names: list[str]) -> str:
    return ", ".join(names)


def snapshot_line(namespace: str, topics: frozenset[str], as_json: bool) -> str:
    names = _names(namespace, topics)
    if as_json:
        return json.dumps({"event": "snapshot", "namespace": namespace, "topics": names})
    if not names:
        return f"{namespace}: no topics"
    return f"{namespace}: {len(names)} {_topics_word(len(names))}: {_listed(names)}"


def change_line(namespace: str, change: TopicSetChange, as_json: bool) -> str:
    added = _names(namespace, change.added)
    removed = _names(namespace, change.removed)
    if as_json:
        return json.dumps(
            {
                "event": "change",
                "namespace": namespace,
                "added": added,
                "removed": removed,
                "topics": _names(namespace, change.topics),
            }
        )
    # Removals first, as they apply: a name in both was deleted and created again.
    parts = ([f"removed {_listed(removed)}"] if removed else []) + (
        [f"added {_listed(added)}"] if added else []
    )
    count = len(change.topics)
    return f"{namespace}: {'; '.join(parts)} ({count} {_topics_word(count)})"


def _topics_word(count: int) -> str:
    return "topic" if count == 1 else "topics"


def _run(args: argparse.Namespace) -> int:
    async def work(client: Client) -> int:
        filters = filters_of(args.filter)
        namespace = settings_of(args).namespace
        as_json = args.output == "json"
        watcher = await client.watch_namespace(namespace, filters)
        changes = aiter(watcher)  # listening before the first line: no change is missed
        print(snapshot_line(namespace, watcher.topics, as_json), flush=True)
        printed = 0
        # NotAuthorized (say) when the watch ends for good: one line on stderr, exit 1.
        async for change in changes:
            print(change_line(namespace, change, as_json), flush=True)
            printed += 1
            if printed == args.changes:
                break
        return 0

    return run_client(args, COMMAND, work)


def add_topics_watch(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    watch = commands.add_parser(
        "watch",
        help="print a namespace's topics matching property filters, then each change",
        description="Print the topics of a namespace whose properties match every --filter "
        "(all of them without filters), then one line per change of that set: topics "
        "created or deleted, or whose properties now match or no longer do. A topic removed "
        "and added in one line was deleted and created again. Runs until interrupted, or "
        "until --changes changes were printed. Brokers must speak protocol version 2.",
    )
    watch.add_argument(
        "-n",
        "--namespace",
        default=None,
        help=f"the namespace to watch (default: the context's, else {DEFAULT_NAMESPACE})",
    )
    watch.add_argument(
        "--filter",
        type=filter_pair,
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="only topics with property KEY set to VALUE; repeatable, all must hold (at most 64)",
    )
    watch.add_argument(
        "--changes",
        type=_count,
        default=0,
        metavar="N",
        help="exit after printing this many changes after the first line (default 0: never)",
    )
    add_output_argument(watch)
    add_connection_arguments(watch)
    watch.set_defaults(run=_run)
