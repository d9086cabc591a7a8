"""From the policy's decision to a topic's ``status.autoScale.recommendation`` (pure), and
when a run rewrites it: only when what it says changed, or the stored one is past half its
lifetime, so a topic whose decision is steady costs one store write per half ttl."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any

from ..model.autoscale_policy import AutoScaleDecision, Merge, NoAction, Split
from ..model.rate_windows import Window
from ..model.resources import AutoScaleDecisionKind, AutoScaleRecommendation
from .policy_input import WindowedLoad


def recommendation(
    decision: AutoScaleDecision,
    loads: Mapping[int, WindowedLoad],
    windows: tuple[Window, ...],
    layout_epoch: int,
    now: datetime,
    ttl: timedelta,
) -> AutoScaleRecommendation:
    """The recommendation ``decision`` makes. ``window`` names the window whose rate fired a
    traffic split; a merge needs every window cold, so it names the longest; a consumer split
    and no action read no window."""
    common: dict[str, Any] = {
        "layout_epoch": layout_epoch,
        "computed_at": now,
        "expires_at": now + ttl,
        "source": "spark",
    }
    if isinstance(decision, Split):
        load = loads.get(decision.segment_id)
        window = None if load is None else load.window_of(decision.rule)
        return AutoScaleRecommendation(
            decision=AutoScaleDecisionKind.SPLIT,
            segment_ids=[decision.segment_id],
            rule=decision.rule,
            window=window,
            reason=decision.reason,
            **common,
        )
    if isinstance(decision, Merge):
        return AutoScaleRecommendation(
            decision=AutoScaleDecisionKind.MERGE,
            segment_ids=[decision.first_id, decision.second_id],
            rule=decision.rule,
            window=max(windows).label,
            reason=decision.reason,
            **common,
        )
    assert isinstance(decision, NoAction)
    return AutoScaleRecommendation(
        decision=AutoScaleDecisionKind.NO_ACTION, reason=decision.reason, **common
    )


def _says(rec: AutoScaleRecommendation) -> tuple[object, ...]:
    # The layout epoch too: a recommendation for an older layout is refused by the controller,
    # so a topic that changed layout must get one for its new epoch at once.
    return rec.decision, tuple(rec.segment_ids), rec.rule, rec.layout_epoch


def needs_write(
    stored: AutoScaleRecommendation | None, new: AutoScaleRecommendation, now: datetime
) -> bool:
    if stored is None or _says(stored) != _says(new):
        return True
    half_life = (stored.expires_at - stored.computed_at) / 2
    return now >= stored.computed_at + half_life


def status_patch(rec: AutoScaleRecommendation) -> dict[str, Any]:
    """The JSON merge patch that sets the recommendation and nothing else. The whole object is
    sent: fields it lacks (a NoAction has no rule) are set to null, not left from the last."""
    body: dict[str, Any] = {"rule": None, "window": None, **rec.to_wire()}
    return {"status": {"autoScale": {"recommendation": body}}}
