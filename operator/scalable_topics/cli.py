"""``stctl``: the command line of scalable topics.

Only commands that work end to end are registered here; each later component adds its own.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
from collections.abc import Callable, Sequence

from . import __version__

Command = Callable[[argparse.Namespace], int]


def _print_crds(_: argparse.Namespace) -> int:
    from .crdgen import custom_resource_definitions, render

    sys.stdout.write("---\n".join(render(crd) for crd in custom_resource_definitions().values()))
    return 0


def _run_broker(args: argparse.Namespace) -> int:
    from pydantic import ValidationError

    from .broker.app import run
    from .broker.config import BrokerConfig

    try:
        config = BrokerConfig(
            data_dir=args.data_dir,
            store_url=args.store,
            host=args.host,
            port=args.port,
            advertised_url=args.advertised_url,
            broker_id=args.broker_id,
            sync=args.sync,
            auth_token=args.auth_token,
        )
    except ValidationError as error:
        print(f"stctl broker: invalid settings: {error}", file=sys.stderr)
        return 2
    run(config)
    return 0


def _add_broker(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    broker = commands.add_parser(
        "broker",
        help="run a broker: segment logs, producers, consumers and the segment admin API",
        description="Run a broker serving the segments placed on it (wire protocol on /ws, "
        "admin API on /admin/v1/segments, Prometheus metrics on /metrics).",
    )
    broker.add_argument("--data-dir", required=True, help="where segment logs and cursors live")
    broker.add_argument(
        "--store", required=True, help="store URL, e.g. embedded:///var/lib/st/store.db"
    )
    broker.add_argument(
        "--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)"
    )
    broker.add_argument("--port", type=int, default=6650, help="port to listen on (default 6650)")
    broker.add_argument(
        "--advertised-url", help="how clients reach this broker (default ws://HOST:PORT)"
    )
    broker.add_argument("--broker-id", help="this broker's identity (default HOST:PORT)")
    broker.add_argument(
        "--sync",
        choices=["batch", "interval", "none"],
        default="batch",
        help="when the log fsyncs: batch (before acknowledging, the default), interval, none",
    )
    broker.add_argument("--auth-token", help="require this token from clients and admin requests")
    broker.set_defaults(run=_run_broker)


def _run_controller(args: argparse.Namespace) -> int:
    import asyncio
    import logging
    import socket

    from .controller.leader import ElectionTiming
    from .controller.manager import ControllerConfig, ControllerManager
    from .store import open_store

    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    try:
        timing = ElectionTiming(args.lease_duration, args.renew_deadline, args.retry_period)
        store = open_store(args.store)
    except ValueError as error:
        print(f"stctl controller: {error}", file=sys.stderr)
        return 2
    config = ControllerConfig(
        identity=args.identity or socket.gethostname(),
        endpoint=args.endpoint,
        system_namespace=args.system_namespace,
        timing=timing,
        admin_token=args.auth_token,
    )

    async def serve() -> None:
        try:
            await ControllerManager(store, config).run()
        finally:
            await store.close()

    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(serve())
    return 0


def _add_controller(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    controller = commands.add_parser(
        "controller",
        help="run a controller: leads topics (per-topic leases), creates and deletes their segments",
        description="Run a controller process. Every controller campaigns for every topic's Lease; "
        "the holder reconciles the topic (layout, Segment objects, placement, storage, deletion).",
    )
    controller.add_argument(
        "--store", required=True, help="store URL, e.g. embedded:///var/lib/st/store.db"
    )
    controller.add_argument(
        "--identity", help="this controller's identity (default: the host name)"
    )
    controller.add_argument("--endpoint", help="the endpoint published with the topic leases")
    controller.add_argument(
        "--system-namespace", default="scalable-topics", help="where brokers register"
    )
    controller.add_argument(
        "--lease-duration", type=float, default=15.0, help="seconds (default 15)"
    )
    controller.add_argument(
        "--renew-deadline", type=float, default=10.0, help="seconds (default 10)"
    )
    controller.add_argument("--retry-period", type=float, default=2.0, help="seconds (default 2)")
    controller.add_argument("--auth-token", help="token for the brokers' admin API")
    controller.set_defaults(run=_run_controller)


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
    _add_broker(commands)
    _add_controller(commands)
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
