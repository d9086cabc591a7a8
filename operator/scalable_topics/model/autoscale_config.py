"""The resolved autoscale policy of one topic: cluster defaults with the topic's overrides.

``AutoScaleSpec`` (in ``resources.py``) holds what a topic overrides; this is the complete
policy the decision core reads, every field set. ``resolve`` layers the two and validates the
result, because an override that is valid alone can be invalid next to the defaults (a
``mergeThresholds.msgRateIn`` of 5000 against a default split threshold of 2000).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields, replace
from typing import Final, TypeVar

import yaml
from pydantic import Field, ValidationError

from .layout import MAX_SEGMENTS
from .resources import AutoScaleSpec, RateThresholds

# The rates a policy has thresholds for, as (Python, wire) names, in the order rules are
# reported and ties are broken.
RATE_NAMES: Final = (
    ("msg_rate_in", "msgRateIn"),
    ("msg_rate_out", "msgRateOut"),
    ("byte_rate_in", "byteRateIn"),
    ("byte_rate_out", "byteRateOut"),
)


@dataclass(frozen=True, slots=True)
class Rates:
    """The four rates of a segment, or the four thresholds of a policy, per second."""

    msg_rate_in: float
    msg_rate_out: float
    byte_rate_in: float
    byte_rate_out: float

    def by_wire_name(self) -> tuple[tuple[str, float], ...]:
        return tuple((wire, float(getattr(self, field))) for field, wire in RATE_NAMES)

    def __add__(self, other: Rates) -> Rates:
        return Rates(*(getattr(self, f.name) + getattr(other, f.name) for f in fields(Rates)))


_MIB: Final = 1024 * 1024
_T = TypeVar("_T")


@dataclass(frozen=True, slots=True)
class AutoScaleConfig:
    """Every knob of the autoscale policy; durations are in seconds."""

    enabled: bool
    min_segments: int
    max_segments: int
    # The most merges a retained segment may descend through: caps merges (and so split/merge
    # flip-flop), never splits.
    max_dag_depth: int
    split_cooldown: float
    merge_cooldown: float
    # How long both segments of a pair must have been cold before they merge.
    merge_window: float
    split_thresholds: Rates
    merge_thresholds: Rates
    # For the broker's load reporter (a later part): how often it samples, and the relative
    # change below which it does not rewrite a segment's load record.
    load_report_interval: float = 10.0
    materiality: float = 0.25

    def problems(self) -> list[str]:
        """Every way this policy is unusable, each naming the field and its value."""
        found: list[str] = []
        if not self.min_segments >= 1:
            found.append(f"minSegments must be at least 1, not {self.min_segments}")
        if not self.max_segments >= self.min_segments:
            found.append(
                f"maxSegments must not be below minSegments "
                f"({self.max_segments} < {self.min_segments})"
            )
        if self.max_segments > MAX_SEGMENTS:
            found.append(
                f"maxSegments must not exceed the {MAX_SEGMENTS} hashes, not {self.max_segments}"
            )
        for name, value in (
            ("maxDagDepth", self.max_dag_depth),
            ("splitCooldownSeconds", self.split_cooldown),
            ("mergeCooldownSeconds", self.merge_cooldown),
            ("mergeWindowSeconds", self.merge_window),
            ("materiality", self.materiality),
        ):
            if not (value >= 0 and math.isfinite(value)):
                found.append(f"{name} must be a finite number >= 0, not {value}")
        if not (self.load_report_interval > 0 and math.isfinite(self.load_report_interval)):
            found.append(
                f"loadReportIntervalSeconds must be greater than 0, not {self.load_report_interval}"
            )
        merges = dict(self.merge_thresholds.by_wire_name())
        for rate, split in self.split_thresholds.by_wire_name():
            merge = merges[rate]
            # Written as "not ok" so that NaN fails every check.
            if not (split > 0 and math.isfinite(split)):
                found.append(f"splitThresholds.{rate} must be a finite number > 0, not {split:g}")
            if not merge >= 0:
                found.append(f"mergeThresholds.{rate} must not be negative, not {merge:g}")
            if not split > merge:
                found.append(
                    f"splitThresholds.{rate} must be greater than mergeThresholds.{rate} "
                    f"({split:g} <= {merge:g})"
                )
        return found

    def validated(self) -> AutoScaleConfig:
        """This policy, or a ValueError naming every problem at once."""
        found = self.problems()
        if found:
            raise ValueError("invalid autoscale policy: " + "; ".join(found))
        return self


# The cluster defaults (PIP-483's): on, 1..64 segments, depth 10, splits after 60 s, merges
# after 300 s of cold and 300 s since the last merge. The rate thresholds are ours: split at
# 10,000 msg/s or 10 MiB/s either way, merge below a fifth of that, which leaves a wide
# dead band so that a merged pair does not split straight back.
CLUSTER_DEFAULTS: Final = AutoScaleConfig(
    enabled=True,
    min_segments=1,
    max_segments=64,
    max_dag_depth=10,
    split_cooldown=60.0,
    merge_cooldown=300.0,
    merge_window=300.0,
    split_thresholds=Rates(10_000.0, 10_000.0, 10.0 * _MIB, 10.0 * _MIB),
    merge_thresholds=Rates(2_000.0, 2_000.0, 2.0 * _MIB, 2.0 * _MIB),
    load_report_interval=10.0,
    materiality=0.25,
)


def _overlay(base: Rates, override: RateThresholds | None) -> Rates:
    if override is None:
        return base
    changes = {
        field: float(value)
        for field, _ in RATE_NAMES
        if (value := getattr(override, field)) is not None
    }
    return replace(base, **changes)


def _pick(override: _T | None, default: _T) -> _T:
    return default if override is None else override


def _layered(base: AutoScaleConfig, spec: AutoScaleSpec) -> AutoScaleConfig:
    """``spec``'s set fields over ``base``, not validated."""
    return replace(
        base,
        enabled=base.enabled if spec.enabled is None else spec.enabled,
        min_segments=_pick(spec.min_segments, base.min_segments),
        max_segments=_pick(spec.max_segments, base.max_segments),
        max_dag_depth=_pick(spec.max_dag_depth, base.max_dag_depth),
        split_cooldown=_pick(spec.split_cooldown_seconds, base.split_cooldown),
        merge_cooldown=_pick(spec.merge_cooldown_seconds, base.merge_cooldown),
        merge_window=_pick(spec.merge_window_seconds, base.merge_window),
        split_thresholds=_overlay(base.split_thresholds, spec.split_thresholds),
        merge_thresholds=_overlay(base.merge_thresholds, spec.merge_thresholds),
    )


def resolve(cluster: AutoScaleConfig, spec: AutoScaleSpec | None) -> AutoScaleConfig:
    """The topic's policy: ``spec``'s set fields over ``cluster``, validated as a whole."""
    cluster_problems = cluster.problems()
    if cluster_problems:
        raise ValueError("invalid cluster autoscale defaults: " + "; ".join(cluster_problems))
    if spec is None:
        return cluster
    merged = _layered(cluster, spec)
    found = merged.problems()
    if found:
        raise ValueError(
            "the topic's autoScale overrides are invalid combined with the cluster defaults: "
            + "; ".join(found)
        )
    return merged


# The cluster's defaults live in a ConfigMap of the system namespace, under one key, as a
# YAML mapping of the same camelCase fields as a topic's ``spec.autoScale`` plus the two
# that only the cluster sets. Brokers and controllers read it through an informer, so a change
# takes effect at the next report or evaluation, without a restart.
CLUSTER_CONFIGMAP: Final = "scalable-topics-autoscale"
CLUSTER_CONFIGMAP_KEY: Final = "autoscale.yaml"


class ClusterAutoScaleSpec(AutoScaleSpec):
    """The cluster's overrides of ``CLUSTER_DEFAULTS``: a topic's fields, and the reporter's."""

    load_report_interval_seconds: float | None = Field(default=None, gt=0)
    materiality: float | None = Field(default=None, ge=0)


def cluster_config(spec: ClusterAutoScaleSpec | None) -> AutoScaleConfig:
    """``CLUSTER_DEFAULTS`` with the cluster's overrides, validated as a whole."""
    if spec is None:
        return CLUSTER_DEFAULTS
    merged = replace(
        _layered(CLUSTER_DEFAULTS, spec),
        load_report_interval=_pick(
            spec.load_report_interval_seconds, CLUSTER_DEFAULTS.load_report_interval
        ),
        materiality=_pick(spec.materiality, CLUSTER_DEFAULTS.materiality),
    )
    found = merged.problems()
    if found:
        raise ValueError(
            "the cluster's autoscale settings are invalid combined with the built-in "
            "defaults: " + "; ".join(found)
        )
    return merged


def parse_cluster_config(text: str) -> AutoScaleConfig:
    """The cluster's policy from the ConfigMap key's YAML, or a ValueError naming what is wrong
    (an empty document means the defaults)."""
    try:
        document = yaml.safe_load(text)
    except yaml.YAMLError as error:
        raise ValueError(f"{CLUSTER_CONFIGMAP_KEY} is not YAML: {error}") from None
    if document is None:
        return CLUSTER_DEFAULTS
    if not isinstance(document, dict):
        raise ValueError(
            f"{CLUSTER_CONFIGMAP_KEY} must be a mapping, not {type(document).__name__}"
        )
    try:
        spec = ClusterAutoScaleSpec.model_validate(document)
    except ValidationError as error:
        problems = "; ".join(
            f"{'.'.join(str(part) for part in e['loc']) or 'value'}: {e['msg']}"
            for e in error.errors()
        )
        raise ValueError(f"{CLUSTER_CONFIGMAP_KEY}: {problems}") from None
    return cluster_config(spec)
