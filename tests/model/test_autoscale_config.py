"""The resolved autoscale policy: cluster defaults, validation (finding 5) and topic overrides."""

import math
from dataclasses import replace

import pytest

from scalable_topics.model.autoscale_config import (
    CLUSTER_DEFAULTS,
    AutoScaleConfig,
    Rates,
    resolve,
)
from scalable_topics.model.resources import AutoScaleSpec, RateThresholds


def test_cluster_defaults_are_the_pips_and_valid() -> None:
    d = CLUSTER_DEFAULTS.validated()
    assert (d.enabled, d.min_segments, d.max_segments, d.max_dag_depth) == (True, 1, 64, 10)
    assert (d.split_cooldown, d.merge_cooldown, d.merge_window) == (60, 300, 300)
    assert (d.load_report_interval, d.materiality) == (10, 0.25)
    for (_, split), (_, merge) in zip(
        d.split_thresholds.by_wire_name(), d.merge_thresholds.by_wire_name(), strict=True
    ):
        assert split > merge > 0


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (
            {"split_thresholds": Rates(0, 1, 1, 1)},
            "splitThresholds.msgRateIn must be a finite number > 0, not 0",
        ),
        ({"split_thresholds": Rates(1, math.nan, 1, 1)}, "splitThresholds.msgRateOut must be"),
        (
            {"merge_thresholds": Rates(1, -1, 0, 0)},
            "mergeThresholds.msgRateOut must not be negative",
        ),
        (
            {"merge_thresholds": Rates(10_000, 0, 0, 0)},
            "splitThresholds.msgRateIn must be greater than mergeThresholds.msgRateIn (10000 <= 10000)",
        ),
        (
            {"min_segments": 5, "max_segments": 4},
            "maxSegments must not be below minSegments (4 < 5)",
        ),
        ({"min_segments": 0}, "minSegments must be at least 1, not 0"),
        ({"max_dag_depth": -1}, "maxDagDepth must be a finite number >= 0, not -1"),
        ({"split_cooldown": -1.0}, "splitCooldownSeconds must be a finite number >= 0"),
        ({"merge_cooldown": -1.0}, "mergeCooldownSeconds must be a finite number >= 0"),
        ({"merge_window": -0.5}, "mergeWindowSeconds must be a finite number >= 0"),
        ({"load_report_interval": 0.0}, "loadReportIntervalSeconds must be greater than 0"),
        ({"materiality": -0.1}, "materiality must be a finite number >= 0"),
        ({"max_segments": 70_000}, "maxSegments must not exceed the 65536 hashes"),
    ],
)
def test_validated_names_the_problem(change: dict[str, object], message: str) -> None:
    config = replace(CLUSTER_DEFAULTS, **change)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="invalid") as error:
        config.validated()
    assert message in str(error.value)


def test_merge_threshold_zero_is_valid() -> None:
    config = replace(CLUSTER_DEFAULTS, merge_thresholds=Rates(0, 0, 0, 0))
    assert config.validated() is config


def test_validated_names_every_problem_at_once() -> None:
    config = replace(
        CLUSTER_DEFAULTS, min_segments=0, merge_window=-1, split_thresholds=Rates(1, 1, 1, 0)
    )
    with pytest.raises(ValueError, match="invalid") as error:
        config.validated()
    text = str(error.value)
    assert "minSegments" in text and "mergeWindowSeconds" in text
    assert "splitThresholds.byteRateOut must be a finite number > 0" in text
    # 2,000 merge against 1 split, on each message rate
    assert "splitThresholds.msgRateIn must be greater than mergeThresholds.msgRateIn" in text


def test_resolve_without_spec_is_the_cluster_policy() -> None:
    assert resolve(CLUSTER_DEFAULTS, None) == CLUSTER_DEFAULTS


def test_resolve_overlays_only_set_fields() -> None:
    spec = AutoScaleSpec.model_validate(
        {
            "enabled": False,
            "maxSegments": 8,
            "splitCooldownSeconds": 5,
            "mergeWindowSeconds": 0,
            "splitThresholds": {"msgRateIn": 500},
            "mergeThresholds": {"msgRateIn": 100, "byteRateOut": 0},
        }
    )
    got = resolve(CLUSTER_DEFAULTS, spec)
    assert got == replace(
        CLUSTER_DEFAULTS,
        enabled=False,
        max_segments=8,
        split_cooldown=5,
        merge_window=0,
        split_thresholds=replace(CLUSTER_DEFAULTS.split_thresholds, msg_rate_in=500),
        merge_thresholds=replace(
            CLUSTER_DEFAULTS.merge_thresholds, msg_rate_in=100, byte_rate_out=0
        ),
    )


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        # Valid alone (no split threshold set), but the default split is 10,000.
        (
            AutoScaleSpec(merge_thresholds=RateThresholds(msg_rate_in=20_000)),
            "splitThresholds.msgRateIn must be greater than mergeThresholds.msgRateIn (10000 <= 20000)",
        ),
        # Valid alone (no merge threshold set), but the default merge is 2,000.
        (
            AutoScaleSpec(split_thresholds=RateThresholds(byte_rate_in=1000)),
            "splitThresholds.byteRateIn must be greater than mergeThresholds.byteRateIn",
        ),
        # Valid alone (no max set), but the default max is 64.
        (AutoScaleSpec(min_segments=100), "maxSegments must not be below minSegments (64 < 100)"),
    ],
)
def test_resolve_refuses_an_override_invalid_only_in_combination(
    spec: AutoScaleSpec, message: str
) -> None:
    with pytest.raises(ValueError, match="invalid") as error:
        resolve(CLUSTER_DEFAULTS, spec)
    assert "invalid combined with the cluster defaults" in str(error.value)
    assert message in str(error.value)


def test_resolve_refuses_invalid_cluster_defaults() -> None:
    bad = replace(CLUSTER_DEFAULTS, split_thresholds=Rates(0, 1e9, 1e9, 1e9))
    with pytest.raises(ValueError, match="invalid cluster autoscale defaults"):
        resolve(bad, None)


def test_rates_add() -> None:
    assert Rates(1, 2, 3, 4) + Rates(10, 20, 30, 40) == Rates(11, 22, 33, 44)


def test_config_is_frozen() -> None:
    with pytest.raises(AttributeError):
        CLUSTER_DEFAULTS.enabled = False  # type: ignore[misc]
    assert isinstance(CLUSTER_DEFAULTS, AutoScaleConfig)
