"""Prometheus metrics of a broker, read from the hosted segments and from its store client at
scrape time.

Nothing is counted twice: the segments keep their own totals and rates, the store client its
request counters (store/budget.py), and collectors turn them into metric families when
``/metrics`` is scraped, so the hot path pays nothing for it.
"""

from __future__ import annotations

from collections.abc import Collection, Iterator
from typing import Protocol

from aiohttp import web
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from ..store.metrics import register_store_collectors
from .admin import REGISTRY_KEY
from .connection_limits import MAX_CONNECTIONS_FLAG, ConnectionLimits
from .inflight import PublishCounters
from .load_metrics import LOAD_HISTORY_KEY, LOAD_REPORTER_KEY, LoadCollector
from .namespace_watch import NamespaceWatchRegistry
from .registry import SegmentRegistry
from .topic_admin import INFORMERS_KEY, STORE_KEY

PUBLISH_COUNTERS_KEY = web.AppKey("publish_counters", PublishCounters)
CONNECTION_LIMITS_KEY = web.AppKey("connection_limits", ConnectionLimits)
NAMESPACE_WATCHES_KEY = web.AppKey("namespace_watches", NamespaceWatchRegistry)

_SEGMENT = ["namespace", "topic", "segment"]
_SUBSCRIPTION = [*_SEGMENT, "subscription"]


class SegmentCollector(Collector):
    def __init__(self, registry: SegmentRegistry) -> None:
        self._segments = registry

    def collect(self) -> Iterator[Metric]:
        messages_in = CounterMetricFamily(
            "st_segment_messages_in", "messages appended", labels=_SEGMENT
        )
        bytes_in = CounterMetricFamily(
            "st_segment_bytes_in", "payload bytes appended", labels=_SEGMENT
        )
        rate_in = GaugeMetricFamily(
            "st_segment_msg_rate_in", "messages/s in, rolling window", labels=_SEGMENT
        )
        rate_out = GaugeMetricFamily(
            "st_segment_msg_rate_out", "messages/s out, rolling window", labels=_SEGMENT
        )
        last_entry = GaugeMetricFamily(
            "st_segment_last_entry_id", "last entry id of the log", labels=_SEGMENT
        )
        backlog = GaugeMetricFamily(
            "st_subscription_backlog_entries",
            "entries not fully acknowledged (a producer batch is one entry)",
            labels=_SUBSCRIPTION,
        )
        backlog_messages = GaugeMetricFamily(
            "st_subscription_backlog_messages", "unacknowledged messages", labels=_SUBSCRIPTION
        )
        consumers = GaugeMetricFamily(
            "st_subscription_consumers", "attached consumers", labels=_SUBSCRIPTION
        )
        draining = GaugeMetricFamily(
            "st_subscription_draining_hashes_count",
            "Key_Shared hashes draining",
            labels=_SUBSCRIPTION,
        )
        draining_pending = GaugeMetricFamily(
            "st_subscription_draining_hashes_pending_messages",
            "Key_Shared messages pending on draining hashes",
            labels=_SUBSCRIPTION,
        )
        unacked = GaugeMetricFamily(
            "st_subscription_unacked_messages",
            "messages delivered and not acknowledged, over the subscription's consumers",
            labels=_SUBSCRIPTION,
        )
        blocked = GaugeMetricFamily(
            "st_subscription_blocked_on_unacked",
            "1 while the subscription is at its unacked limit (until acks bring it to half)",
            labels=_SUBSCRIPTION,
        )
        blocked_consumers = GaugeMetricFamily(
            "st_subscription_consumers_blocked_on_unacked",
            "consumers at their unacked limit (until acks bring them to half)",
            labels=_SUBSCRIPTION,
        )
        cleared = CounterMetricFamily(
            "st_subscription_draining_hashes_cleared",
            "Key_Shared hashes that finished draining",
            labels=_SUBSCRIPTION,
        )
        for segment in self._segments:
            labels = [segment.key.namespace, segment.key.topic, str(segment.key.segment_id)]
            sample = segment.load.sample()
            messages_in.add_metric(labels, segment.messages_in_total)
            bytes_in.add_metric(labels, segment.bytes_in_total)
            rate_in.add_metric(labels, sample.msg_rate_in)
            rate_out.add_metric(labels, sample.msg_rate_out)
            last_entry.add_metric(labels, segment.last_entry_id)
            for name, subscription in segment.subscriptions.items():
                sub_labels = [*labels, name]
                backlog.add_metric(sub_labels, subscription.backlog_entries())
                backlog_messages.add_metric(sub_labels, subscription.backlog())
                consumers.add_metric(sub_labels, subscription.consumer_count)
                stats = subscription.stats()
                if stats is not None:
                    unacked.add_metric(sub_labels, stats.unacked_messages)
                    blocked.add_metric(sub_labels, int(stats.blocked_on_unacked))
                    blocked_consumers.add_metric(
                        sub_labels, sum(c.blocked_on_unacked for c in stats.consumers)
                    )
                    draining.add_metric(sub_labels, stats.draining_hashes_count)
                    draining_pending.add_metric(sub_labels, stats.draining_hashes_pending_messages)
                    cleared.add_metric(sub_labels, stats.draining_hashes_cleared_total)
        yield from (
            messages_in,
            bytes_in,
            rate_in,
            rate_out,
            last_entry,
            backlog,
            backlog_messages,
            consumers,
            unacked,
            blocked,
            blocked_consumers,
            draining,
            draining_pending,
            cleared,
        )


class PublishCollector(Collector):
    """The in-flight publish limits at work, over every connection (broker/inflight.py)."""

    def __init__(self, counters: PublishCounters) -> None:
        self._counters = counters

    def collect(self) -> Iterator[Metric]:
        counters = self._counters
        yield GaugeMetricFamily(
            "st_broker_publishes_in_flight",
            "sends read and not answered yet, over every connection",
            value=counters.in_flight,
        )
        yield GaugeMetricFamily(
            "st_broker_publish_bytes_in_flight",
            "what the sends in flight hold, in bytes (payloads, keys, properties, and a "
            "per-message overhead)",
            value=counters.in_flight_bytes,
        )
        yield GaugeMetricFamily(
            "st_broker_publishes_in_flight_connection_max",
            "the most sends one connection has had in flight at once since the broker started",
            value=counters.most_in_flight,
        )
        yield CounterMetricFamily(
            "st_broker_publish_read_pauses",
            "times a connection stopped being read at its in-flight publish limit",
            value=counters.read_pauses_total,
        )
        yield GaugeMetricFamily(
            "st_broker_requests_pending",
            "requests other than sends (acknowledgements, seeks) read and not answered yet, "
            "over every connection",
            value=counters.requests_pending,
        )
        yield CounterMetricFamily(
            "st_broker_request_read_pauses",
            "times a connection stopped being read at its pending-request limit",
            value=counters.request_read_pauses_total,
        )
        yield CounterMetricFamily(
            "st_broker_producers_over_limit",
            "producers closed because a send came past the per-producer in-flight limit",
            value=counters.producers_over_limit_total,
        )


class HoldsOpen(Protocol):
    """A connection, as far as the limit on what it holds open goes (session.py)."""

    @property
    def open_handles(self) -> int: ...


class ConnectionCollector(Collector):
    """The connection limits at work (broker/connection_limits.py); what the connections hold
    open is read from them at scrape time."""

    def __init__(self, limits: ConnectionLimits, connections: Collection[HoldsOpen]) -> None:
        self._limits = limits
        self._connections = connections

    def collect(self) -> Iterator[Metric]:
        limits = self._limits
        yield GaugeMetricFamily(
            "st_broker_connections",
            f"WebSockets open, upgrades under way included (bounded by {MAX_CONNECTIONS_FLAG})",
            value=limits.connections,
        )
        refused = CounterMetricFamily(
            "st_broker_connections_refused",
            "WebSocket upgrades answered 503 at a connection limit, by the limit's flag",
            labels=["limit"],
        )
        for flag, count in limits.refused.items():
            refused.add_metric([flag.removeprefix("--")], count)
        yield refused
        held = [connection.open_handles for connection in self._connections]
        yield GaugeMetricFamily(
            "st_broker_open_handles",
            "producers, consumers, watches, consumer registrations and exclusive grants open, "
            "over every connection",
            value=sum(held),
        )
        yield GaugeMetricFamily(
            "st_broker_open_handles_connection_max",
            "the most that one connection holds open now (bounded by --max-open-per-connection)",
            value=max(held, default=0),
        )
        yield CounterMetricFamily(
            "st_broker_opens_refused",
            "requests refused with TooManyOpen: their connection held --max-open-per-connection",
            value=limits.opens_refused_total,
        )


class NamespaceWatchCollector(Collector):
    """The namespace watches open on the broker (broker/namespace_watch.py)."""

    def __init__(self, registry: NamespaceWatchRegistry) -> None:
        self._registry = registry

    def collect(self) -> Iterator[Metric]:
        registry = self._registry
        yield GaugeMetricFamily(
            "st_broker_namespace_watches",
            "namespace watches open, over every connection",
            value=registry.watch_count,
        )
        yield GaugeMetricFamily(
            "st_broker_namespace_watch_groups",
            "distinct (namespace, filters) the namespace watches follow: each costs one filter "
            "test per change of a topic of its namespace",
            value=registry.group_count,
        )


_METRICS_KEY = web.AppKey("metrics_registry", CollectorRegistry)


def install_metrics(app: web.Application, connections: Collection[HoldsOpen]) -> None:
    """Register the broker's collectors; called as the app starts, once its parts are set.
    ``connections``: the open sessions."""
    metrics = CollectorRegistry()
    metrics.register(SegmentCollector(app[REGISTRY_KEY]))
    metrics.register(PublishCollector(app[PUBLISH_COUNTERS_KEY]))
    metrics.register(ConnectionCollector(app[CONNECTION_LIMITS_KEY], connections))
    if NAMESPACE_WATCHES_KEY in app:
        metrics.register(NamespaceWatchCollector(app[NAMESPACE_WATCHES_KEY]))
    if LOAD_REPORTER_KEY in app:
        metrics.register(LoadCollector(app[LOAD_REPORTER_KEY], app.get(LOAD_HISTORY_KEY)))
    register_store_collectors(metrics, app.get(STORE_KEY), app.get(INFORMERS_KEY))
    app[_METRICS_KEY] = metrics


async def metrics_handler(request: web.Request) -> web.Response:
    metrics = request.app[_METRICS_KEY]
    return web.Response(body=generate_latest(metrics), content_type="text/plain", charset="utf-8")
