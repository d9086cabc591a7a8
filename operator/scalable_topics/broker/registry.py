"""The segments this broker hosts, found by topic and segment id, kept under one data directory.

Layout: ``<data_dir>/segments/<namespace>/<topic>/<descriptor>/``. On start every segment
directory is opened again (recovering its log and cursors), so a restarted broker serves what
it served before, with every acknowledged message and position.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterator

from ..model.hash_range import HashRange
from ..model.resources import namespace_problem, topic_name_problem
from ..model.segment import parse_descriptor
from ..protocol import ErrorCode, InitialPosition
from .config import BrokerConfig
from .open_files import FILES_PER_SEGMENT, file_budget
from .segment import BrokerFull, DrainGate, HostedSegment, SegmentError, SegmentKey
from .segment_meta import SegmentMeta
from .storage.durable_fs import DirectoryLock
from .storage.errors import StorageLocked

log = logging.getLogger(__name__)


def _check_names(namespace: str, topic: str) -> None:
    """The rules of every other surface (model/resources.py): DNS labels of at most 63."""
    for problem in (namespace_problem(namespace), topic_name_problem(topic)):
        if problem is not None:
            raise SegmentError(ErrorCode.INVALID_REQUEST, problem)


def split_topic(topic: str) -> tuple[str, str]:
    """``namespace/name`` -> (namespace, name)."""
    namespace, slash, name = topic.partition("/")
    if not slash:
        raise SegmentError(
            ErrorCode.INVALID_REQUEST, f"topic {topic!r} must be written namespace/name"
        )
    _check_names(namespace, name)
    return namespace, name


DATA_LOCK_FILE = "broker.lock"


class DataDirectoryInUse(Exception):
    """Another broker holds the data directory: two would write the same segment files."""


class SegmentRegistry:
    def __init__(self, config: BrokerConfig, gate: DrainGate, capacity: int | None = None) -> None:
        """``capacity``: the segments this broker may host (None: its open files decide, see
        open_files.py), the lower of it and ``config.max_segments``."""
        self._config = config
        self._gate = gate
        if capacity is None:
            capacity = file_budget(config.max_connections).segments
        limits = [capacity]
        if config.max_segments is not None:
            limits.append(config.max_segments)
        self.capacity = min(limits)
        self._root = config.data_dir / "segments"
        self._segments: dict[SegmentKey, HostedSegment] = {}
        self._lock = asyncio.Lock()
        self._data_lock: DirectoryLock | None = None

    async def start(self) -> None:
        """Lock the data directory (one broker per directory: its segments then take no locks
        of their own), then open every segment in it."""
        self._root.mkdir(parents=True, exist_ok=True)
        try:
            self._data_lock = DirectoryLock(self._config.data_dir, DATA_LOCK_FILE)
        except StorageLocked:
            raise DataDirectoryInUse(
                f"the data directory {self._config.data_dir} is in use by another broker"
            ) from None
        for directory in sorted(self._root.glob("*/*/*")):
            if not directory.is_dir():
                continue
            segment = await HostedSegment.open(
                directory, self._config, self._gate, locked_by_owner=True
            )
            self._segments[segment.key] = segment
            log.info("opened segment %s (last entry %d)", segment.key, segment.last_entry_id)

    def __iter__(self) -> Iterator[HostedSegment]:
        return iter(list(self._segments.values()))

    def get(self, namespace: str, topic: str, segment_id: int) -> HostedSegment:
        segment = self._segments.get(SegmentKey(namespace, topic, segment_id))
        if segment is None:
            raise SegmentError(
                ErrorCode.SEGMENT_NOT_FOUND,
                f"segment {segment_id} of topic {namespace}/{topic} is not on this broker",
            )
        return segment

    def find(self, topic: str, segment_id: int) -> HostedSegment:
        namespace, name = split_topic(topic)
        return self.get(namespace, name, segment_id)

    def by_descriptor(self, namespace: str, topic: str, descriptor: str) -> HostedSegment:
        segment_id, hash_range = self._parse(descriptor)
        segment = self.get(namespace, topic, segment_id)
        if segment.meta.hash_range != hash_range:
            raise SegmentError(
                ErrorCode.SEGMENT_NOT_FOUND,
                f"segment {segment_id} of {namespace}/{topic} covers {segment.meta.hash_range}, not {hash_range}",
            )
        return segment

    async def create(
        self,
        namespace: str,
        topic: str,
        descriptor: str,
        parents: tuple[int, ...],
        subscriptions: list[str],
        producer_epoch: int,
        retention: tuple[int | None, int | None] = (None, None),
        holder: str | None = None,
    ) -> tuple[HostedSegment, bool]:
        """Create a segment, or return the existing one (idempotent); True when created.
        Subscriptions missing on an existing segment are added at Earliest; a newer producer
        epoch, or another reservation at the same one, is applied to it."""
        _check_names(namespace, topic)
        segment_id, hash_range = self._parse(descriptor)
        async with self._lock:
            key = SegmentKey(namespace, topic, segment_id)
            existing = self._segments.get(key)
            if existing is not None:
                if existing.meta.hash_range != hash_range or existing.meta.parents != parents:
                    raise SegmentError(
                        ErrorCode.INVALID_REQUEST,
                        f"segment {segment_id} of {namespace}/{topic} exists as {existing.meta.descriptor} "
                        f"with parents {list(existing.meta.parents)}",
                    )
                for name in subscriptions:
                    await existing.create_subscription(name, InitialPosition.EARLIEST)
                current = (existing.producer_epoch, existing.reserved_for)
                if producer_epoch >= current[0] and (producer_epoch, holder) != current:
                    await existing.fence(producer_epoch, holder)
                return existing, False
            if len(self._segments) >= self.capacity:
                raise BrokerFull(
                    f"this broker hosts {len(self._segments)} segments, its capacity (at "
                    f"{FILES_PER_SEGMENT} open files each, or --max-segments): create "
                    f"{namespace}/{topic} {descriptor} on another broker"
                )
            meta = SegmentMeta(
                namespace,
                topic,
                segment_id,
                hash_range.start,
                hash_range.end,
                parents,
                producer_epoch,
                holder,
                retention_max_size_bytes=retention[0],
                retention_max_age_seconds=retention[1],
            )
            segment = await HostedSegment.create(
                self._root / namespace / topic / descriptor,
                meta,
                subscriptions,
                self._config,
                self._gate,
                locked_by_owner=True,
            )
            self._segments[key] = segment
            return segment, True

    async def delete(self, segment: HostedSegment) -> None:
        async with self._lock:
            self._segments.pop(segment.key, None)
        await segment.delete()

    async def delete_if(self, segment: HostedSegment, still: Callable[[], Awaitable[bool]]) -> bool:
        """Delete the segment when ``still()`` says so, asked while no segment can be created
        (a creation of the same segment waits, and then makes it afresh); True when deleted."""
        async with self._lock:
            if self._segments.get(segment.key) is not segment or not await still():
                return False
            del self._segments[segment.key]
            await segment.delete()
        return True

    async def close(self) -> None:
        for segment in list(self._segments.values()):
            try:
                await segment.close()
            except Exception:
                log.exception("closing segment %s failed", segment.key)
        self._segments.clear()
        if self._data_lock is not None:
            self._data_lock.release()
            self._data_lock = None

    @staticmethod
    def _parse(descriptor: str) -> tuple[int, HashRange]:
        try:
            return parse_descriptor(descriptor)
        except ValueError as error:
            raise SegmentError(ErrorCode.INVALID_REQUEST, str(error)) from None
