"""``stctl``: the command line of scalable topics.

Only commands that work end to end are registered here; each later component adds its own.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING

from . import __version__

if TYPE_CHECKING:
    from .controller.broker_admin import BrokerAdmin
    from .store import Store

Command = Callable[[argparse.Namespace], int]
TopicWork = Callable[["Store", "BrokerAdmin"], Awaitable[int]]


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
        endpoint = args.endpoint
        if endpoint is None and args.listen is not None:
            host, port = args.listen
            if host in ("0.0.0.0", "::"):
                raise ValueError(f"listening on {host}, give the --endpoint brokers reach")
            endpoint = f"http://{'[' + host + ']' if ':' in host else host}:{port}"
        config = ControllerConfig(
            identity=args.identity or socket.gethostname(),
            endpoint=endpoint,
            system_namespace=args.system_namespace,
            timing=timing,
            admin_token=args.auth_token,
            listen=args.listen,
            consumer_grace_period=args.consumer_grace_period,
        )
        store = open_store(args.store)
    except ValueError as error:
        print(f"stctl controller: {error}", file=sys.stderr)
        return 2

    async def serve() -> int:
        import signal

        # Kubernetes stops pods with SIGTERM: leave cleanly, releasing the leases we hold so
        # that another controller leads at once instead of after the lease expires.
        work = asyncio.current_task()
        assert work is not None
        asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, work.cancel)
        try:
            await ControllerManager(store, config).run()
        except asyncio.CancelledError:
            pass
        except OSError as error:
            if args.listen is None:
                raise
            host, port = args.listen  # the address cannot be bound
            print(f"stctl controller: cannot listen on {host}:{port}: {error}", file=sys.stderr)
            return 1
        finally:
            await store.close()
        return 0

    with contextlib.suppress(KeyboardInterrupt):
        return asyncio.run(serve())
    return 0


def _host_port(value: str) -> tuple[str, int]:
    host, _, port = value.rpartition(":")
    if not host or not port.isdecimal() or not 1 <= int(port) <= 65535:
        raise argparse.ArgumentTypeError(f"expected HOST:PORT with a port 1-65535, not {value!r}")
    return host.strip("[]"), int(port)


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
    controller.add_argument(
        "--listen",
        type=_host_port,
        metavar="HOST:PORT",
        help="serve consumer sessions (relayed by brokers) on this address",
    )
    controller.add_argument(
        "--endpoint",
        help="how brokers reach this controller, published with the topic leases "
        "(default http://HOST:PORT of --listen)",
    )
    controller.add_argument(
        "--consumer-grace-period",
        type=float,
        default=30.0,
        help="seconds a disconnected stream/checkpoint consumer keeps its segments (default 30)",
    )
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
    controller.add_argument(
        "--auth-token",
        help="the cluster token: sent to the brokers' admin API, required from brokers on --listen",
    )
    controller.set_defaults(run=_run_controller)


# -- stctl topics: one group, one function per subcommand ------------------------------------------


def _add_topic_arguments(parser: argparse.ArgumentParser) -> None:
    """What every ``stctl topics`` subcommand takes to find its topic."""
    parser.add_argument("name", metavar="NAME", help="the ScalableTopic's name")
    parser.add_argument("-n", "--namespace", default="default", help="its namespace (default)")
    parser.add_argument(
        "--store", required=True, help="store URL, e.g. embedded:///var/lib/st/store.db"
    )
    parser.add_argument("--auth-token", help="token for the brokers' admin API")


def _run_topic_command(args: argparse.Namespace, work: TopicWork) -> int:
    """Open the store and an admin client, run ``work``; exit 1 when the topic is not found
    or the store fails, 2 for a store URL no adapter serves."""
    import asyncio

    import aiohttp

    from .controller.broker_admin import BrokerAdmin
    from .store import NotFound, StoreError, open_store

    command = f"stctl topics {args.topic_command}"
    try:
        store = open_store(args.store)
    except ValueError as error:
        print(f"{command}: {error}", file=sys.stderr)
        return 2

    async def run() -> int:
        try:
            async with aiohttp.ClientSession() as http:
                return await work(store, BrokerAdmin(http, args.auth_token))
        finally:
            await store.close()

    try:
        return asyncio.run(run())
    except NotFound:
        print(f"{command}: topic {args.namespace}/{args.name} not found", file=sys.stderr)
    except StoreError as error:
        print(f"{command}: the store failed: {error}", file=sys.stderr)
    except ValueError as error:  # e.g. a topic whose stored layout is corrupt
        print(f"{command}: {error}", file=sys.stderr)
    return 1


def _run_topics_stats(args: argparse.Namespace) -> int:
    import json

    from .controller.stats_gather import gather_topic_stats
    from .controller.stats_table import render_table

    async def work(store: Store, admin: BrokerAdmin) -> int:
        stats = await gather_topic_stats(store, admin, args.namespace, args.name)
        if args.output == "json":
            sys.stdout.write(json.dumps(stats.to_dict(), indent=2) + "\n")
        else:
            sys.stdout.write(render_table(stats))
        return 0

    return _run_topic_command(args, work)


def _add_topics_stats(topic_commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    stats = topic_commands.add_parser(
        "stats",
        help="segment counts, rates, backlogs and consumers of a topic",
        description="Aggregate every segment's stats from its broker: segment counts, "
        "per-segment rates and backlog, per-subscription backlog and consumers, totals. A "
        "segment whose broker does not answer is shown as unavailable.",
    )
    _add_topic_arguments(stats)
    stats.add_argument(
        "-o",
        "--output",
        choices=["table", "json"],
        default="table",
        help="table (default) or json, for scripts",
    )
    stats.set_defaults(run=_run_topics_stats)


def _run_topics_scaling(args: argparse.Namespace) -> int:
    import json

    from .controller.scale_requests import RequestTimedOut, request_scaling
    from .model.errors import LayoutError
    from .model.layout import ChangeKind

    kind = ChangeKind.SPLIT if args.topic_command == "split" else ChangeKind.MERGE
    command = f"stctl topics {args.topic_command}"

    async def work(store: Store, admin: BrokerAdmin) -> int:
        try:
            last = await request_scaling(
                store, args.namespace, args.name, kind, tuple(args.segments), args.timeout
            )
        except LayoutError as error:
            print(f"{command}: {error}", file=sys.stderr)
            return 1
        except RequestTimedOut as error:
            print(f"{command}: {error}", file=sys.stderr)
            return 1
        if args.output == "json":
            sys.stdout.write(json.dumps(last.to_wire(), indent=2) + "\n")
        elif last.result == "Succeeded":
            print(last.message)
        else:
            print(f"{command}: {last.result.lower()}: {last.message}", file=sys.stderr)
        return 0 if last.result == "Succeeded" else 1

    return _run_topic_command(args, work)


def _add_topics_scaling(
    topic_commands: argparse._SubParsersAction[argparse.ArgumentParser],
) -> None:
    split = topic_commands.add_parser(
        "split",
        help="split an active segment at the middle of its hash range",
        description="Split an active segment into two children at the middle of its hash "
        "range, and wait until producers write to them. The same request as "
        "`kubectl annotate st NAME scalabletopics.dev/split-segment=ID`.",
    )
    _add_topic_arguments(split)
    split.add_argument("segments", metavar="SEGMENT", type=int, nargs=1, help="segment id")
    merge = topic_commands.add_parser(
        "merge",
        help="merge two adjacent active segments into one",
        description="Merge two active segments with adjacent hash ranges into one, and wait "
        "until producers write to it. The same request as "
        "`kubectl annotate st NAME scalabletopics.dev/merge-segments=ID1,ID2`.",
    )
    _add_topic_arguments(merge)
    merge.add_argument("segments", metavar="SEGMENT", type=int, nargs=2, help="segment ids")
    for parser in (split, merge):
        parser.add_argument(
            "--timeout",
            type=float,
            default=60.0,
            help="seconds to wait for the controller (default 60)",
        )
        parser.add_argument(
            "-o",
            "--output",
            choices=["text", "json"],
            default="text",
            help="text (default) or json, for scripts",
        )
        parser.set_defaults(run=_run_topics_scaling)


def _add_topics(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    topics = commands.add_parser(
        "topics",
        help="inspect and operate on scalable topics",
        description="Inspect and operate on ScalableTopics through the store and the brokers.",
    )

    def usage(_: argparse.Namespace) -> int:
        topics.print_help(sys.stderr)
        return 2

    topics.set_defaults(run=usage)
    topic_commands = topics.add_subparsers(
        title="topic commands", metavar="COMMAND", dest="topic_command"
    )
    _add_topics_stats(topic_commands)
    _add_topics_scaling(topic_commands)


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
    _add_topics(commands)
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
