"""What the controller's autoscaler acts on: its own decision or the load job's recommendation.

The load job (Spark) sees windowed rates the controller does not, so a fresh recommendation
for the layout as it is now comes first, once every gate is re-checked on the live layout
(``admissible``): the job's view may be a minute old. Consumer counts are the exception: the
controller sees them live, so its own consumer-rule split wins. Without a fresh recommendation
for the current epoch the controller's own decision stands, so autoscale never depends on the
job running.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, Literal

from .autoscale_config import AutoScaleConfig
from .autoscale_policy import (
    AutoScaleDecision,
    AutoScaleInputs,
    Merge,
    NoAction,
    Split,
    admissible,
    decide,
)
from .resources import AutoScaleDecisionKind, AutoScaleRecommendation

# What became of the recommendation in one evaluation (a metric label: a fixed set).
RecommendationUse = Literal["used", "refused", "overridden", "stale", "wrongEpoch", "none"]
RECOMMENDATION_USES: Final = ("used", "refused", "overridden", "stale", "wrongEpoch", "none")
# The window named when the controller decided from the segments' latest load records.
LATEST_REPORT: Final = "latest report"


@dataclass(frozen=True, slots=True)
class Choice:
    decision: AutoScaleDecision
    source: Literal["recommendation", "controller"]
    window: str  # the rate window the decision read
    recommendation: RecommendationUse


def recommended(recommendation: AutoScaleRecommendation) -> AutoScaleDecision:
    """The recommendation as a decision, or a ValueError naming what is wrong with it."""
    ids, rule = recommendation.segment_ids, recommendation.rule or "loadJob"
    if recommendation.decision is AutoScaleDecisionKind.SPLIT:
        if len(ids) != 1:
            raise ValueError(f"a Split names one segment, not {len(ids)}")
        return Split(ids[0], rule, recommendation.reason)
    if recommendation.decision is AutoScaleDecisionKind.MERGE:
        if len(ids) != 2 or ids[0] == ids[1]:
            raise ValueError(f"a Merge names two segments, not {ids}")
        return Merge(ids[0], ids[1], rule, recommendation.reason)
    return NoAction(recommendation.reason or "the load job recommends no change")


def choose(
    config: AutoScaleConfig,
    inputs: AutoScaleInputs,
    epoch: int,
    recommendation: AutoScaleRecommendation | None,
) -> Choice:
    """The decision to act on for a topic at layout ``epoch``, and where it came from."""
    own = decide(config, inputs)
    if recommendation is None:
        return Choice(own, "controller", LATEST_REPORT, "none")
    if recommendation.expires_at <= inputs.now:
        return Choice(own, "controller", LATEST_REPORT, "stale")
    if recommendation.layout_epoch != epoch:
        return Choice(own, "controller", LATEST_REPORT, "wrongEpoch")
    if isinstance(own, Split) and own.rule == "consumers":
        return Choice(own, "controller", LATEST_REPORT, "overridden")
    window = recommendation.window or "unnamed window"
    try:
        decision = recommended(recommendation)
    except ValueError as error:
        return Choice(
            NoAction(f"the load job's recommendation is malformed: {error}"),
            "recommendation",
            window,
            "refused",
        )
    if isinstance(decision, NoAction):
        return Choice(decision, "recommendation", window, "used")
    if isinstance(decision, Merge):
        decision = _lower_range_first(inputs, decision)
    why = admissible(config, inputs, decision)
    if why is not None:
        return Choice(
            NoAction(f"the load job's {recommendation.decision.value} is refused: {why}"),
            "recommendation",
            window,
            "refused",
        )
    return Choice(decision, "recommendation", window, "used")


def _lower_range_first(inputs: AutoScaleInputs, merge: Merge) -> Merge:
    ranges = {s.segment_id: s.hash_range.start for s in inputs.layout.active}
    first, second = merge.first_id, merge.second_id
    if first in ranges and second in ranges and ranges[second] < ranges[first]:
        return Merge(second, first, merge.rule, merge.reason)
    return merge
