"""``GET /admin/v1/topics/{namespace}/{name}/load``: a topic's autoscale report, from this
broker's caches (topics, segments and the cluster's settings), with each active segment's
rates over the load job's windows when the broker keeps a load history."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from typing import Any

from aiohttp import web

from ..admin.autoscale_view import add_window_rates, load_report
from ..model.autoscale_config import Rates
from ..model.rate_windows import DEFAULT_WINDOWS, Window, longest
from ..model.resources import ScalableTopic, Segment
from ..model.window_rates import window_rates
from ..store import NotFound
from ..store.cluster_autoscale import ClusterAutoScale
from ..store.informers import Informers

CLUSTER_AUTOSCALE_KEY = web.AppKey("cluster_autoscale", ClusterAutoScale)
# Where this broker (and every broker of the system) writes the load history; absent: none.
LOAD_HISTORY_LOCATION_KEY = web.AppKey("load_history_location", str)


class NotReady(Exception):
    """The caches cannot answer yet."""


def _read_rates(
    location: str, namespace: str, name: str, windows: tuple[Window, ...], now: datetime
) -> tuple[dict[int, dict[str, Rates]], int]:
    # Imported here: pyarrow costs a broker that keeps no history some 75 MiB.
    from .history_reader import read_topic_history

    history = read_topic_history(location, namespace, name, now, longest(windows))
    return window_rates(history.spans, windows, now), len(history.spans)


async def topic_load(
    informers: Informers,
    cluster: ClusterAutoScale,
    history_location: str | None,
    namespace: str,
    name: str,
    windows: tuple[Window, ...] = DEFAULT_WINDOWS,
) -> dict[str, Any]:
    """The report; NotFound for a missing topic, NotReady before the caches are listed."""
    unsynced = [
        i.kind for i in (informers.topics, informers.segments, informers.configmaps) if not i.synced
    ]
    if unsynced:
        raise NotReady(f"this broker has not listed {', '.join(unsynced)} from the store yet")
    obj = informers.topics.get(namespace, name)
    if obj is None:
        raise NotFound(ScalableTopic.KIND, namespace, name)
    topic = ScalableTopic.model_validate(obj)
    segments = [Segment.model_validate(s) for s in informers.segments_of(namespace, name)]
    problem = cluster.problem
    cluster_problem = (
        None
        if problem is None
        else f"{cluster.location} is not used ({problem}); the last valid settings stay in force"
    )
    now = datetime.now(UTC)
    try:
        report = load_report(topic, segments, cluster.current(), cluster_problem, now)
    except ValueError as error:  # no segments yet: nothing wrong with the request
        raise NotReady(str(error)) from None
    if history_location is None:
        return add_window_rates(report, windows, None)
    try:
        rates, rows = await asyncio.to_thread(
            _read_rates, history_location, namespace, name, windows, now
        )
    except (OSError, ValueError, TypeError) as error:  # pyarrow's errors derive from these
        return add_window_rates(
            report, windows, {}, history_problem=f"the load history could not be read: {error}"
        )
    return add_window_rates(report, windows, rates, rows)
