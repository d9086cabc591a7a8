"""Topic stats: what every segment's broker reports, aggregated over the topic. Pure.

Each segment's broker answers ``/stats`` for that segment (rates, log size, producers, and per
subscription its backlog, drained flag and attached consumers). The topic's stats add them up:
segment counts by state, per-segment rates and backlog, per-subscription backlog and consumer
counts across segments, and totals. A segment whose broker did not answer is listed as
unavailable with the reason and counts in no total, so a partial answer is never mistaken for
a complete one.

Backlogs count messages not yet acknowledged, as each broker counts them (a producer batch is
one log entry of several messages: broker/message_counts.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..model.layout import SegmentLayout
from ..model.resources import ScalableTopic


@dataclass(frozen=True, slots=True)
class Rates:
    msg_rate_in: float = 0.0
    msg_rate_out: float = 0.0
    byte_rate_in: float = 0.0
    byte_rate_out: float = 0.0

    def __add__(self, other: Rates) -> Rates:
        return Rates(
            self.msg_rate_in + other.msg_rate_in,
            self.msg_rate_out + other.msg_rate_out,
            self.byte_rate_in + other.byte_rate_in,
            self.byte_rate_out + other.byte_rate_out,
        )

    def to_dict(self) -> dict[str, float]:
        return {
            "msgRateIn": self.msg_rate_in,
            "msgRateOut": self.msg_rate_out,
            "byteRateIn": self.byte_rate_in,
            "byteRateOut": self.byte_rate_out,
        }


@dataclass(frozen=True, slots=True)
class SubscriptionReport:
    """One subscription on one segment, as its broker reports it."""

    type: str | None
    backlog: int
    drained: bool
    consumers: int


@dataclass(frozen=True, slots=True)
class SegmentReport:
    """One segment's ``/stats`` answer, checked."""

    state: str
    entries: int
    size_bytes: int
    producers: int
    rates: Rates
    subscriptions: Mapping[str, SubscriptionReport]

    @property
    def backlog(self) -> int:
        return sum(s.backlog for s in self.subscriptions.values())

    @classmethod
    def from_broker(cls, stats: Mapping[str, Any]) -> SegmentReport:
        """Raise ValueError naming the first field that is missing or of the wrong type."""
        rates = _field(stats, "rates", Mapping)
        subscriptions = _field(stats, "subscriptions", Mapping)
        first, last = _count(stats, "firstEntryId", -1), _count(stats, "lastEntryId", -1)
        return cls(
            state=_field(stats, "state", str),
            entries=max(0, last - first + 1),
            size_bytes=_count(stats, "sizeBytes"),
            producers=len(_field(stats, "producers", list)),
            rates=Rates(
                _rate(rates, "msgRateIn"),
                _rate(rates, "msgRateOut"),
                _rate(rates, "byteRateIn"),
                _rate(rates, "byteRateOut"),
            ),
            subscriptions={
                str(name): _subscription(str(name), entry)
                for name, entry in sorted(subscriptions.items())
            },
        )


@dataclass(frozen=True, slots=True)
class Unavailable:
    """A segment whose broker did not answer, and why."""

    reason: str


@dataclass(frozen=True, slots=True)
class SegmentStats:
    segment_id: int
    descriptor: str
    state: str  # Active or Sealed, from the layout
    broker: str | None
    report: SegmentReport | None
    unavailable: str | None = None

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "id": self.segment_id,
            "descriptor": self.descriptor,
            "state": self.state,
            "broker": self.broker,
            "available": self.report is not None,
        }
        if self.report is None:
            data["reason"] = self.unavailable
            return data
        data |= {
            "rates": self.report.rates.to_dict(),
            "backlog": self.report.backlog,
            "entries": self.report.entries,
            "sizeBytes": self.report.size_bytes,
            "producers": self.report.producers,
            "subscriptions": {
                name: {
                    "type": sub.type,
                    "backlog": sub.backlog,
                    "drained": sub.drained,
                    "consumers": sub.consumers,
                }
                for name, sub in self.report.subscriptions.items()
            },
        }
        return data


@dataclass(frozen=True, slots=True)
class SubscriptionStats:
    name: str
    type: str | None  # Queue, Stream or Checkpoint when declared or registered
    declared: bool
    state: str | None  # Creating, Ready or Deleting for declared ones
    backlog: int
    consumers: int  # attached to segments, summed over segments
    registered_consumers: int  # registrations kept by the controller
    segments: int  # available segments that have it
    drained_segments: int

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "type": self.type,
            "declared": self.declared,
            "state": self.state,
            "backlog": self.backlog,
            "consumers": self.consumers,
            "registeredConsumers": self.registered_consumers,
            "segments": self.segments,
            "drainedSegments": self.drained_segments,
        }


@dataclass(frozen=True, slots=True)
class TopicStats:
    namespace: str
    name: str
    epoch: int | None
    phase: str | None
    active_segments: int
    sealed_segments: int
    unavailable_segments: int
    rates: Rates
    backlog: int
    size_bytes: int
    producers: int
    segments: tuple[SegmentStats, ...]
    subscriptions: tuple[SubscriptionStats, ...]

    def to_dict(self) -> dict[str, Any]:
        return {
            "namespace": self.namespace,
            "name": self.name,
            "epoch": self.epoch,
            "phase": self.phase,
            "segmentCounts": {
                "active": self.active_segments,
                "sealed": self.sealed_segments,
                "unavailable": self.unavailable_segments,
            },
            "rates": self.rates.to_dict(),
            "backlog": self.backlog,
            "sizeBytes": self.size_bytes,
            "producers": self.producers,
            "segments": [s.to_dict() for s in self.segments],
            "subscriptions": [s.to_dict() for s in self.subscriptions],
        }


def aggregate(
    topic: ScalableTopic,
    layout: SegmentLayout | None,
    brokers: Mapping[int, str | None],
    reports: Mapping[int, SegmentReport | Unavailable],
) -> TopicStats:
    """The topic's stats from each segment's report; ``layout`` None while it has none yet.
    A segment of the layout without a report counts as unavailable."""
    segments: list[SegmentStats] = []
    for info in layout.segments.values() if layout is not None else ():
        report = reports.get(info.segment_id, Unavailable("not asked"))
        segments.append(
            SegmentStats(
                info.segment_id,
                info.descriptor,
                info.state.value,
                brokers.get(info.segment_id),
                report if isinstance(report, SegmentReport) else None,
                report.reason if isinstance(report, Unavailable) else None,
            )
        )
    available = [s.report for s in segments if s.report is not None]
    return TopicStats(
        namespace=topic.metadata.namespace or "default",
        name=topic.metadata.name,
        epoch=topic.status.epoch,
        phase=topic.status.phase.value if topic.status.phase is not None else None,
        active_segments=sum(1 for s in segments if s.state == "Active"),
        sealed_segments=sum(1 for s in segments if s.state != "Active"),
        unavailable_segments=sum(1 for s in segments if s.report is None),
        rates=sum((r.rates for r in available), Rates()),
        backlog=sum(r.backlog for r in available),
        size_bytes=sum(r.size_bytes for r in available),
        producers=sum(r.producers for r in available),
        segments=tuple(segments),
        subscriptions=_subscriptions(topic, available),
    )


def _subscriptions(
    topic: ScalableTopic, available: list[SegmentReport]
) -> tuple[SubscriptionStats, ...]:
    declared = {spec.name: spec.type.value for spec in topic.spec.subscriptions}
    recorded = {entry.name: entry for entry in topic.status.subscriptions}
    names = sorted(set(declared) | set(recorded) | {n for r in available for n in r.subscriptions})
    result = []
    for name in names:
        on_segments = [r.subscriptions[name] for r in available if name in r.subscriptions]
        entry = recorded.get(name)
        result.append(
            SubscriptionStats(
                name=name,
                type=declared.get(name) or (entry.type.value if entry else None),
                declared=name in declared,
                state=entry.state.value if entry is not None and entry.state else None,
                backlog=sum(s.backlog for s in on_segments),
                consumers=sum(s.consumers for s in on_segments),
                registered_consumers=len(entry.consumers) if entry is not None else 0,
                segments=len(on_segments),
                drained_segments=sum(1 for s in on_segments if s.drained),
            )
        )
    return tuple(result)


# -- reading the broker's answer ------------------------------------------------------------------


def _field(data: Mapping[str, Any], key: str, kind: type) -> Any:
    value = data.get(key)
    if not isinstance(value, kind):
        raise ValueError(f"segment stats field {key!r} is missing or not a {kind.__name__}")
    return value


def _count(data: Mapping[str, Any], key: str, minimum: int = 0) -> int:
    value = data.get(key)
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ValueError(f"segment stats field {key!r} is not an integer >= {minimum}: {value!r}")
    return value


def _rate(data: Mapping[str, Any], key: str) -> float:
    value = data.get(key)
    if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
        raise ValueError(f"segment stats rate {key!r} is not a number >= 0: {value!r}")
    return float(value)


def _subscription(name: str, entry: Any) -> SubscriptionReport:
    try:
        if not isinstance(entry, Mapping):
            raise ValueError("it is not an object")
        kind = entry.get("type")
        if kind is not None and not isinstance(kind, str):
            raise ValueError(f"its type is not a string: {kind!r}")
        return SubscriptionReport(
            type=kind,
            backlog=_count(entry, "backlog"),
            drained=_field(entry, "drained", bool),
            consumers=_count(entry, "consumers"),
        )
    except ValueError as error:
        raise ValueError(f"subscription {name!r} in segment stats: {error}") from None
