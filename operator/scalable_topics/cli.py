"""``stctl``: the command line of scalable topics.

This module assembles the parser; each command group lives in its own module under
``commands/``. Only commands that work end to end are registered.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence

from . import __version__
from .commands.broker import add_broker
from .commands.config import add_config
from .commands.consume import add_consume
from .commands.controller import add_controller
from .commands.kube_api import add_kube_api
from .commands.operator import add_operator
from .commands.produce import add_produce
from .commands.standalone import add_standalone
from .commands.subscriptions import add_subscriptions
from .commands.tokens import add_tokens
from .commands.topics import add_topics
from .commands.watch import add_watch

Command = Callable[[argparse.Namespace], int]


def _print_crds(_: argparse.Namespace) -> int:
    from .crdgen import custom_resource_definitions, render

    sys.stdout.write("---\n".join(render(crd) for crd in custom_resource_definitions().values()))
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="stctl",
        description="Scalable topics: streaming topics that split and merge at runtime.",
    )
    parser.add_argument("--version", action="version", version=f"stctl {__version__}")
    commands = parser.add_subparsers(title="commands", metavar="COMMAND")
    crds = commands.add_parser(
        "crds",
        help="print the CustomResourceDefinitions (pipe into `kubectl apply -f -`)",
        description="Print the CustomResourceDefinitions of the scalabletopics.dev API group.",
    )
    crds.set_defaults(run=_print_crds)
    add_standalone(commands)
    add_broker(commands)
    add_controller(commands)
    add_operator(commands)
    add_kube_api(commands)
    add_topics(commands)
    add_subscriptions(commands)
    add_tokens(commands)
    add_config(commands)
    add_produce(commands)
    add_consume(commands)
    add_watch(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    run: Command | None = getattr(args, "run", None)
    if run is None:
        parser.print_help(sys.stderr)
        return 2
    return run(args)


if __name__ == "__main__":
    raise SystemExit(main())
