"""``stctl topics load TOPIC``: a topic's load and autoscale state, through the topic admin API
of any broker (``GET .../load``): the segments' load records and, when the brokers keep a
load history, their rates over the load job's windows; the recommendation, last action,
cooldowns and the policy in force with where each value comes from."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from ..admin.stats_table import columns
from ..client.admin import Admin
from .admin_call import add_output_argument, add_topic_arguments, run_admin, topic_of
from .output import MISSING, print_json, text

COMMAND = "stctl topics load"
_RATES = ("msgRateIn", "msgRateOut", "byteRateIn", "byteRateOut")


def _run_load(args: argparse.Namespace) -> int:
    async def work(admin: Admin) -> int:
        report = await admin.topic_load(topic_of(args))
        if args.output == "json":
            print_json(report)
        else:
            sys.stdout.write(render(report))
        return 0

    return run_admin(args, COMMAND, work)


def _figure(value: float) -> str:
    return f"{value:,.0f}" if value >= 100 else f"{value:g}"


def _setting(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return _figure(float(value)) if isinstance(value, int | float) else str(value)


def _ago(seconds: float) -> str:
    return f"{seconds:.0f} s"


def _table(header: list[str], rows: list[list[Any]]) -> list[str]:
    return columns([header, *([text(cell) for cell in row] for row in rows)])


def _window_lines(report: dict[str, Any]) -> list[str]:
    history = report.get("history") or {}
    if not history.get("kept"):
        return ["Window rates: none (this broker keeps no load history)", ""]
    if history.get("problem"):
        return [f"Window rates: none ({history['problem']})", ""]
    rows = [
        [segment["id"], label, *(_figure(rates[rate]) for rate in _RATES)]
        for segment in report["segments"]
        for label, rates in (segment.get("windowRates") or {}).items()
    ]
    windows = ", ".join(history.get("windows") or ())
    if not rows:
        return [f"Window rates ({windows}): none (no history of these segments yet)", ""]
    header = ["SEGMENT", "WINDOW", "MSG/S IN", "MSG/S OUT", "B/S IN", "B/S OUT"]
    return [
        f"Window rates ({windows}; time-weighted, from {history.get('rows', 0)} history rows):",
        *(f"  {line}" for line in _table(header, rows)),
        "",
    ]


def render(report: dict[str, Any]) -> str:
    """The report for people."""
    lines = [
        f"Topic {report['namespace']}/{report['name']}  epoch {report['epoch']}  autoscale "
        f"{'enabled' if report['enabled'] else 'disabled'}",
        "",
    ]
    rows = []
    for segment in report["segments"]:
        load = segment["load"]
        rates = [_figure(load.get(rate, 0.0)) if load else None for rate in _RATES]
        rows.append(
            [
                segment["id"],
                segment["range"],
                *rates,
                load.get("sampledAt") if load else None,
                load.get("coldSince") if load else None,
            ]
        )
    header = ["SEGMENT", "RANGE", "MSG/S IN", "MSG/S OUT", "B/S IN", "B/S OUT", "SAMPLED"]
    lines.extend(_table([*header, "COLD SINCE"], rows))
    lines.append("")
    lines.extend(_window_lines(report))
    recommendation = report["recommendation"]
    if recommendation is None:
        lines.append("Recommendation: none (the load job has not written one)")
    else:
        ids = ",".join(str(i) for i in recommendation.get("segmentIds") or ()) or MISSING
        state = "fresh" if recommendation["fresh"] else "expired"
        if not recommendation["forCurrentEpoch"]:
            state += f", for epoch {recommendation['layoutEpoch']} (not the current one)"
        lines.append(
            f"Recommendation: {recommendation['decision']} {ids} (rule "
            f"{recommendation.get('rule') or MISSING}, window "
            f"{recommendation.get('window') or MISSING}), computed "
            f"{_ago(recommendation['ageSeconds'])} ago, {state}: {recommendation.get('reason')}"
        )
    action = report["lastAction"]
    if action is None:
        lines.append("Last automatic action: none")
    else:
        ids = ",".join(str(i) for i in action.get("segmentIds") or ())
        lines.append(
            f"Last automatic action: {action['decision']} {ids} at {action['at']} "
            f"({action['source']}; rule {action['rule']}, window {action.get('window') or MISSING})"
            f": {action.get('reason')}"
        )
    for label, key in (("Next split", "nextSplit"), ("Next merge", "nextMerge")):
        when = report[key]
        if when["inSeconds"] > 0:
            lines.append(
                f"{label}: at {when['at']}, in {_ago(when['inSeconds'])} ({when['reason']})"
            )
        else:
            lines.append(f"{label}: now ({when['reason']})")
    lines.append(f"Merge window: {report['mergeWindowSeconds']:g} s of cold for both segments")
    lines.extend(
        f"Problem: {report[key]}" for key in ("policyProblem", "clusterProblem") if report[key]
    )
    lines.extend(["", "Policy:"])
    policy = [[row["name"], _setting(row["value"]), row["from"]] for row in report["policy"]]
    lines.extend(f"  {line}" for line in _table(["SETTING", "VALUE", "FROM"], policy))
    return "\n".join(lines) + "\n"


def add_topics_load(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    load = commands.add_parser(
        "load",
        help="a topic's segment load, autoscale recommendation, cooldowns and policy",
        description="Show a topic's autoscale state, through the topic admin API of any "
        "broker: each active segment's latest load record (rates and since when it is cold) "
        "and, when the brokers keep a load history, its time-weighted rates over the load "
        "job's windows (2m, 5m, 10m, 20m), the load job's last "
        "recommendation (its window, reason, age and whether it is fresh), the last automatic "
        "split or merge, when a split and a merge are next allowed by the cooldowns, and the "
        "policy in force with where each value comes from (topic, cluster, default).",
    )
    add_topic_arguments(load)
    add_output_argument(load)
    load.set_defaults(run=_run_load)
