"""``stctl controller``: one controller process."""

from __future__ import annotations

import argparse
import contextlib
import sys

from ..controller.supervisor import DEFAULT_CONCURRENT_PASSES
from ..model.ownership import DEFAULT_SHARD_COUNT


def _run_controller(args: argparse.Namespace) -> int:
    import asyncio
    import logging
    import socket

    from ..controller.leader import ElectionTiming
    from ..controller.manager import ControllerConfig, ControllerManager
    from ..store import open_store
    from ..tasks import cancel_all

    log = logging.getLogger("scalable_topics.commands.controller")

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
            shards=args.shards,
            concurrent_passes=args.concurrent_passes,
            broker_delete_timeout=args.broker_delete_timeout,
        )
        store = open_store(args.store)
    except ValueError as error:
        print(f"stctl controller: {error}", file=sys.stderr)
        return 2

    async def serve() -> int:
        import signal

        # Kubernetes stops pods with SIGTERM: leave cleanly, releasing the leases we hold so
        # that another controller leads at once instead of after the lease expires.
        loop = asyncio.get_running_loop()
        manager = loop.create_task(ControllerManager(store, config).run(), name="controller")
        loop.add_signal_handler(signal.SIGTERM, manager.cancel)
        try:
            await asyncio.wait({manager})
            if not manager.cancelled():
                manager.result()
        except OSError as error:
            if args.listen is None:
                raise
            host, port = args.listen  # the address cannot be bound
            print(f"stctl controller: cannot listen on {host}:{port}: {error}", file=sys.stderr)
            return 1
        finally:
            await cancel_all([manager], log, "the controller")
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


def add_controller(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    controller = commands.add_parser(
        "controller",
        help="run a controller: leads its share of the topics, creates and deletes their segments",
        description="Run a controller process. Topics hash onto --shards ownership shards, one "
        "Lease each; the controllers share the shards, and the holder of a shard reconciles its "
        "topics (layout, Segment objects, placement, storage, split and merge, deletion).",
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
        help="how brokers reach this controller, published on the shard leases it holds "
        "(default http://HOST:PORT of --listen)",
    )
    controller.add_argument(
        "--consumer-grace-period",
        type=float,
        default=30.0,
        help="seconds a disconnected stream/checkpoint consumer keeps its segments (default 30)",
    )
    controller.add_argument(
        "--broker-delete-timeout",
        type=float,
        default=10.0,
        help="seconds deleting a topic waits for a broker before leaving it its storage of "
        "the topic, which the broker removes when it registers again (default 10)",
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
        "--shards",
        type=int,
        default=DEFAULT_SHARD_COUNT,
        help=f"ownership shards, one Lease each (default {DEFAULT_SHARD_COUNT}); every controller "
        "replica must use the same count: change it only with every replica stopped",
    )
    controller.add_argument(
        "--concurrent-passes",
        type=int,
        default=DEFAULT_CONCURRENT_PASSES,
        help="passes over topics running at once, e.g. after a failover "
        f"(default {DEFAULT_CONCURRENT_PASSES})",
    )
    controller.add_argument(
        "--auth-token",
        help="the cluster token: sent to the brokers' admin API, required from brokers on --listen",
    )
    controller.set_defaults(run=_run_controller)
