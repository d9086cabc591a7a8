"""``stctl standalone``: the whole system on this machine, until Ctrl-C or SIGTERM."""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import logging
import math
import signal
from pathlib import Path
from typing import TYPE_CHECKING

from .broker_limits import add_limit_flags
from .store_flags import add_store_budget_flags
from .timeout_flags import add_timeout_flags, timeouts

if TYPE_CHECKING:
    from .standalone_system import StandaloneSettings

COMMAND = "stctl standalone"
LOCK_FILE = "standalone.lock"  # in the data directory, flocked while a standalone runs there


def _hint(client_config: Path) -> str:
    return "\n".join(
        [
            f"stctl reads the service URL and the admin token from {client_config}:",
            f"  export STCTL_CONFIG={client_config}",
            "Try:",
            "  stctl topics create orders --segments 2 --subscription billing:Stream",
            "  stctl produce orders -m hello -m world",
            "  stctl consume orders -s billing -c 2",
            "  stctl topics describe orders",
            "Stop with Ctrl-C.",
        ]
    )


def _run_standalone(args: argparse.Namespace) -> int:
    from ..broker.storage.durable_fs import DirectoryLock
    from ..broker.storage.errors import StorageLocked
    from ..model.rate_windows import parse_windows
    from .broker_limits import limit_settings
    from .output import fail
    from .server_checks import data_directory_problem
    from .standalone_credentials import prepare_credentials
    from .standalone_system import StandaloneSettings
    from .store_flags import store_budget

    if not (args.load_job_interval >= 0 and math.isfinite(args.load_job_interval)):
        return fail(
            COMMAND,
            f"--load-job-interval must be a number of seconds >= 0, not {args.load_job_interval}",
            2,
        )
    if not (args.load_history_flush > 0 and math.isfinite(args.load_history_flush)):
        return fail(
            COMMAND,
            f"--load-history-flush must be a number of seconds > 0, not {args.load_history_flush}",
            2,
        )
    try:
        parse_windows(args.load_job_windows)
    except ValueError as error:
        return fail(COMMAND, f"--load-job-windows: {error}", 2)
    if args.brokers < 1:
        return fail(COMMAND, f"--brokers must be at least 1, not {args.brokers}", exit_code=2)
    last_port = args.port + args.brokers - 1 if args.port else 0
    if args.port and not 1 <= args.port <= last_port <= 65535:
        return fail(COMMAND, f"ports {args.port}-{last_port} are not all within 1-65535", 2)
    controller_port = args.controller_port
    if controller_port is None:
        controller_port = args.port + 100 if args.port else 0
    clashes = controller_port and args.port <= controller_port <= last_port
    if clashes or not 0 <= controller_port <= 65535:
        return fail(COMMAND, f"--controller-port {controller_port} clashes or is out of range", 2)
    kube_api_port = None
    if not args.no_kube_api:
        kube_api_port = args.kube_api_port
        if kube_api_port is None:
            kube_api_port = args.port + 200 if args.port else 0
        taken = (*range(args.port, last_port + 1), controller_port) if args.port else ()
        if (kube_api_port and kube_api_port in taken) or not 0 <= kube_api_port <= 65535:
            return fail(COMMAND, f"--kube-api-port {kube_api_port} clashes or is out of range", 2)
    try:
        broker_limits = limit_settings(args)
    except ValueError as error:
        return fail(COMMAND, str(error), 2)
    data_dir = Path(args.data_dir).resolve()
    budget = None  # the embedded store's default, unless a flag says otherwise
    if args.store_qps is not None or args.store_burst is not None:
        try:
            budget = store_budget(f"embedded://{data_dir}", args.store_qps, args.store_burst)
        except ValueError as error:
            return fail(COMMAND, str(error), 2)
    settings = StandaloneSettings(
        data_dir=data_dir,
        host=args.host,
        port=args.port,
        brokers=args.brokers,
        controller_port=controller_port,
        store_budget=budget,
        kube_api_port=kube_api_port,
        timeouts=timeouts(args),
        broker_limits=broker_limits,
        authenticate_metrics=args.authenticate_metrics,
        load_job_interval=args.load_job_interval,
        load_job_windows=args.load_job_windows,
        load_history_flush=args.load_history_flush,
    )
    problem = data_directory_problem(settings.data_dir) or data_directory_problem(settings.log_dir)
    if problem is not None:
        return fail(COMMAND, problem)
    # One standalone per directory, before anything in it is touched: a second one would
    # share the store with the first, take over its controller's leases and rewrite its
    # kubeconfig before its broker found the broker directory locked.
    try:
        lock = DirectoryLock(settings.data_dir, LOCK_FILE)
    except StorageLocked:
        return fail(
            COMMAND, f"the data directory {settings.data_dir} is in use by another stctl standalone"
        )
    try:
        try:
            credentials = prepare_credentials(settings.data_dir)
        except (OSError, ValueError) as error:
            return fail(COMMAND, f"cannot prepare the credentials in {settings.data_dir}: {error}")
        return _serve(dataclasses.replace(settings, credentials=credentials))
    finally:
        lock.release()


def _serve(settings: StandaloneSettings) -> int:
    from ..broker.registry import DataDirectoryInUse
    from .output import fail
    from .standalone_system import StandaloneError, StandaloneSystem, port_ranges

    logging.basicConfig(
        filename=settings.log_dir / "standalone.log",
        level=logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )

    async def serve() -> int:
        stopping = asyncio.Event()
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(signum, stopping.set)
        system = StandaloneSystem(settings)
        try:
            starting = loop.create_task(system.start())
            stop_asked = loop.create_task(stopping.wait())
            await asyncio.wait({starting, stop_asked}, return_when=asyncio.FIRST_COMPLETED)
            if not starting.done():  # stopped while starting
                starting.cancel()
                await asyncio.gather(starting, return_exceptions=True)
                return 0
            starting.result()
            print(f"{COMMAND}: serving {system.service_url}", flush=True)
            print(
                f"  {settings.brokers} broker(s) on ports {port_ranges(system.broker_ports)}, "
                f"controller on 127.0.0.1:{system.controller_port}, data in {settings.data_dir}, "
                f"logs in {settings.log_dir}",
                flush=True,
            )
            if system.kube_api_url is not None:
                print(
                    f"  Kubernetes API on {system.kube_api_url}: "
                    f"KUBECONFIG={settings.kubeconfig} kubectl get scalabletopics",
                    flush=True,
                )
            if system.load_job_problem is not None:
                print(
                    f"  no load job: {system.load_job_problem}; autoscale runs on the "
                    "controller's own evaluation",
                    flush=True,
                )
            print(_hint(system.client_config), flush=True)
            controller_stopped = loop.create_task(system.wait_for_controller())
            await asyncio.wait(
                {stop_asked, controller_stopped}, return_when=asyncio.FIRST_COMPLETED
            )
            controller_stopped.cancel()
            if not stop_asked.done():
                await asyncio.gather(controller_stopped, return_exceptions=True)
                system.check_controller()
            stop_asked.cancel()
            return 0
        except (StandaloneError, DataDirectoryInUse) as error:
            return fail(COMMAND, str(error))
        finally:
            await system.stop()

    return asyncio.run(serve())


def add_standalone(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    standalone = commands.add_parser(
        "standalone",
        help="run the whole system on this machine (store, controller, brokers)",
        description="Run the whole system on this machine: an embedded store in DIR, one "
        "controller and the first broker in this process, further brokers as supervised child "
        "processes on the next ports. Running it again on DIR resumes the same topics.",
    )
    standalone.add_argument(
        "--data-dir", required=True, metavar="DIR", help="where the store, logs and data live"
    )
    standalone.add_argument(
        "--host", default="127.0.0.1", help="address brokers listen on (default 127.0.0.1)"
    )
    standalone.add_argument(
        "--port",
        type=int,
        default=6650,
        help="the first broker's port (default 6650; 0: free ports, printed once serving, for "
        "scripts and tests: segments stay placed on a broker's address, so run DIR again on the "
        "ports it ran on)",
    )
    standalone.add_argument(
        "--brokers", type=int, default=1, help="how many brokers, on consecutive ports (default 1)"
    )
    standalone.add_argument(
        "--controller-port",
        type=int,
        help="where brokers reach the controller, on 127.0.0.1 (default: --port + 100; 0: a free "
        "port)",
    )
    standalone.add_argument(
        "--kube-api-port",
        type=int,
        help="where the Kubernetes API listens, on 127.0.0.1 (default: --port + 200; 0: a free "
        "port); DIR/kubeconfig points kubectl at it",
    )
    standalone.add_argument(
        "--no-kube-api", action="store_true", help="do not serve the Kubernetes API"
    )
    standalone.add_argument(
        "--authenticate-metrics",
        action="store_true",
        help="/metrics of every broker and the controller requires DIR/cluster.token or a "
        "token that may read every namespace",
    )
    standalone.add_argument(
        "--load-job-interval",
        type=float,
        default=60.0,
        metavar="SECONDS",
        help="run the load job (local Spark: autoscale recommendations from the load history) "
        "every SECONDS (default 60; 0: do not run it)",
    )
    standalone.add_argument(
        "--load-job-windows",
        default="2m,5m,10m,20m",
        metavar="LIST",
        help="the load job's rate windows (default 2m,5m,10m,20m; e.g. 20s,40s,80s,160s)",
    )
    standalone.add_argument(
        "--load-history-flush",
        type=float,
        default=60.0,
        metavar="SECONDS",
        help="every broker writes its buffered load samples to DIR/load-history every SECONDS "
        "(default 60): the load job sees a sample this much later at most, so keep it well "
        "under the shortest window",
    )
    add_store_budget_flags(standalone)
    add_timeout_flags(standalone)
    add_limit_flags(standalone)
    standalone.set_defaults(run=_run_standalone)
