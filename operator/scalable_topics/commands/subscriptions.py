"""``stctl subscriptions``: declare, remove and list a topic's subscriptions."""

from __future__ import annotations

import argparse
import sys
from typing import TypeAlias

from ..client.admin import Admin
from ..model.resources import SubscriptionType
from .admin_call import add_output_argument, add_topic_arguments, run_admin, topic_of
from .output import print_json
from .topic_text import subscription_table

Subcommands: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"


def _command(args: argparse.Namespace) -> str:
    return f"stctl subscriptions {args.subscription_command}"


def _run_create(args: argparse.Namespace) -> int:
    async def work(admin: Admin) -> int:
        topic = topic_of(args)
        declared = await admin.create_subscription(topic, args.subscription, args.type)
        if args.output == "json":
            print_json(declared)
        else:
            print(
                f"subscription {args.subscription} ({args.type}) declared on topic "
                f"{topic}; it starts at the latest message"
            )
        return 0

    return run_admin(args, _command(args), work)


def _run_delete(args: argparse.Namespace) -> int:
    async def work(admin: Admin) -> int:
        topic = topic_of(args)
        await admin.delete_subscription(topic, args.subscription)
        if args.output == "json":
            print_json({"name": args.subscription, "deleted": True})
        else:
            print(f"subscription {args.subscription} removed from topic {topic}")
        return 0

    return run_admin(args, _command(args), work)


def _run_list(args: argparse.Namespace) -> int:
    async def work(admin: Admin) -> int:
        topic = topic_of(args)
        subscriptions = await admin.list_subscriptions(topic)
        if args.output == "json":
            print_json(subscriptions)
        elif subscriptions:
            sys.stdout.write("\n".join(subscription_table(subscriptions)) + "\n")
        else:
            print(f"topic {topic} has no subscriptions")
        return 0

    return run_admin(args, _command(args), work)


def add_subscriptions(commands: Subcommands) -> None:
    group = commands.add_parser(
        "subscriptions",
        help="declare, remove and list a topic's subscriptions",
        description="Declare, remove and list the subscriptions of a topic (its "
        "spec.subscriptions); the controller creates or deletes them on every segment.",
    )

    def usage(_: argparse.Namespace) -> int:
        group.print_help(sys.stderr)
        return 2

    group.set_defaults(run=usage)
    subcommands = group.add_subparsers(
        title="subscription commands", metavar="COMMAND", dest="subscription_command"
    )
    create = subcommands.add_parser(
        "create",
        help="declare a subscription (it starts at the latest message)",
        description="Declare a subscription on a topic; it starts at the latest message.",
    )
    delete = subcommands.add_parser(
        "delete",
        help="remove a declared subscription from every segment",
        description="Remove a declared subscription; the controller deletes it everywhere.",
    )
    for parser in (create, delete):
        add_topic_arguments(parser)
        parser.add_argument("subscription", metavar="SUBSCRIPTION", help="its name")
    create.add_argument(
        "-t",
        "--type",
        choices=[t.value for t in SubscriptionType],
        default=SubscriptionType.QUEUE.value,
        help="Queue (default), Stream or Checkpoint",
    )
    listing = subcommands.add_parser(
        "list",
        help="list a topic's subscriptions with their state and consumers",
        description="List declared subscriptions and the ones consumers created.",
    )
    add_topic_arguments(listing)
    for parser, run in ((create, _run_create), (delete, _run_delete), (listing, _run_list)):
        add_output_argument(parser)
        parser.set_defaults(run=run)
