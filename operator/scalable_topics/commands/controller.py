"""``stctl controller``: one controller process, and the controller flags ``stctl operator``
shares."""

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

    from ..controller.manager import ControllerManager
    from ..store import open_store
    from ..tasks import cancel_all
    from .server_checks import store_problem
    from .store_flags import store_budget

    log = logging.getLogger("scalable_topics.commands.controller")

    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    try:
        budget = store_budget(args.store, args.store_qps, args.store_burst)
        config = controller_config(args)
    except ValueError as error:
        print(f"stctl controller: {error}", file=sys.stderr)
        return 2
    if args.listen is not None:
        try:
            config = listening(config, args.listen, args.address_file)
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

        problem = await store_problem(args.store)
        if problem is not None:
            await store.close()
            if config.listen_socket is not None:
                config.listen_socket.close()
            print(f"stctl controller: {problem}", file=sys.stderr)
            return 1
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


def controller_config(args: argparse.Namespace) -> ControllerConfig:
    """The configuration the controller flags describe; ValueError naming a flag that cannot
    apply (or a token file that cannot be read)."""
    import socket

    from ..controller.leader import ElectionTiming
    from ..controller.manager import ControllerConfig

    timing = ElectionTiming(args.lease_duration, args.renew_deadline, args.retry_period)
    if args.listen is not None and args.endpoint is None and args.listen[0] in ("0.0.0.0", "::"):
        raise ValueError(f"listening on {args.listen[0]}, give the --endpoint brokers reach")
    if args.address_file is not None and args.listen is None:
        raise ValueError("--address-file needs --listen: there is no address to write")
    return ControllerConfig(
        identity=args.identity or socket.gethostname(),
        endpoint=args.endpoint,
        system_namespace=args.system_namespace,
        timing=timing,
        admin_token=auth_token(args),
        token_public_key=token_public_key(args),
        authenticate_metrics=args.authenticate_metrics,
        consumer_grace_period=args.consumer_grace_period,
        shards=args.shards,
        concurrent_passes=args.concurrent_passes,
        broker_delete_timeout=args.broker_delete_timeout,
    )


def auth_token(args: argparse.Namespace) -> str | None:
    """The cluster token of ``--auth-token`` or ``--auth-token-file`` (a mounted Secret, so
    that it never shows in a process listing); ValueError when the file cannot be used."""
    path: Path | None = getattr(args, "auth_token_file", None)
    if path is None:
        token: str | None = getattr(args, "auth_token", None)
        return token
    try:
        token = path.read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError) as error:
        raise ValueError(f"cannot read --auth-token-file {path}: {error}") from None
    if not token:
        raise ValueError(f"--auth-token-file {path} is empty")
    return token


def token_public_key(args: argparse.Namespace) -> Path | None:
    """``--token-public-key``, checked to hold an Ed25519 key now, so that a wrong file is one
    line at start; ValueError naming the file and the problem."""
    from ..tokens import load_public_key

    path: Path | None = getattr(args, "token_public_key", None)
    if path is not None:
        load_public_key(path)  # TokenKeyError is a ValueError
    if path is not None and auth_token(args) is None:
        raise ValueError(
            "--token-public-key needs the cluster token (--auth-token or --auth-token-file)"
        )
    return path


def listening(
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


def host_port(value: str) -> tuple[str, int]:
    host, _, port = value.rpartition(":")
    if not host or not port.isdecimal() or not 0 <= int(port) <= 65535:
        raise argparse.ArgumentTypeError(f"expected HOST:PORT with a port 0-65535, not {value!r}")
    return host.strip("[]"), int(port)


def add_auth_token_flags(parser: argparse.ArgumentParser, help: str) -> None:
    token = parser.add_mutually_exclusive_group()
    token.add_argument("--auth-token", help=help)
    token.add_argument(
        "--auth-token-file",
        type=Path,
        metavar="FILE",
        help="read the --auth-token from FILE (a mounted Secret: a token on the command line "
        "shows in process listings)",
    )


def add_token_key_flags(parser: argparse.ArgumentParser) -> None:
    """Client tokens (docs/authorization.md): how they are verified, and whether /metrics
    asks for one."""
    parser.add_argument(
        "--token-public-key",
        type=Path,
        metavar="FILE",
        help="verify client tokens with this Ed25519 public key (PEM, from stctl tokens "
        "keygen); without it only the cluster token authenticates",
    )
    parser.add_argument(
        "--authenticate-metrics",
        action="store_true",
        help="/metrics requires the cluster token or a token that may read every namespace",
    )


def add_controller_flags(
    parser: argparse.ArgumentParser, listen_default: tuple[str, int] | None = None
) -> None:
    """The flags of a controller, for ``stctl controller`` and ``stctl operator``."""
    add_store_budget_flags(parser)
    parser.add_argument("--identity", help="this controller's identity (default: the host name)")
    parser.add_argument(
        "--listen",
        type=host_port,
        default=listen_default,
        metavar="HOST:PORT",
        help="serve consumer sessions and producer grants (relayed by brokers), /metrics, "
        "/healthz and /readyz on this address (port 0: a free port, see --address-file)"
        + ("" if listen_default is None else f" (default {listen_default[0]}:{listen_default[1]})"),
    )
    parser.add_argument(
        "--address-file",
        type=Path,
        metavar="FILE",
        help="once listening, write the --listen HOST:PORT to FILE (how a script learns the port "
        "of port 0)",
    )
    parser.add_argument(
        "--endpoint",
        help="how brokers reach this controller, published on the shard leases it holds "
        "(default http://HOST:PORT of --listen; required when listening on 0.0.0.0)",
    )
    parser.add_argument(
        "--consumer-grace-period",
        type=float,
        default=30.0,
        help="seconds a disconnected stream/checkpoint consumer keeps its segments (default 30)",
    )
    parser.add_argument(
        "--broker-delete-timeout",
        type=float,
        default=10.0,
        help="seconds deleting a topic waits for a broker before leaving it its storage of "
        "the topic, which the broker removes when it registers again (default 10)",
    )
    parser.add_argument(
        "--system-namespace",
        default="scalable-topics",
        help="where brokers register and the shard Leases live (default scalable-topics)",
    )
    parser.add_argument(
        "--lease-duration",
        type=float,
        default=15.0,
        help="seconds a shard Lease holds without renewal (default 15)",
    )
    parser.add_argument(
        "--renew-deadline",
        type=float,
        default=10.0,
        help="seconds a holder keeps trying to renew before giving its shards up; a holder "
        "renews every half of it (default 10)",
    )
    parser.add_argument(
        "--retry-period",
        type=float,
        default=2.0,
        help="seconds between attempts to take a Lease; a failed renewal is retried every "
        "quarter of it (default 2)",
    )
    parser.add_argument(
        "--shards",
        type=int,
        default=DEFAULT_SHARD_COUNT,
        help=f"ownership shards, one Lease each (default {DEFAULT_SHARD_COUNT}); every controller "
        "replica must use the same count: change it only with every replica stopped",
    )
    parser.add_argument(
        "--concurrent-passes",
        type=int,
        default=DEFAULT_CONCURRENT_PASSES,
        help="passes over topics running at once, e.g. after a failover "
        f"(default {DEFAULT_CONCURRENT_PASSES})",
    )
    add_auth_token_flags(
        parser,
        "the cluster token: sent to the brokers' admin API, required from brokers on --listen",
    )
    add_token_key_flags(parser)


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
    add_controller_flags(controller)
    controller.set_defaults(run=_run_controller)
