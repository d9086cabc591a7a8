"""``stctl broker``: one broker process."""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path

from .broker_limits import add_limit_flags, limit_settings
from .controller import add_auth_token_flags, add_token_key_flags, auth_token, token_public_key
from .load_history_flags import add_load_history_flags, load_history_problem
from .store_flags import add_store_budget_flags
from .timeout_flags import add_timeout_flags, timeouts


def _run_broker(args: argparse.Namespace) -> int:
    from pydantic import ValidationError

    from ..broker.app import run
    from ..broker.config import BrokerConfig
    from ..broker.open_files import OpenFilesLimitError, raise_open_files_limit
    from ..broker.registry import DataDirectoryInUse
    from ..listening import bound_address, listening_socket, write_address_file
    from .server_checks import data_directory_problem, store_problem
    from .store_flags import store_budget

    try:
        budget = store_budget(args.store, args.store_qps, args.store_burst)
        token = auth_token(args)
        public_key = token_public_key(args)
        limits = limit_settings(args)
    except ValueError as error:
        print(f"stctl broker: {error}", file=sys.stderr)
        return 2
    try:
        config = BrokerConfig(
            data_dir=args.data_dir,
            store_url=args.store,
            store_budget=budget,
            host=args.host,
            port=args.port,
            advertised_url=args.advertised_url,
            broker_id=args.broker_id,
            sync=args.sync,
            auth_token=token,
            token_public_key=public_key,
            authenticate_metrics=args.authenticate_metrics,
            system_namespace=args.system_namespace,
            max_segments=args.max_segments,
            max_open_files=args.max_open_files,
            load_history=args.load_history,
            load_history_flush=args.load_history_flush,
            load_history_retention=args.load_history_retention,
            **timeouts(args),
            **limits,
        )
    except ValidationError as error:
        print(f"stctl broker: invalid settings: {error}", file=sys.stderr)
        return 2
    # Configuration errors no retry mends: one line and exit 1, before anything starts.
    problem = (
        load_history_problem(config.load_history, config.identity)
        or data_directory_problem(config.data_dir)
        or asyncio.run(store_problem(args.store))
    )
    if problem is not None:
        print(f"stctl broker: {problem}", file=sys.stderr)
        return 1
    try:
        raise_open_files_limit(config.max_open_files)
    except OpenFilesLimitError as error:
        print(f"stctl broker: {error}", file=sys.stderr)
        return 1
    # Bound before the broker starts, so that with --port 0 it registers the port it has.
    try:
        sock = listening_socket(config.host, config.port)
    except OSError as error:
        reason = error.strerror or str(error)
        print(
            f"stctl broker: cannot listen on {config.host}:{config.port}: {reason}", file=sys.stderr
        )
        return 1
    host, port = bound_address(sock)
    config = config.model_copy(update={"port": port})
    if args.address_file is not None:
        try:
            write_address_file(args.address_file, host, port)
        except OSError as error:
            sock.close()
            print(f"stctl broker: cannot write {args.address_file}: {error}", file=sys.stderr)
            return 1
    try:
        run(config, sock=sock, stop_on_stdin_eof=args.stop_on_stdin_eof)
    except DataDirectoryInUse as error:
        print(f"stctl broker: {error}", file=sys.stderr)
        return 1
    return 0


def add_broker(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
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
    add_store_budget_flags(broker)
    broker.add_argument(
        "--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)"
    )
    broker.add_argument(
        "--port",
        type=int,
        default=6650,
        help="port to listen on (default 6650; 0: a free port, see --address-file)",
    )
    broker.add_argument(
        "--address-file",
        type=Path,
        metavar="FILE",
        help="once listening, write HOST:PORT to FILE (how a script learns the port of --port 0)",
    )
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
    add_auth_token_flags(
        broker,
        "the cluster token: required of every request (or a client token, with "
        "--token-public-key); whoever holds it may do everything",
    )
    add_token_key_flags(broker)
    add_timeout_flags(broker)
    broker.add_argument(
        "--system-namespace",
        default="scalable-topics",
        help="where the broker registers (its heartbeat Lease) and finds the shard Leases "
        "(default scalable-topics)",
    )
    broker.add_argument(
        "--max-open-files",
        type=int,
        metavar="N",
        help="raise the open-files limit to N at start (default: to the hard limit); a hosted "
        "segment keeps 3 files open and a connection 1, so this bounds the segments the broker "
        "hosts beside its --max-connections (which it lowers to N/2)",
    )
    broker.add_argument(
        "--max-segments",
        type=int,
        metavar="N",
        help="host at most N segments (default: as many as the open files allow); past it, "
        "new segments are refused (507 BrokerFull) and placed on other brokers",
    )
    add_limit_flags(broker)
    add_load_history_flags(broker)
    broker.add_argument(
        "--stop-on-stdin-eof",
        action="store_true",
        help="stop when stdin closes: a supervisor passes a pipe it never writes to, so the "
        "broker ends with it even when it is killed",
    )
    broker.set_defaults(run=_run_broker)
