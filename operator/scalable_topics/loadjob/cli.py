"""``python -m scalable_topics.loadjob``: one run of the load job, or one every N seconds."""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import sys
from collections.abc import Sequence
from datetime import timedelta

from ..model.rate_windows import DEFAULT_WINDOWS, parse_windows
from ..store import default_budget, open_store
from ..store.preflight import StoreUnusable, check_store
from ..tasks import cancel_and_wait

log = logging.getLogger("scalable_topics.loadjob")

ONE_SHOT_TTL = 300.0  # seconds a one-shot run's recommendations stay fresh
TTL_RUNS = 3  # a loop's recommendations stay fresh for this many intervals
SYSTEM_NAMESPACE = "scalable-topics"


def _positive(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"{text!r} must be a number of seconds above 0")
    return value


def _windows(text: str) -> object:
    try:
        return parse_windows(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m scalable_topics.loadjob",
        description="Compute per-segment windowed rates from the load history and write each "
        "topic's autoscale recommendation (status.autoScale.recommendation).",
    )
    p.add_argument("--store", required=True, metavar="URL", help="the store to read and write")
    p.add_argument(
        "--history",
        required=True,
        metavar="LOCATION",
        help="the load history: a directory "
        "or a URI Spark reads (e.g. s3a://bucket/prefix with hadoop-aws)",
    )
    p.add_argument(
        "--master", help="Spark master, e.g. local[2] (default: spark-submit's, else local[*])"
    )
    p.add_argument(
        "--every",
        type=_positive,
        metavar="SECONDS",
        help="run every SECONDS on one Spark session until stopped (default: run once)",
    )
    p.add_argument(
        "--ttl",
        type=_positive,
        metavar="SECONDS",
        help="how long a recommendation stays fresh "
        f"(default: {TTL_RUNS} x --every, or {ONE_SHOT_TTL:g} s for one run)",
    )
    p.add_argument(
        "--windows",
        type=_windows,
        default=DEFAULT_WINDOWS,
        metavar="LIST",
        help="the rate windows, comma-separated (default 2m,5m,10m,20m; e.g. 20s,40s,80s,160s)",
    )
    p.add_argument(
        "--system-namespace",
        default=SYSTEM_NAMESPACE,
        help=f"where the cluster's autoscale ConfigMap lives (default {SYSTEM_NAMESPACE})",
    )
    p.add_argument(
        "--stop-on-stdin-eof",
        action="store_true",
        help="stop when standard input closes (for a supervising process)",
    )
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    try:
        default_budget(args.store)  # refuses a URL no adapter serves, before Spark starts
    except ValueError as error:
        print(f"load job: {error}", file=sys.stderr)
        return 2
    return asyncio.run(_main(args))


async def _store_problem(url: str) -> str | None:
    """What makes the store unusable however often a run retried (a missing directory, an
    unreadable kubeconfig), or None."""
    try:
        await check_store(url)
    except StoreUnusable as error:
        return str(error)
    return None


async def _main(args: argparse.Namespace) -> int:
    from .run import RunSettings, run_every, run_once
    from .session import spark_session
    from .topics import SettingsInvalid

    ttl = args.ttl or (TTL_RUNS * args.every if args.every else ONE_SHOT_TTL)
    settings = RunSettings(
        history=args.history,
        windows=args.windows,
        ttl=timedelta(seconds=ttl),
        system_namespace=args.system_namespace,
    )
    problem = await _store_problem(args.store)
    if problem is not None:
        print(f"load job: {problem}", file=sys.stderr)
        return 1
    store = open_store(args.store)
    try:
        spark = await asyncio.to_thread(spark_session, args.master)
    except BaseException:
        await store.close()
        raise
    loop = asyncio.get_running_loop()
    work = loop.create_task(
        run_every(store, spark, settings, args.every)
        if args.every
        else run_once(store, spark, settings)
    )
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, work.cancel)
    watching = loop.create_task(_stdin_closed(work)) if args.stop_on_stdin_eof else None
    try:
        await asyncio.wait({work})
        if work.cancelled():
            return 0
        report = work.result()
        if report is not None:
            log.info("%s", report.line())
        return 0
    except SettingsInvalid as error:
        log.error("load job run: no recommendations: %s", error)
        return 1
    except Exception:
        log.exception("load job run failed")
        return 1
    finally:
        if watching is not None:
            await cancel_and_wait(watching)
        # A run cancelled mid-way leaves its Spark job running in a thread: stop it.
        spark.sparkContext.cancelAllJobs()
        await store.close()
        await asyncio.to_thread(spark.stop)


async def _stdin_closed(work: asyncio.Task[object]) -> None:
    """The supervisor holds our stdin and never writes: its end means it is gone."""
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader()
    transport, _ = await loop.connect_read_pipe(
        lambda: asyncio.StreamReaderProtocol(reader), sys.stdin
    )
    try:
        await reader.read()  # everything until end-of-file: nothing ever comes
        log.warning("the supervising process is gone (stdin closed); stopping")
        work.cancel()
    finally:
        transport.close()
