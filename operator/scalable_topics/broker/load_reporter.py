"""The load reporter: every report interval, one sample of each segment this broker hosts.

A sample's four rates are the exact averages over its interval (the change of the segment's
cumulative counts over the seconds since the previous sample). Every sample goes to the load
history; the Segment's ``status.load`` record is rewritten only when the sample is material
against it (load_materiality.py), so a steady segment costs no store writes.

The last record written per segment is cached. It is seeded from the store (the Segment
object in the informer) the first time the broker samples a segment, so a broker that takes
a segment over, or restarts, rewrites nothing that is not material and keeps ``coldSince``;
it is forgotten as soon as the segment is no longer sampled here (deleted, sealed, or no
longer hosted), so the cache holds exactly the segments being reported.

The interval, the materiality and the thresholds are read from the cluster's settings and
the topic at every cycle: a change takes effect at the next one, without a restart.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from pydantic import ValidationError

from ..model.autoscale_config import AutoScaleConfig, Rates, resolve
from ..model.resources import AutoScaleSpec, Segment, SegmentLoad, segment_object_name
from ..store import NotFound, Store, StoreError
from ..store.cluster_autoscale import ClusterAutoScale
from ..store.informers import Informers
from ..tasks import TaskOwner
from .load import LoadCounts
from .load_materiality import next_record
from .load_row import HistorySink, LoadRow
from .segment import HostedSegment, SegmentKey

log = logging.getLogger(__name__)

# The shortest sample, as a fraction of the report interval.
_SHORTEST = 0.5


@dataclass(frozen=True, slots=True)
class _Baseline:
    segment: HostedSegment  # the very object: a segment made again starts from zero
    monotonic: float
    counts: LoadCounts


class LoadReporter:
    def __init__(
        self,
        store: Store,
        informers: Informers,
        cluster: ClusterAutoScale,
        segments: Callable[[], Iterable[HostedSegment]],
        broker: str,
        history: HistorySink | None,
        monotonic: Callable[[], float] = time.monotonic,
        now: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self._store = store
        self._segment_objects = informers.segments
        self._topics = informers.topics
        self._configmaps = informers.configmaps
        self._cluster = cluster
        self._hosted = segments
        self._broker = broker
        self._history = history
        self._monotonic = monotonic
        self._now = now
        self._baselines: dict[SegmentKey, _Baseline] = {}
        # The last record written (None: the store has none), per segment sampled here.
        self._records: dict[SegmentKey, SegmentLoad | None] = {}
        self._tasks = TaskOwner("load reporter", log)
        self.samples = 0
        self.record_writes = 0
        self.record_write_failures = 0

    @property
    def cached(self) -> int:
        """Segments with a last-written record in the cache."""
        return len(self._records)

    async def start(self) -> None:
        self._tasks.spawn(self._run(), "load reporter")

    async def stop(self) -> None:
        await self._tasks.close()

    async def _run(self) -> None:
        await self._segment_objects.wait_synced()
        await self._topics.wait_synced()
        await self._configmaps.wait_synced()
        while True:
            try:
                await self.cycle()
            except Exception:  # one bad cycle must not end the reports
                log.exception("a load report cycle failed; the next one runs as usual")
            # Re-read every cycle: a new interval takes effect at the next one.
            await asyncio.sleep(self._cluster.current().load_report_interval)

    async def cycle(self) -> None:
        """Sample every hosted segment once; write the records that became material."""
        monotonic, end = self._monotonic(), self._now()
        cluster = self._cluster.current()
        hosted = {s.key: s for s in self._hosted() if not s.sealed}
        for gone in self._baselines.keys() - hosted.keys():
            del self._baselines[gone]
        for gone in self._records.keys() - hosted.keys():
            del self._records[gone]
        policies: dict[tuple[str, str], AutoScaleConfig] = {}
        for key, segment in hosted.items():
            counts = segment.load.counts()
            base = self._baselines.get(key)
            if base is None or base.segment is not segment:
                # A segment new here: its counts started from zero when it was opened.
                base = _Baseline(segment, segment.load.started, LoadCounts())
            elapsed = monotonic - base.monotonic
            if elapsed < _SHORTEST * cluster.load_report_interval:
                # Too short to be a rate (a segment opened just now): the next cycle's
                # sample covers this time too.
                self._baselines[key] = base
                continue
            self._baselines[key] = _Baseline(segment, monotonic, counts)
            rates = _rates(base.counts, counts, elapsed)
            start = end - timedelta(seconds=elapsed)
            self.samples += 1
            if self._history is not None:
                self._history.append(
                    LoadRow(
                        key.namespace,
                        key.topic,
                        key.segment_id,
                        self._broker,
                        start,
                        end,
                        rates.msg_rate_in,
                        rates.msg_rate_out,
                        rates.byte_rate_in,
                        rates.byte_rate_out,
                    )
                )
            topic = (key.namespace, key.topic)
            if topic not in policies:
                policies[topic] = self._policy(cluster, *topic)
            await self._report(segment, rates, policies[topic], start, end)

    async def _report(
        self,
        segment: HostedSegment,
        rates: Rates,
        policy: AutoScaleConfig,
        start: datetime,
        end: datetime,
    ) -> None:
        key = segment.key
        name = segment_object_name(key.topic, segment.meta.descriptor)
        if key not in self._records:
            self._records[key] = self._stored_record(key.namespace, name)
        record = next_record(self._records[key], rates, policy, start, end)
        if record is None:
            return
        patch = {"status": {"load": record.model_dump(mode="json", by_alias=True)}}
        try:
            await self._store.patch_status(Segment.KIND, key.namespace, name, patch)
        except NotFound:
            # No object (not made yet, or being deleted): nothing to report on; ask again.
            self._records.pop(key, None)
            return
        except StoreError as error:  # the next cycle tries again: the cache is unchanged
            self.record_write_failures += 1
            log.warning("writing the load record of %s/%s failed (%s)", key.namespace, name, error)
            return
        self.record_writes += 1
        self._records[key] = record

    def _stored_record(self, namespace: str, name: str) -> SegmentLoad | None:
        obj = self._segment_objects.get(namespace, name)
        raw = ((obj or {}).get("status") or {}).get("load")
        if raw is None:
            return None
        try:
            return SegmentLoad.model_validate(raw)
        except ValidationError as error:
            log.warning(
                "the load record of %s/%s is unreadable (%s); replacing it", namespace, name, error
            )
            return None

    def _policy(self, cluster: AutoScaleConfig, namespace: str, topic: str) -> AutoScaleConfig:
        """The topic's policy, or the cluster's when the topic's does not resolve."""
        obj = self._topics.get(namespace, topic)
        raw = ((obj or {}).get("spec") or {}).get("autoScale")
        if raw is None:
            return cluster
        try:
            return resolve(cluster, AutoScaleSpec.model_validate(raw))
        except (ValidationError, ValueError):
            return cluster  # the controller reports the topic's problem


def _rates(before: LoadCounts, after: LoadCounts, seconds: float) -> Rates:
    return Rates(
        msg_rate_in=(after.messages_in - before.messages_in) / seconds,
        msg_rate_out=(after.messages_out - before.messages_out) / seconds,
        byte_rate_in=(after.bytes_in - before.bytes_in) / seconds,
        byte_rate_out=(after.bytes_out - before.bytes_out) / seconds,
    )
