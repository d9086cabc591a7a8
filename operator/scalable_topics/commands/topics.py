"""``stctl topics``: create, list, describe, delete, split, merge, stats and load
(topics_load.py), through the topic admin API of any broker."""

from __future__ import annotations

import argparse
import sys
from typing import TypeAlias

from ..admin.stats_table import render_table
from ..client.admin import Admin
from .admin_call import (
    add_connection_arguments,
    add_namespace_argument,
    add_output_argument,
    add_topic_arguments,
    run_admin,
    settings_of,
    topic_of,
)
from .output import print_json, print_table
from .topic_text import LIST_HEADER, describe_text, list_rows
from .topics_load import add_topics_load
from .topics_watch import add_topics_watch

Subcommands: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"


def _command(args: argparse.Namespace) -> str:
    return f"stctl topics {args.topic_command}"


def _subscription(value: str) -> tuple[str, str]:
    name, _, kind = value.partition(":")
    if not name:
        raise argparse.ArgumentTypeError(f"expected NAME or NAME:TYPE, not {value!r}")
    return name, kind or "Queue"


def _property(value: str) -> tuple[str, str]:
    key, equals, item = value.partition("=")
    if not key or not equals:
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, not {value!r}")
    return key, item


# -- create -----------------------------------------------------------------------------------


def _run_create(args: argparse.Namespace) -> int:
    retention = {
        key: value
        for key, value in (
            ("maxSizeBytes", args.retention_bytes),
            ("maxAgeSeconds", args.retention_seconds),
        )
        if value is not None
    }

    async def work(admin: Admin) -> int:
        topic = topic_of(args)
        created = await admin.create_topic(
            topic,
            args.segments,
            args.subscription,
            dict(args.property),
            retention or None,
        )
        if args.output == "json":
            print_json(created)
        else:
            subscriptions = ", ".join(f"{n}:{t}" for n, t in args.subscription) or "none"
            print(f"topic {topic} created: {args.segments} segments, subscriptions {subscriptions}")
        return 0

    return run_admin(args, _command(args), work)


def _add_create(commands: Subcommands) -> None:
    create = commands.add_parser(
        "create",
        help="create a topic",
        description="Create a ScalableTopic; a controller then creates its segments.",
    )
    add_topic_arguments(create)
    create.add_argument(
        "--segments", type=int, default=1, help="initial number of segments (default 1)"
    )
    create.add_argument(
        "--subscription",
        type=_subscription,
        action="append",
        default=[],
        metavar="NAME[:TYPE]",
        help="declare a subscription; TYPE is Queue (default), Stream or Checkpoint; repeatable",
    )
    create.add_argument(
        "--property",
        type=_property,
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a topic property; repeatable",
    )
    create.add_argument("--retention-bytes", type=int, help="keep at most this many consumed bytes")
    create.add_argument(
        "--retention-seconds", type=int, help="keep consumed data at most this long"
    )
    add_output_argument(create)
    create.set_defaults(run=_run_create)


# -- list, describe, delete -------------------------------------------------------------------


def _run_list(args: argparse.Namespace) -> int:
    async def work(admin: Admin) -> int:
        namespace = settings_of(args).namespace
        topics = await admin.list_topics(None if args.all_namespaces else namespace)
        if args.output == "json":
            print_json(topics)
        elif topics:
            print_table(LIST_HEADER, list_rows(topics))
        else:
            where = "any namespace" if args.all_namespaces else f"namespace {namespace}"
            print(f"no topics in {where}")
        return 0

    return run_admin(args, _command(args), work)


def _add_list(commands: Subcommands) -> None:
    listing = commands.add_parser("list", help="list topics", description="List topics.")
    add_namespace_argument(listing)
    listing.add_argument(
        "-A", "--all-namespaces", action="store_true", help="list topics of every namespace"
    )
    add_connection_arguments(listing)
    add_output_argument(listing)
    listing.set_defaults(run=_run_list)


def _run_describe(args: argparse.Namespace) -> int:
    async def work(admin: Admin) -> int:
        topic = await admin.describe_topic(topic_of(args))
        if args.output == "json":
            print_json(topic)
        else:
            sys.stdout.write(describe_text(topic))
        return 0

    return run_admin(args, _command(args), work)


def _run_delete(args: argparse.Namespace) -> int:
    async def work(admin: Admin) -> int:
        topic = topic_of(args)
        summary = await admin.delete_topic(topic)
        if args.output == "json":
            print_json(summary)
        else:
            print(f"topic {topic} is being deleted")
        return 0

    return run_admin(args, _command(args), work)


def _add_describe_delete(commands: Subcommands) -> None:
    describe = commands.add_parser(
        "describe",
        help="show a topic: its segment DAG, controller, operations and subscriptions",
        description="Show a topic: epoch, phase, controller, the segment DAG (id, hash range, "
        "state, parents, children, broker), the last split or merge, and subscriptions.",
    )
    delete = commands.add_parser(
        "delete",
        help="delete a topic and its segments",
        description="Delete a topic; its controller deletes the segments, then the topic goes.",
    )
    for parser, run in ((describe, _run_describe), (delete, _run_delete)):
        add_topic_arguments(parser)
        add_output_argument(parser)
        parser.set_defaults(run=run)


# -- split, merge, stats ----------------------------------------------------------------------


def _run_scaling(args: argparse.Namespace) -> int:
    async def work(admin: Admin) -> int:
        topic = topic_of(args)
        if args.topic_command == "split":
            operation = await admin.split(topic, args.segments[0], args.timeout)
        else:
            first, second = args.segments
            operation = await admin.merge(topic, first, second, args.timeout)
        if args.output == "json":
            print_json(operation)
        else:
            print(operation["message"])
        return 0

    return run_admin(args, _command(args), work)


def _add_scaling(commands: Subcommands) -> None:
    split = commands.add_parser(
        "split",
        help="split an active segment at the middle of its hash range",
        description="Split an active segment into two children at the middle of its hash "
        "range, and wait until producers write to them. The same request as "
        "`kubectl annotate st NAME scalabletopics.dev/split-segment=ID`.",
    )
    add_topic_arguments(split)
    split.add_argument("segments", metavar="SEGMENT", type=int, nargs=1, help="segment id")
    merge = commands.add_parser(
        "merge",
        help="merge two adjacent active segments into one",
        description="Merge two active segments with adjacent hash ranges into one, and wait "
        "until producers write to it. The same request as "
        "`kubectl annotate st NAME scalabletopics.dev/merge-segments=ID1,ID2`.",
    )
    add_topic_arguments(merge)
    merge.add_argument("segments", metavar="SEGMENT", type=int, nargs=2, help="segment ids")
    for parser in (split, merge):
        parser.add_argument(
            "--timeout",
            type=float,
            default=60.0,
            help="seconds to wait for the controller (default 60)",
        )
        add_output_argument(parser)
        parser.set_defaults(run=_run_scaling)


def _run_stats(args: argparse.Namespace) -> int:
    async def work(admin: Admin) -> int:
        stats = await admin.stats(topic_of(args))
        if args.output == "json":
            print_json(stats)
        else:
            sys.stdout.write(render_table(stats))
        return 0

    return run_admin(args, _command(args), work)


def _add_stats(commands: Subcommands) -> None:
    stats = commands.add_parser(
        "stats",
        help="segment counts, rates, backlogs and consumers of a topic",
        description="Aggregate every segment's stats from its broker: segment counts, "
        "per-segment rates and backlog, per-subscription backlog and consumers, totals. A "
        "segment whose broker does not answer is shown as unavailable.",
    )
    add_topic_arguments(stats)
    add_output_argument(stats)
    stats.set_defaults(run=_run_stats)


def add_topics(commands: Subcommands) -> None:
    topics = commands.add_parser(
        "topics",
        help="create, inspect, scale and delete scalable topics",
        description="Create, inspect, scale and delete ScalableTopics through the topic admin "
        "API of any broker (--url).",
    )

    def usage(_: argparse.Namespace) -> int:
        topics.print_help(sys.stderr)
        return 2

    topics.set_defaults(run=usage)
    topic_commands = topics.add_subparsers(
        title="topic commands", metavar="COMMAND", dest="topic_command"
    )
    _add_create(topic_commands)
    _add_list(topic_commands)
    _add_describe_delete(topic_commands)
    _add_scaling(topic_commands)
    _add_stats(topic_commands)
    add_topics_watch(topic_commands)
    add_topics_load(topic_commands)
