"""Prometheus metrics of the load reporter and the load history."""

from __future__ import annotations

from collections.abc import Iterator

from aiohttp import web
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from .load_reporter import LoadReporter
from .load_row import HistoryCounters

LOAD_REPORTER_KEY = web.AppKey("load_reporter", LoadReporter)
LOAD_HISTORY_KEY = web.AppKey("load_history", HistoryCounters)


class LoadCollector(Collector):
    def __init__(self, reporter: LoadReporter, history: HistoryCounters | None) -> None:
        self._reporter = reporter
        self._history = history

    def collect(self) -> Iterator[Metric]:
        reporter = self._reporter
        yield CounterMetricFamily(
            "st_broker_load_samples",
            "load samples taken (one per hosted segment per report interval)",
            value=reporter.samples,
        )
        yield CounterMetricFamily(
            "st_broker_load_record_writes",
            "store writes of Segment status.load (only material changes are written)",
            value=reporter.record_writes,
        )
        yield CounterMetricFamily(
            "st_broker_load_record_write_failures",
            "store writes of Segment status.load that failed (retried at the next sample)",
            value=reporter.record_write_failures,
        )
        yield GaugeMetricFamily(
            "st_broker_load_records_cached",
            "segments whose last written load record the reporter holds",
            value=reporter.cached,
        )
        history = self._history
        if history is None:
            return
        yield CounterMetricFamily(
            "st_broker_load_history_rows_written",
            "load samples written to the load history",
            value=history.rows_written,
        )
        yield CounterMetricFamily(
            "st_broker_load_history_write_failures",
            "load history files that could not be written (their rows wait for the next flush)",
            value=history.write_failures,
        )
        yield CounterMetricFamily(
            "st_broker_load_history_rows_dropped",
            f"load samples dropped, oldest first, with {history.max_rows} rows waiting",
            value=history.rows_dropped,
        )
        yield CounterMetricFamily(
            "st_broker_load_history_rows_removed",
            "rows of deleted segments removed from this broker's history files",
            value=history.rows_removed,
        )
        yield GaugeMetricFamily(
            "st_broker_load_history_rows_buffered",
            "load samples waiting for the next history file",
            value=history.buffered,
        )
