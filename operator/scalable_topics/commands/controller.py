"""``stctl controller``: one controller process."""

from __future__ import annotations

import argparse
import contextlib
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from .store_flags import add_store_budget_flags

if TYPE_CHECKING:
    from ..controller.manager import ControllerConfig

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
    from .store_flags import store_budget

    log = logging.getLogger("scalable_topics.commands.controller")

    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    try:
        budget = store_budget(args.store, args.store_qps, args.store_burst)
        timing = ElectionTiming(args.lease_duration, args.renew_deadline, args.retry_period)
        if (
            args.listen is not None
            and args.endpoint is None
            and args.listen[0] in ("0.0.0.0", "::")
        ):
            raise ValueError(f"listening on {args.listen[0]}, give the --endpoint brokers reach")
        if args.address_file is not None and args.listen is None:
            raise ValueError("--address-file needs --listen: there is no address to write")
        config = ControllerConfig(
            identity=args.identity or socket.gethostname(),
            endpoint=args.endpoint,
            system_namespace=args.system_namespace,
            timing=timing,
            admin_token=args.auth_token,
            consumer_grace_period=args.consumer_grace_period,
            shards=args.shards,
            concurrent_passes=args.concurrent_passes,
            broker_delete_timeout=args.broker_delete_timeout,
        )
    except ValueError as error:
        print(f"stctl controller: {error}", file=sys.stderr)
        return 2
    if args.listen is not None:
        try:
            config = _listening(config, args.listen, args.address_file)
        except OSError as error:
            print(f"stctl controller: {error}", file=sys.stderr)
            return 1
    try:
        store = open_store(args.store, budget=budget)
    except ValueError as error:
        if config.listen_socket is not None:
            config.listen_socket.close()
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
        finally:
            await cancel_all([manager], log, "the controller")
            await store.close()
        return 0

    with contextlib.suppress(KeyboardInterrupt):
        return asyncio.run(serve())
    return 0


def _listening(
    config: ControllerConfig, listen: tuple[str, int], address_file: Path | None
) -> ControllerConfig:
    """``config`` serving on a socket bound to ``listen`` now, before the controller starts, so
    that with port 0 it publishes the port it has; raise OSError saying what failed."""
    import dataclasses

    from ..listening import bound_address, listening_socket, write_address_file

    host, port = listen
    try:
        sock = listening_socket(host, port)
    except OSError as error:
        raise OSError(f"cannot listen on {host}:{port}: {error.strerror or error}") from None
    port = bound_address(sock)[1]
    if address_file is not None:
        try:
            write_address_file(address_file, *bound_address(sock))
        except OSError as error:
            sock.close()
            raise OSError(f"cannot write {address_file}: {error}") from None
    endpoint = config.endpoint or f"http://{'[' + host + ']' if ':' in host else host}:{port}"
    return dataclasses.replace(config, endpoint=endpoint, listen=(host, port), listen_socket=sock)


def _host_port(value: str) -> tuple[str, int]:
    host, _, port = value.rpartition(":")
    if not host or not port.isdecimal() or not 0 <= int(port) <= 65535:
        raise argparse.ArgumentTypeError(f"expected HOST:PORT with a port 0-65535, not {value!r}")
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
    add_store_budget_flags(controller)
    controller.add_argument(
        "--identity", help="this controller's identity (default: the host name)"
    )
    controller.add_argument(
        "--listen",
        type=_host_port,
        metavar="HOST:PORT",
        help="serve consumer sessions (relayed by brokers) on this address (port 0: a free "
        "port, see --address-file)",
    )
    controller.add_argument(
        "--address-file",
        type=Path,
        metavar="FILE",
        help="once listening, write the --listen HOST:PORT to FILE (how a script learns the port "
        "of port 0)",
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
