"""``stctl topics load TOPIC --store URL``: a topic's load and autoscale state, read from the
store (the topic, its Segment objects' load records, the cluster's autoscale ConfigMap), as
``kubectl get`` would, since the cluster's settings live beside the topics, not behind a
broker."""

from __future__ import annotations

import argparse
import sys
from datetime import UTC, datetime
from typing import Any

from ..admin.autoscale_view import load_report
from ..admin.stats_table import columns
from ..model.autoscale_config import (
    CLUSTER_CONFIGMAP,
    CLUSTER_CONFIGMAP_KEY,
    CLUSTER_DEFAULTS,
    AutoScaleConfig,
    parse_cluster_config,
)
from ..model.resources import TOPIC_LABEL, ScalableTopic, Segment
from ..store import NotFound, StoreError
from ..store.kinds import CONFIG_MAP
from ..store.url import SUPPORTED, open_store
from .admin_call import add_output_argument, run_command
from .output import MISSING, fail, print_json, text

COMMAND = "stctl topics load"
DEFAULT_SYSTEM_NAMESPACE = "scalable-topics"
_RATES = ("msgRateIn", "msgRateOut", "byteRateIn", "byteRateOut")


def _topic(args: argparse.Namespace) -> tuple[str, str]:
    namespace, slash, name = args.topic.rpartition("/")
    if not slash:
        return args.namespace or "default", name
    if not namespace or not name or "/" in namespace:
        raise ValueError(f"a topic is named NAME or NAMESPACE/NAME, not {args.topic!r}")
    if args.namespace is not None and args.namespace != namespace:
        raise ValueError(
            f"topic {args.topic!r} is in namespace {namespace!r}, but -n says {args.namespace!r}"
        )
    return namespace, name


def _cluster(configmap: dict[str, Any] | None, where: str) -> tuple[AutoScaleConfig, str | None]:
    """The cluster's settings, or the defaults with why the ConfigMap is not used."""
    if configmap is None:
        return CLUSTER_DEFAULTS, None
    text = (configmap.get("data") or {}).get(CLUSTER_CONFIGMAP_KEY)
    try:
        if not isinstance(text, str):
            raise ValueError(f"it has no key {CLUSTER_CONFIGMAP_KEY}")
        return parse_cluster_config(text), None
    except ValueError as error:
        return CLUSTER_DEFAULTS, (
            f"{where} is not used ({error}); controllers keep the last valid settings they "
            "read, shown here as the built-in defaults"
        )


def _run_load(args: argparse.Namespace) -> int:
    async def run() -> int:
        namespace, name = _topic(args)
        store = open_store(args.store)
        try:
            try:
                topic = ScalableTopic.model_validate(
                    await store.get(ScalableTopic.KIND, namespace, name)
                )
            except NotFound:
                return fail(COMMAND, f"topic {namespace}/{name} does not exist")
            listing = await store.list(
                Segment.KIND, namespace=namespace, label_selector=f"{TOPIC_LABEL}={name}"
            )
            try:
                configmap = await store.get(
                    CONFIG_MAP.kind, args.system_namespace, CLUSTER_CONFIGMAP
                )
            except NotFound:
                configmap = None
        finally:
            await store.close()
        where = f"ConfigMap {args.system_namespace}/{CLUSTER_CONFIGMAP}"
        cluster, problem = _cluster(configmap, where)
        segments = [Segment.model_validate(item) for item in listing.items]
        report = load_report(topic, segments, cluster, problem, datetime.now(UTC))
        if args.output == "json":
            print_json(report)
        else:
            sys.stdout.write(render(report))
        return 0

    try:
        return run_command(COMMAND, run)
    except StoreError as error:
        return fail(COMMAND, str(error))


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
        description="Show a topic's autoscale state, read from the store: each active "
        "segment's latest load record (rates and since when it is cold), the load job's last "
        "recommendation (its window, reason, age and whether it is fresh), the last automatic "
        "split or merge, when a split and a merge are next allowed by the cooldowns, and the "
        "policy in force with where each value comes from (topic, cluster, default).",
    )
    load.add_argument("topic", metavar="TOPIC", help="NAME or NAMESPACE/NAME")
    load.add_argument(
        "-n", "--namespace", default=None, help="the topic's namespace (default: default)"
    )
    load.add_argument(
        "--store",
        required=True,
        metavar="URL",
        help="the store to read: " + "; ".join(SUPPORTED),
    )
    load.add_argument(
        "--system-namespace",
        default=DEFAULT_SYSTEM_NAMESPACE,
        help="the namespace of the cluster's autoscale ConfigMap "
        f"(default {DEFAULT_SYSTEM_NAMESPACE})",
    )
    add_output_argument(load)
    load.set_defaults(run=_run_load)
