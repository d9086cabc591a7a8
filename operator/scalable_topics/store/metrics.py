"""Prometheus collectors of a process's store client: its requests and waits for the request
budget (store/budget.py), and what its informers received and delivered. Both read counters the
objects keep anyway, at scrape time; a broker and a controller register them in their own
registries (in ``stctl standalone`` both describe the one store client of the process).
"""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client import CollectorRegistry
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from .budget import BudgetedStore, Priority
from .informers import Informers
from .port import Store


class StoreRequestCollector(Collector):
    """The store client's requests and its waits for the request budget (in ``stctl
    standalone``, the whole process's: controller and broker share one client)."""

    def __init__(self, store: BudgetedStore) -> None:
        self._store = store

    def collect(self) -> Iterator[Metric]:
        requests = CounterMetricFamily(
            "st_store_requests", "store requests sent, by verb and kind", labels=["verb", "kind"]
        )
        for (verb, kind), count in sorted(self._store.requests.items()):
            requests.add_metric([verb, kind], count)
        budget = self._store.budget
        waits = CounterMetricFamily(
            "st_store_request_waits",
            "store requests that waited for the request budget",
            labels=["priority"],
        )
        wait_seconds = CounterMetricFamily(
            "st_store_request_wait_seconds",
            "seconds store requests waited for the request budget",
            labels=["priority"],
        )
        waiting = GaugeMetricFamily(
            "st_store_requests_waiting",
            "store requests waiting for the request budget now",
            labels=["priority"],
        )
        for priority in Priority:
            label = [priority.name.lower()]
            waits.add_metric(label, budget.waited[priority])
            wait_seconds.add_metric(label, budget.wait_seconds[priority])
            waiting.add_metric(label, budget.waiting(priority))
        qps = GaugeMetricFamily(
            "st_store_budget_qps", "store requests per second allowed (0: unlimited)"
        )
        qps.add_metric([], budget.settings.qps)
        burst = GaugeMetricFamily("st_store_budget_burst", "store requests allowed at once")
        burst.add_metric([], budget.settings.burst)
        yield from (requests, waits, wait_seconds, waiting, qps, burst)


class InformerCollector(Collector):
    """What each informer of the process received from its watch and delivered to handlers."""

    def __init__(self, informers: Informers) -> None:
        self._informers = informers

    def collect(self) -> Iterator[Metric]:
        events = CounterMetricFamily(
            "st_informer_events", "changes an informer received, by kind", labels=["kind"]
        )
        deliveries = CounterMetricFamily(
            "st_informer_deliveries",
            "changes delivered to informer handlers (subscribers keyed by object or index "
            "value hear only their own), by kind",
            labels=["kind"],
        )
        lists = CounterMetricFamily(
            "st_informer_lists", "full lists (the first one, then after a gap)", labels=["kind"]
        )
        cached = GaugeMetricFamily("st_informer_objects", "objects cached", labels=["kind"])
        following = GaugeMetricFamily(
            "st_informer_following",
            "1 while the informer is synced and its watch open, 0 while the store cannot be "
            "reached (what /readyz reports), by kind",
            labels=["kind"],
        )
        for informer in self._informers.all:
            events.add_metric([informer.kind], informer.events_received)
            deliveries.add_metric([informer.kind], informer.deliveries)
            lists.add_metric([informer.kind], informer.lists)
            cached.add_metric([informer.kind], len(informer))
            following.add_metric([informer.kind], 1 if informer.following else 0)
        yield from (events, deliveries, lists, cached, following)


def register_store_collectors(
    registry: CollectorRegistry, store: Store | None, informers: Informers | None
) -> None:
    """Register what there is to report: request counters when the store keeps a budget."""
    while store is not None and not isinstance(store, BudgetedStore):
        store = getattr(store, "inner", None)  # a write-through wrapper around it
    if store is not None:
        registry.register(StoreRequestCollector(store))
    if informers is not None:
        registry.register(InformerCollector(informers))
