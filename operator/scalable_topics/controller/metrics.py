"""Prometheus metrics of a controller process, served on its endpoint's ``/metrics``.

Labels have a fixed set of values (a failure's class and reason, never a topic name), so the
number of series does not grow with the number of topics.
"""

from __future__ import annotations

from collections.abc import Callable

from aiohttp import web
from prometheus_client import CollectorRegistry, Counter, Gauge, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from ..store import Store
from ..store.informers import Informers
from ..store.metrics import register_store_collectors


class ControllerMetrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.passes = Counter(
            "st_controller_reconcile_passes", "passes over a topic", registry=self.registry
        )
        self.failures = Counter(
            "st_controller_reconcile_failures",
            "failed passes, by class (temporary: retried with backoff; permanent: shown in "
            "status and not retried until the spec changes) and reason",
            ["class", "reason"],
            registry=self.registry,
        )
        self.restarts = Counter(
            "st_controller_topic_restarts",
            "topic controller tasks restarted after failing",
            registry=self.registry,
        )
        self.autoscale_evaluations = Counter(
            "st_controller_autoscale_evaluations",
            "autoscale evaluations of a topic, by outcome (acted, noAction, busy: an operation "
            "is running or asked, disabled, invalid: the policy does not resolve, failed)",
            ["outcome"],
            registry=self.registry,
        )
        self.autoscale_decisions = Counter(
            "st_controller_autoscale_decisions",
            "automatic splits and merges asked for, by decision and the rule that fired "
            "(other: a load job rule this controller does not know)",
            ["decision", "rule"],
            registry=self.registry,
        )
        self.autoscale_recommendations = Counter(
            "st_controller_autoscale_recommendations",
            "the load job's recommendations met by evaluations, by what became of them (used, "
            "refused: a gate of the live layout, overridden: live consumers, stale, wrongEpoch)",
            ["use"],
            registry=self.registry,
        )
        self._led_topics = Gauge(
            "st_controller_led_topics", "topics this controller leads", registry=self.registry
        )
        self._led_shards = Gauge(
            "st_controller_led_shards",
            "ownership shards this controller holds",
            registry=self.registry,
        )

    def failed(self, permanent: bool, reason: str) -> None:
        self.failures.labels("permanent" if permanent else "temporary", reason).inc()

    def count(self, permanent: bool) -> float:
        """Failures so far of one class (for tests and benchmarks)."""
        label = "permanent" if permanent else "temporary"
        return sum(
            sample.value
            for metric in self.failures.collect()
            for sample in metric.samples
            if sample.name.endswith("_total") and sample.labels.get("class") == label
        )

    def follow(
        self,
        led_topics: Callable[[], int],
        led_shards: Callable[[], int],
        store: Store,
        informers: Informers,
    ) -> None:
        """Report these gauges, and the process's store requests and informers."""
        self._led_topics.set_function(led_topics)
        self._led_shards.set_function(led_shards)
        register_store_collectors(self.registry, store, informers)

    async def handler(self, _: web.Request) -> web.Response:
        body = generate_latest(self.registry)
        return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})
