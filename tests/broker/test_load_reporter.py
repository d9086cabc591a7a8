"""The load reporter against a store: exact rates per interval, records only on material
changes, the cache seeded from the store (finding 4) and forgotten with the segment (finding 2),
settings changes taking effect at the next cycle (finding 7)."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from types import SimpleNamespace
from typing import Any

import pytest
from dag_objects import segment_object

from scalable_topics.broker.load import LoadCounts
from scalable_topics.broker.load import SegmentLoad as Meter
from scalable_topics.broker.load_reporter import LoadReporter
from scalable_topics.broker.load_row import LoadRow
from scalable_topics.broker.segment import SegmentKey
from scalable_topics.model.autoscale_config import CLUSTER_CONFIGMAP, CLUSTER_CONFIGMAP_KEY
from scalable_topics.model.hash_range import HashRange
from scalable_topics.model.resources import API_VERSION, Segment, segment_object_name
from scalable_topics.model.segment import SegmentInfo, SegmentState
from scalable_topics.store.cluster_autoscale import ClusterAutoScale
from scalable_topics.store.informers import Informers
from support.eventually import eventually
from support.memory_store import MemoryStore

SYSTEM = "scalable-topics"
NS, TOPIC = "ns", "orders"
T0 = datetime(2026, 11, 26, 12, 0, tzinfo=UTC)


class Clock:
    def __init__(self) -> None:
        self.seconds = 0.0

    def monotonic(self) -> float:
        return self.seconds

    def now(self) -> datetime:
        return T0 + timedelta(seconds=self.seconds)


@dataclass
class FakeSegment:
    """What the reporter reads of a hosted segment."""

    segment_id: int
    clock: Clock
    sealed: bool = False
    load: Meter = field(init=False)

    def __post_init__(self) -> None:
        self.load = Meter(60.0, self.clock.monotonic)
        self.info = SegmentInfo(self.segment_id, HashRange(0, 0xFFFF), SegmentState.ACTIVE, 0, T0)
        self.key = SegmentKey(NS, TOPIC, self.segment_id)
        self.meta = SimpleNamespace(descriptor=self.info.descriptor)

    @property
    def object_name(self) -> str:
        return segment_object_name(TOPIC, self.info.descriptor)


@dataclass
class World:
    store: MemoryStore
    informers: Informers
    cluster: ClusterAutoScale
    clock: Clock
    hosted: list[Any]

    def reporter(self) -> LoadReporter:
        return LoadReporter(
            self.store,
            self.informers,
            self.cluster,
            lambda: self.hosted,
            "broker-0",
            None,
            monotonic=self.clock.monotonic,
            now=self.clock.now,
        )

    async def add(self, segment_id: int) -> FakeSegment:
        segment = FakeSegment(segment_id, self.clock)
        await self.store.create(segment_object(NS, TOPIC, segment.info, "broker-0"))
        await self.informers.segments.wait_present(NS, segment.object_name)
        self.hosted.append(segment)
        return segment

    async def record(self, segment: FakeSegment) -> dict[str, Any] | None:
        obj = await self.store.get(Segment.KIND, NS, segment.object_name)
        load: dict[str, Any] | None = (obj.get("status") or {}).get("load")
        return load

    async def settings(self, text: str) -> None:
        obj = {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": CLUSTER_CONFIGMAP, "namespace": SYSTEM},
            "data": {CLUSTER_CONFIGMAP_KEY: text},
        }
        await self.store.create(obj)
        await eventually(lambda: self.cluster.current().materiality != 0.25, "the settings")


@pytest.fixture
async def world() -> AsyncIterator[World]:
    store = MemoryStore()
    informers = Informers(store, SYSTEM)
    informers.start()
    await informers.wait_synced()
    try:
        yield World(store, informers, ClusterAutoScale(informers.configmaps, SYSTEM), Clock(), [])
    finally:
        await informers.stop()


async def produce_for(world: World, reporter: LoadReporter, seconds: float, rate: int) -> None:
    """``rate`` messages of 100 bytes per second on every hosted segment, then one cycle."""
    for segment in world.hosted:
        segment.load.produced(int(rate * seconds), int(rate * seconds) * 100)
    world.clock.seconds += seconds
    await reporter.cycle()


async def test_records_are_exact_averages_and_written_only_when_material(world: World) -> None:
    segment = await world.add(0)
    reporter = world.reporter()
    await reporter.cycle()  # the baseline: no sample yet
    assert reporter.samples == 0 and await world.record(segment) is None

    await produce_for(world, reporter, 10.0, 5000)
    record = await world.record(segment)
    assert record is not None
    assert record["msgRateIn"] == 5000.0 and record["byteRateIn"] == 500_000.0
    assert record["sampledAt"] == "2026-11-26T12:00:10Z"
    assert "coldSince" not in record or record["coldSince"] is None
    assert reporter.record_writes == 1

    for _ in range(10):  # steady within 25 %
        await produce_for(world, reporter, 10.0, 5200)
    assert reporter.samples == 11 and reporter.record_writes == 1

    await produce_for(world, reporter, 10.0, 0)  # to zero: cold, and a zero crossing
    record = await world.record(segment)
    assert record is not None and record["msgRateIn"] == 0.0
    assert record["coldSince"] == "2026-11-26T12:01:50Z"  # the start of the cold sample
    assert reporter.record_writes == 2


async def test_finding_4_a_new_owner_rewrites_nothing_and_keeps_cold_since(world: World) -> None:
    segment = await world.add(0)
    first = world.reporter()
    await first.cycle()
    await produce_for(world, first, 10.0, 5)  # cold under the default merge threshold
    record = await world.record(segment)
    assert record is not None and record["coldSince"] == "2026-11-26T12:00:00Z"
    await world.informers.segments.catch_up(NS, segment.object_name)
    await eventually(
        lambda: (
            (world.informers.segments.get(NS, segment.object_name) or {})
            .get("status", {})
            .get("load")
            is not None
        ),
        "the record in the informer",
    )

    # Another broker (a restart, or a new owner) samples the same load.
    second = world.reporter()
    await second.cycle()
    for _ in range(5):
        await produce_for(world, second, 10.0, 5)
    assert second.samples == 6 and second.record_writes == 0
    assert await world.record(segment) == record

    # A material change keeps the coldSince of the first owner's record.
    await produce_for(world, second, 10.0, 50)
    changed = await world.record(segment)
    assert changed is not None and changed["msgRateIn"] == 50.0
    assert changed["coldSince"] == "2026-11-26T12:00:00Z"


async def test_finding_2_the_cache_is_forgotten_when_a_segment_leaves(world: World) -> None:
    segments = [await world.add(i) for i in range(3)]
    reporter = world.reporter()
    await reporter.cycle()
    await produce_for(world, reporter, 10.0, 100)
    assert reporter.cached == 3

    segments[0].sealed = True  # sealed: no more reports
    world.hosted.remove(segments[1])  # deleted, or no longer hosted
    await produce_for(world, reporter, 10.0, 100)
    assert reporter.cached == 1

    world.hosted.clear()
    await reporter.cycle()
    assert reporter.cached == 0


async def test_finding_7_a_new_materiality_takes_effect_at_the_next_cycle(world: World) -> None:
    segment = await world.add(0)
    reporter = world.reporter()
    await reporter.cycle()
    await produce_for(world, reporter, 10.0, 5000)
    await produce_for(world, reporter, 10.0, 5500)  # +10 %: not material at 25 %
    record = await world.record(segment)
    assert record is not None and record["msgRateIn"] == 5000.0

    await world.settings("materiality: 0.05")
    await produce_for(world, reporter, 10.0, 5500)
    record = await world.record(segment)
    assert record is not None and record["msgRateIn"] == 5500.0


async def test_a_split_threshold_from_the_topic_is_crossed_within_the_band(world: World) -> None:
    """Finding 3 end to end: the topic's own split threshold (1,000/s), a record of 950/s and
    a rate settling at 1,050/s."""
    await world.store.create(
        {
            "apiVersion": API_VERSION,
            "kind": "ScalableTopic",
            "metadata": {"name": TOPIC, "namespace": NS},
            "spec": {
                "initialSegments": 1,
                "autoScale": {
                    "splitThresholds": {"msgRateIn": 1000},
                    "mergeThresholds": {"msgRateIn": 100},
                },
            },
        }
    )
    await world.informers.topics.wait_present(NS, TOPIC)
    segment = await world.add(0)
    reporter = world.reporter()
    await reporter.cycle()
    await produce_for(world, reporter, 10.0, 950)
    await produce_for(world, reporter, 10.0, 1050)
    record = await world.record(segment)
    assert record is not None and record["msgRateIn"] == 1050.0


class Rows:
    """The history's side, as far as the reporter goes: the samples' ends."""

    def __init__(self) -> None:
        self.ends: list[float] = []

    def append(self, row: LoadRow) -> None:
        self.ends.append((row.end - T0).total_seconds())


@pytest.mark.looptime
async def test_finding_7_a_new_interval_takes_effect_without_a_restart(world: World) -> None:
    """On fake loop time: samples every 10 s (the default), then every 2 s once the
    ConfigMap says so."""
    loop = asyncio.get_running_loop()
    world.clock.monotonic = loop.time  # type: ignore[method-assign]
    world.clock.now = lambda: T0 + timedelta(seconds=loop.time())  # type: ignore[method-assign]
    start = loop.time()
    await world.add(0)
    rows = Rows()
    reporter = LoadReporter(
        world.store,
        world.informers,
        world.cluster,
        lambda: world.hosted,
        "broker-0",
        rows,
        monotonic=world.clock.monotonic,
        now=world.clock.now,
    )
    await reporter.start()
    try:
        await asyncio.sleep(start + 35 - loop.time())
        await world.settings("loadReportIntervalSeconds: 2\nmateriality: 0.3")
        await asyncio.sleep(start + 51 - loop.time())
    finally:
        await reporter.stop()
    gaps = [round(b - a, 6) for a, b in itertools.pairwise(rows.ends)]
    assert gaps[:3] == [10.0, 10.0, 10.0]
    assert gaps[-5:] == [2.0] * 5


@pytest.mark.looptime
async def test_a_failing_cycle_does_not_end_the_reports(
    world: World, caplog: pytest.LogCaptureFixture
) -> None:
    loop = asyncio.get_running_loop()
    world.clock.monotonic = loop.time  # type: ignore[method-assign]
    segment = await world.add(0)
    counts = segment.load.counts
    calls = 0

    def failing_once() -> LoadCounts:
        nonlocal calls
        calls += 1
        if calls == 1:
            raise RuntimeError("a bad segment")
        return counts()

    segment.load.counts = failing_once  # type: ignore[method-assign]
    reporter = world.reporter()
    await reporter.start()
    try:
        await eventually(lambda: reporter.samples >= 2, "samples after the failure")
    finally:
        await reporter.stop()
    assert "a load report cycle failed" in caplog.text
