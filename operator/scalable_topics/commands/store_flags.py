"""``--store-qps`` and ``--store-burst``: the request budget of a server command's store client,
over the default its store adapter keeps (store/url.py DEFAULT_BUDGETS)."""

from __future__ import annotations

import argparse
import math
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the parser is built for every stctl command; the store only for servers
    from ..store import BudgetSettings


def _rate(value: str) -> float:
    try:
        rate = float(value)
    except ValueError:
        rate = math.nan
    if not math.isfinite(rate) or rate < 0:
        raise argparse.ArgumentTypeError(
            f"expected requests per second, a number >= 0 (0: unlimited), not {value!r}"
        )
    return rate


def _burst(value: str) -> int:
    if not value.isdecimal():
        raise argparse.ArgumentTypeError(f"expected a whole number of requests >= 0, not {value!r}")
    return int(value)


def add_store_budget_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--store-qps",
        type=_rate,
        metavar="QPS",
        help="store requests per second this process sends at most, on average, like client-go's "
        "QPS (0: unlimited; default: the store's, unlimited for embedded). Requests on Leases "
        "go before any other waiting request",
    )
    parser.add_argument(
        "--store-burst",
        type=_burst,
        metavar="N",
        help="store requests sent at once before --store-qps paces them, like client-go's Burst "
        "(default: the store's, or one second of --store-qps)",
    )


def store_budget(url: str, qps: float | None, burst: int | None) -> BudgetSettings:
    """The budget the flags ask for over ``url``'s default; ValueError naming the flag that
    cannot apply (or the URL no adapter serves)."""
    from ..store import BudgetSettings, default_budget

    default = default_budget(url)
    if qps is None and burst is None:
        return default
    if qps == 0:
        if burst:
            raise ValueError(f"--store-burst {burst} needs a rate: --store-qps 0 is unlimited")
        return BudgetSettings(0.0, 0)
    if qps is None:
        if not default.limited:
            if burst == 0:
                return default
            raise ValueError(
                f"--store-burst {burst} needs --store-qps: requests to this store are "
                "unlimited by default"
            )
        qps = default.qps
    if burst is None:
        burst = default.burst if default.limited else max(1, math.ceil(qps))
    if burst < 1:
        raise ValueError(f"--store-burst must be at least 1 when --store-qps {qps:g} limits it")
    return BudgetSettings(qps, burst)
