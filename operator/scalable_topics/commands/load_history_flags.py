"""The broker's load history flags (``stctl broker``; ``stctl standalone`` sets the location)."""

from __future__ import annotations

import argparse
import math


def _positive_seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not (value > 0 and math.isfinite(value)):
        raise argparse.ArgumentTypeError(f"must be a number of seconds > 0, not {text}")
    return value


def add_load_history_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--load-history",
        default="",
        metavar="LOCATION",
        help="append every load sample to a Parquet dataset here: a directory or a URI such "
        "as s3://bucket/prefix (default: none)",
    )
    parser.add_argument(
        "--load-history-flush",
        type=_positive_seconds,
        default=60.0,
        metavar="SECONDS",
        help="write the buffered samples as one file every SECONDS (default 60)",
    )
    parser.add_argument(
        "--load-history-retention",
        type=_positive_seconds,
        default=7 * 86400.0,
        metavar="SECONDS",
        help="delete this broker's history older than SECONDS, by whole days (default "
        "604800: 7 days)",
    )


def load_history_problem(location: str, broker_id: str) -> str | None:
    """Why the history cannot be written at ``location`` by ``broker_id``, or None."""
    if not location:
        return None
    from ..broker.load_history_files import check_broker_id, open_location

    try:
        open_location(location)
        check_broker_id(broker_id)
    except ValueError as error:
        return str(error)
    return None
