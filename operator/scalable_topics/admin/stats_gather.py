"""Gather a topic's stats: the topic and its Segment objects from the store, each segment's
report from its broker (concurrently), aggregated by :mod:`.stats`.

Any process that reaches the store and the brokers can do it (``stctl topics stats``); it
needs no leadership and writes nothing. A segment whose broker does not answer is reported as
unavailable, with the reason, instead of failing the whole answer.
"""

from __future__ import annotations

import asyncio

from ..model.layout import SegmentLayout
from ..model.resources import TOPIC_LABEL, Segment, segment_object_name
from ..model.segment import SegmentInfo, SegmentState
from ..protocol import ErrorCode
from ..store import Store
from ..tasks import gather_settled
from .broker_admin import BrokerAdmin, BrokerAdminError, BrokerUnreachable
from .stats import SegmentReport, TopicStats, Unavailable, aggregate
from .topic_views import SegmentPlacement
from .topics import read_topic

_PARALLELISM = 16
# A broker that accepts and never answers must not hold describe, stats or a subscription
# listing for the segment admin client's 30 s: it is reported as unavailable instead.
ANSWER_SECONDS = 5.0
_ATTEMPTS = 3


async def gather_topic_stats(
    store: Store, admin: BrokerAdmin, namespace: str, name: str, parallelism: int = _PARALLELISM
) -> TopicStats:
    """The topic's stats; raises the store's NotFound when there is no such topic.

    Garbage collection may prune a drained sealed segment between reading the layout and
    asking its broker; the stats are then gathered again from the new layout, so a pruned
    segment is not reported as unavailable."""
    for _ in range(_ATTEMPTS):
        stats, pruned_meanwhile = await _gather_once(store, admin, namespace, name, parallelism)
        if not pruned_meanwhile:
            break
    return stats


async def _gather_once(
    store: Store, admin: BrokerAdmin, namespace: str, name: str, parallelism: int
) -> tuple[TopicStats, bool]:
    """The stats, and whether a sealed segment's broker said it no longer has it."""
    topic = await read_topic(store, namespace, name)
    layout = SegmentLayout.from_status(topic.status.to_wire()) if topic.status.segments else None
    if layout is None:
        return aggregate(topic, None, {}, {}), False
    pruned: list[int] = []
    listing = await store.list(
        Segment.KIND, namespace=namespace, label_selector=f"{TOPIC_LABEL}={name}"
    )
    objects = {item["metadata"]["name"]: SegmentPlacement.of(item) for item in listing.items}
    brokers: dict[int, str | None] = {}
    for info in layout.segments.values():
        segment = objects.get(segment_object_name(name, info.descriptor))
        brokers[info.segment_id] = segment.broker if segment is not None else None
    gate = asyncio.Semaphore(parallelism)

    async def one(info: SegmentInfo) -> tuple[int, SegmentReport | Unavailable]:
        broker = brokers[info.segment_id]
        if broker is None:
            return info.segment_id, Unavailable("not placed on a broker yet")
        async with gate:
            try:
                async with asyncio.timeout(ANSWER_SECONDS):
                    stats = await admin.stats(broker, namespace, name, info.descriptor)
            except BrokerUnreachable as error:
                return info.segment_id, Unavailable(f"broker unreachable: {error}")
            except TimeoutError:
                return info.segment_id, Unavailable(
                    f"broker {broker} did not answer within {ANSWER_SECONDS:g} s"
                )
            except BrokerAdminError as error:
                if error.code == ErrorCode.SEGMENT_NOT_FOUND and info.state is SegmentState.SEALED:
                    pruned.append(info.segment_id)
                return info.segment_id, Unavailable(f"broker refused: {error}")
        try:
            return info.segment_id, SegmentReport.from_broker(stats)
        except ValueError as error:
            return info.segment_id, Unavailable(f"unreadable answer: {error}")

    reports = dict(await gather_settled(*(one(info) for info in layout.segments.values())))
    return aggregate(topic, layout, brokers, reports), bool(pruned)
