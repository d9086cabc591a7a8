"""What ``stctl topics load`` shows of a topic's autoscale: pure, from the stored objects.

Per active segment its latest load record; the load job's last recommendation with its age and
whether the controller would still take it; the last automatic action; when a split and a
merge are next allowed by the cooldowns; and the policy in force, each value with where it
comes from: the topic's ``spec.autoScale``, the cluster's ConfigMap, or the built-in default;
and, when the broker keeps a load history, each segment's rates over the load job's windows.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any

from ..model.autoscale_config import (
    CLUSTER_DEFAULTS,
    RATE_NAMES,
    AutoScaleConfig,
    Rates,
    resolve,
)
from ..model.layout import SegmentLayout
from ..model.rate_windows import Window
from ..model.resources import RateThresholds, ScalableTopic, Segment
from ..model.timefmt import format_time

# (wire name, config field, spec field) of each scalar knob, in the order they are shown.
_SCALARS = (
    ("enabled", "enabled", "enabled"),
    ("minSegments", "min_segments", "min_segments"),
    ("maxSegments", "max_segments", "max_segments"),
    ("maxDagDepth", "max_dag_depth", "max_dag_depth"),
    ("splitCooldownSeconds", "split_cooldown", "split_cooldown_seconds"),
    ("mergeCooldownSeconds", "merge_cooldown", "merge_cooldown_seconds"),
    ("mergeWindowSeconds", "merge_window", "merge_window_seconds"),
)
# Only the cluster sets these (the brokers' reporting).
_CLUSTER_ONLY = (
    ("loadReportIntervalSeconds", "load_report_interval"),
    ("materiality", "materiality"),
)


def policy_rows(
    cluster: AutoScaleConfig, topic: ScalableTopic
) -> tuple[AutoScaleConfig, list[dict[str, Any]], str | None]:
    """The policy in force, each knob as ``{name, value, from}``, and why the topic's overrides
    do not apply (then the cluster's policy is shown: the controller does nothing meanwhile)."""
    spec = topic.spec.auto_scale
    problem = None
    try:
        policy = resolve(cluster, spec)
    except ValueError as error:
        policy, problem, spec = cluster, str(error), None

    def source(overridden: bool, value: Any, default: Any) -> str:
        # A cluster value equal to the built-in default shows as the default: same value.
        if overridden:
            return "topic"
        return "cluster" if value != default else "default"

    rows = []
    for wire, config_field, spec_field in _SCALARS:
        value = getattr(policy, config_field)
        overridden = spec is not None and getattr(spec, spec_field) is not None
        default = getattr(CLUSTER_DEFAULTS, config_field)
        rows.append({"name": wire, "value": value, "from": source(overridden, value, default)})
    for group, config_field in (
        ("splitThresholds", "split_thresholds"),
        ("mergeThresholds", "merge_thresholds"),
    ):
        values: Rates = getattr(policy, config_field)
        defaults: Rates = getattr(CLUSTER_DEFAULTS, config_field)
        override: RateThresholds | None = getattr(spec, config_field) if spec else None
        for field_name, rate in RATE_NAMES:
            value = getattr(values, field_name)
            overridden = override is not None and getattr(override, field_name) is not None
            rows.append(
                {
                    "name": f"{group}.{rate}",
                    "value": value,
                    "from": source(overridden, value, getattr(defaults, field_name)),
                }
            )
    for wire, config_field in _CLUSTER_ONLY:
        value = getattr(policy, config_field)
        default = getattr(CLUSTER_DEFAULTS, config_field)
        rows.append({"name": wire, "value": value, "from": source(False, value, default)})
    return policy, rows, problem


def _eligible(last: datetime | None, cooldown: float, now: datetime) -> dict[str, Any]:
    """When the cooldown after ``last`` ends: now, or a time and the seconds left."""
    if last is None:
        return {"at": None, "inSeconds": 0.0, "reason": "no change yet"}
    at = last + timedelta(seconds=cooldown)
    left = max(0.0, (at - now).total_seconds())
    return {
        "at": format_time(at),
        "inSeconds": left,
        "reason": f"{cooldown:g} s cooldown after {format_time(last)}",
    }


def load_report(
    topic: ScalableTopic,
    segments: Iterable[Segment],
    cluster: AutoScaleConfig,
    cluster_problem: str | None,
    now: datetime,
) -> dict[str, Any]:
    """The report as JSON-ready data (camelCase, times in RFC 3339)."""
    if not topic.status.segments:
        raise ValueError(
            f"topic {topic.metadata.namespace or 'default'}/{topic.metadata.name} has no "
            "segments yet: is a controller running?"
        )
    layout = SegmentLayout.from_status(topic.status.to_wire())
    by_id = {s.spec.segment_id: s for s in segments}
    rows = []
    for info in layout.active:
        segment = by_id.get(info.segment_id)
        load = segment.status.load if segment is not None else None
        row: dict[str, Any] = {
            "id": info.segment_id,
            "range": f"{info.hash_range.start:04x}-{info.hash_range.end:04x}",
            "load": None if load is None else load.to_wire(),
            "coldForSeconds": (
                None
                if load is None or load.cold_since is None
                else max(0.0, (now - load.cold_since).total_seconds())
            ),
        }
        rows.append(row)
    policy, policy_rows_, problem = policy_rows(cluster, topic)
    status = topic.status.auto_scale
    recommendation = status.recommendation if status else None
    shown_recommendation = None
    if recommendation is not None:
        shown_recommendation = {
            **recommendation.to_wire(),
            "ageSeconds": max(0.0, (now - recommendation.computed_at).total_seconds()),
            "fresh": recommendation.expires_at > now,
            "forCurrentEpoch": recommendation.layout_epoch == layout.epoch,
        }
    return {
        "namespace": topic.metadata.namespace or "default",
        "name": topic.metadata.name,
        "epoch": layout.epoch,
        "enabled": policy.enabled,
        "segments": rows,
        "recommendation": shown_recommendation,
        "lastAction": status.last_action.to_wire() if status and status.last_action else None,
        "nextSplit": _eligible(
            status.last_split_time if status else None, policy.split_cooldown, now
        ),
        "nextMerge": _eligible(
            status.last_merge_time if status else None, policy.merge_cooldown, now
        ),
        "mergeWindowSeconds": policy.merge_window,
        "policy": policy_rows_,
        "policyProblem": problem,
        "clusterProblem": cluster_problem,
    }


def add_window_rates(
    report: dict[str, Any],
    windows: Sequence[Window],
    rates: Mapping[int, Mapping[str, Rates]] | None,
    history_rows: int = 0,
    history_problem: str | None = None,
) -> dict[str, Any]:
    """The report with each active segment's rates over the load job's windows, computed from
    the load history; ``rates`` None: the broker keeps no history, so there are none. A window
    the history does not cover for a segment is absent from its ``windowRates``;
    ``history_problem`` says why a history that is kept could not be read."""
    kept = rates is not None
    segments = []
    for row in report["segments"]:
        per_window = (rates or {}).get(row["id"], {})
        shown = {
            window.label: dict(per_window[window.label].by_wire_name())
            for window in sorted(windows)
            if window.label in per_window
        }
        segments.append({**row, "windowRates": shown if kept else None})
    history = {
        "kept": kept,
        "windows": [window.label for window in sorted(windows)] if kept else [],
        "rows": history_rows,
        "problem": history_problem,
    }
    return {**report, "segments": segments, "history": history}
