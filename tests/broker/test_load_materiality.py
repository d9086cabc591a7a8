"""When the broker rewrites a segment's load record: the record always tells the truth about
every decision the policy could take (finding 3: the band is anchored at the thresholds too),
and coldSince marks when the segment became cold."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

from hypothesis import given
from hypothesis import strategies as st

from scalable_topics.broker.load_materiality import (
    is_cold,
    next_record,
    record_rates,
    why_material,
)
from scalable_topics.model.autoscale_config import CLUSTER_DEFAULTS, RATE_NAMES, Rates
from scalable_topics.model.resources import SegmentLoad

T0 = datetime(2026, 11, 26, 12, 0, tzinfo=UTC)
STEP = timedelta(seconds=10)
# Small thresholds so that generated rates land on every side of them.
POLICY = replace(
    CLUSTER_DEFAULTS,
    split_thresholds=Rates(100.0, 100.0, 1000.0, 1000.0),
    merge_thresholds=Rates(20.0, 20.0, 200.0, 200.0),
    materiality=0.25,
)

# Rates anywhere, and rates within the materiality band of a threshold, where a band anchored
# at the last record alone would hide a crossing.
near = st.sampled_from([20.0, 100.0, 200.0, 1000.0]).flatmap(
    lambda limit: st.floats(min_value=0.85 * limit, max_value=1.15 * limit)
)
rate = st.one_of(st.just(0.0), near, st.floats(min_value=0.0, max_value=3000.0, allow_nan=False))
rates = st.builds(Rates, rate, rate, rate, rate)
factor = st.floats(min_value=0.85, max_value=1.15)


@st.composite
def drifting(draw: st.DrawFn) -> list[Rates]:
    """A load that drifts a little at a time: every rate stays in the band of the last record
    for a while, so only the threshold rule can report a crossing."""
    current = draw(rates)
    samples = [current]
    for _ in range(draw(st.integers(min_value=1, max_value=20))):
        current = Rates(
            *(value * draw(factor) for value in (value for _, value in current.by_wire_name()))
        )
        samples.append(current)
    return samples


histories = st.one_of(st.lists(rates, min_size=1, max_size=30), drifting())


def side(value: float, limit: float) -> bool:
    return value > limit


def run(samples: list[Rates]) -> list[tuple[SegmentLoad, int]]:
    """The record in force after each sample, with how many writes it took."""
    record: SegmentLoad | None = None
    writes = 0
    kept = []
    for index, sample in enumerate(samples):
        start = T0 + index * STEP
        written = next_record(record, sample, POLICY, start, start + STEP)
        if written is not None:
            record, writes = written, writes + 1
        assert record is not None
        kept.append((record, writes))
    return kept


@given(histories)
def test_the_record_is_on_the_samples_side_of_every_threshold_and_within_the_band(
    samples: list[Rates],
) -> None:
    for sample, (record, _) in zip(samples, run(samples), strict=True):
        recorded = record_rates(record)
        assert (record.cold_since is not None) == is_cold(sample, POLICY)
        for field, wire in RATE_NAMES:
            old, new = getattr(recorded, field), getattr(sample, field)
            assert (old == 0) == (new == 0), wire
            for limits in (POLICY.split_thresholds, POLICY.merge_thresholds):
                limit = getattr(limits, field)
                assert side(old, limit) == side(new, limit), (wire, limit, old, new)
            assert abs(new - old) <= POLICY.materiality * old, (wire, old, new)


@given(histories)
def test_cold_since_is_the_start_of_the_first_sample_of_the_cold_run(
    samples: list[Rates],
) -> None:
    cold_run_start: datetime | None = None
    for index, (sample, (record, _)) in enumerate(zip(samples, run(samples), strict=True)):
        if is_cold(sample, POLICY):
            if cold_run_start is None:
                cold_run_start = T0 + index * STEP
        else:
            cold_run_start = None
        assert record.cold_since == cold_run_start


def test_a_steady_segment_is_written_once() -> None:
    steady = [Rates(50.0, 50.0, 500.0, 500.0)] * 20
    assert run(steady)[-1][1] == 1
    wobbling = [Rates(50.0 + (i % 3), 50.0, 500.0 - (i % 5), 500.0) for i in range(20)]
    assert run(wobbling)[-1][1] == 1


def test_finding_3_a_rate_settling_just_over_the_split_threshold_is_reported() -> None:
    """A record of 90/s and a rate settling at 110/s (within 25 % of it) over a split
    threshold of 100/s: the record must say 110, or the segment would never split."""
    below = SegmentLoad(
        msg_rate_in=90.0, msg_rate_out=50.0, byte_rate_in=500.0, byte_rate_out=500.0
    )
    over = Rates(110.0, 50.0, 500.0, 500.0)
    assert why_material(below, over, POLICY) == "msgRateIn crossed its split threshold"
    written = next_record(below, over, POLICY, T0, T0 + STEP)
    assert written is not None and written.msg_rate_in == 110.0
    # And the same just under a merge threshold, from above it.
    warm = SegmentLoad(msg_rate_in=22.0, msg_rate_out=19.0, byte_rate_in=150.0, byte_rate_out=150.0)
    assert why_material(warm, Rates(19.0, 19.0, 150.0, 150.0), POLICY) == "coldness changed"


def test_a_zero_crossing_is_always_material() -> None:
    record = SegmentLoad(
        msg_rate_in=0.0, msg_rate_out=50.0, byte_rate_in=500.0, byte_rate_out=500.0
    )
    assert why_material(record, Rates(1e-6, 50.0, 500.0, 500.0), POLICY) == "msgRateIn crossed zero"
