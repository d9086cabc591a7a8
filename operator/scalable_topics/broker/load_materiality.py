"""When a segment's load record is rewritten, and what it says (pure).

The record is what the controller decides on, so it must always tell the truth about every
decision the policy could take: the band of "not worth a write" is anchored at the topic's
thresholds as well as at the last record. A rate that drifts within the relative band but
crosses a split or merge threshold is reported, so a segment can never sit over a split
threshold (or under a merge threshold) with a record that says otherwise.

Every comparison uses the policy's own sides: a rate splits when it is above its split
threshold, and is cold when it is at or below its merge threshold.
"""

from __future__ import annotations

from datetime import datetime

from ..model.autoscale_config import RATE_NAMES, AutoScaleConfig, Rates
from ..model.resources import SegmentLoad


def record_rates(record: SegmentLoad) -> Rates:
    return Rates(record.msg_rate_in, record.msg_rate_out, record.byte_rate_in, record.byte_rate_out)


def is_cold(rates: Rates, policy: AutoScaleConfig) -> bool:
    """Every rate at or below its merge threshold."""
    limits = dict(policy.merge_thresholds.by_wire_name())
    return all(value <= limits[rate] for rate, value in rates.by_wire_name())


def why_material(previous: SegmentLoad | None, rates: Rates, policy: AutoScaleConfig) -> str | None:
    """Why ``rates`` must be written over ``previous`` (a short reason), or None when the
    record still tells the truth about them."""
    if previous is None:
        return "no record yet"
    if (previous.cold_since is not None) != is_cold(rates, policy):
        return "coldness changed"
    before = record_rates(previous)
    splits = dict(policy.split_thresholds.by_wire_name())
    merges = dict(policy.merge_thresholds.by_wire_name())
    for field, wire in RATE_NAMES:
        old, new = float(getattr(before, field)), float(getattr(rates, field))
        if (old == 0) != (new == 0):
            return f"{wire} crossed zero"
        for name, limit in (("split", splits[wire]), ("merge", merges[wire])):
            if (old > limit) != (new > limit):
                return f"{wire} crossed its {name} threshold"
        if abs(new - old) > policy.materiality * old:
            return f"{wire} changed by more than {policy.materiality:g} of the record"
    return None


def next_record(
    previous: SegmentLoad | None,
    rates: Rates,
    policy: AutoScaleConfig,
    start: datetime,
    end: datetime,
) -> SegmentLoad | None:
    """The record to write for a sample over [``start``, ``end``], or None to keep
    ``previous``. ``coldSince`` is carried over while the segment stays cold; a segment that
    turns cold has been cold since the start of the first cold sample."""
    if why_material(previous, rates, policy) is None:
        return None
    cold_since = None
    if is_cold(rates, policy):
        carried = None if previous is None else previous.cold_since
        cold_since = start if carried is None else carried
    return SegmentLoad(
        msg_rate_in=rates.msg_rate_in,
        msg_rate_out=rates.msg_rate_out,
        byte_rate_in=rates.byte_rate_in,
        byte_rate_out=rates.byte_rate_out,
        sampled_at=end,
        cold_since=cold_since,
    )
