"""A segment hosted by this broker: its log, producers, deduplication and subscriptions.

On disk a segment is a directory holding ``segment.json`` (see segment_meta), ``log/`` (the
segment log) and ``cursors/`` (the cursor journal). Opening it after a crash recovers the log,
restores every cursor, and rebuilds deduplication from the last snapshot plus the entries
written after it, so a producer retrying across a broker restart is not duplicated.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import shutil
import time
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from ..model.cursor_state import CursorState
from ..model.resources import ProducerAccessMode
from ..protocol import ErrorCode, InitialPosition, MessageId, SegmentSubscriptionType, Send
from .batch_record import decode_batch, encode_batch
from .config import BrokerConfig
from .dedup import DedupTracker, Verdict
from .dispatch import UnackedLimits
from .errors import BrokerError
from .load import SegmentLoad
from .message_counts import MessageCounts, batch_size
from .producer_access import AccessError, Grant, ProducerAccess, ProducerBusy, Standing
from .segment_meta import SegmentMeta, load_meta, save_meta
from .storage import CursorStore, RecordTooLarge, SegmentLog, SegmentTerminated, SyncPolicy
from .subscription import Subscription

log = logging.getLogger(__name__)


class SegmentError(BrokerError):
    pass


class BrokerFull(SegmentError):
    """The broker hosts as many segments as its open files allow (broker/open_files.py); on the
    segment admin API, 507 with code ``BrokerFull``, so the controller places it elsewhere."""

    def __init__(self, message: str) -> None:
        super().__init__(ErrorCode.SERVICE_NOT_READY, message)


class SegmentBusy(SegmentError):
    """A conditional fence refused: ``producers`` (names) are connected to the segment."""

    def __init__(self, message: str, producers: list[str]) -> None:
        super().__init__(ErrorCode.PRODUCER_BUSY, message)
        self.producers = producers


@dataclass(frozen=True, slots=True)
class SegmentKey:
    namespace: str
    topic: str
    segment_id: int

    def __str__(self) -> str:
        return f"{self.namespace}/{self.topic}/{self.segment_id}"


class ProducerLink(Protocol):
    """How a segment tells a producer's session that the broker closed the producer."""

    async def closed_by_broker(self, code: ErrorCode, message: str) -> None: ...


class DrainGate(Protocol):
    """Whether a segment's parents are drained for a subscription, and recording it."""

    def parents_drained(
        self, namespace: str, topic: str, parents: tuple[int, ...], subscription: str
    ) -> bool: ...

    def mark_drained(
        self, namespace: str, topic: str, descriptor: str, subscription: str
    ) -> None: ...

    def listen(
        self, namespace: str, topic: str, parents: tuple[int, ...], callback: Callable[[], None]
    ) -> Callable[[], None]:
        """Call ``callback`` whenever the parents' markers may have changed."""
        ...


_DEDUP_SNAPSHOT_EVERY = 10_000


class _LogReader:
    """The segment log as a subscription reads it, with the segment's message counts."""

    def __init__(self, segment_log: SegmentLog, counting: _Counting) -> None:
        self._log = segment_log
        self._counting = counting

    def messages_in(self, first: int, last: int) -> int:
        return self._counting.counts.messages(first, last)

    async def count_from(self, entry_id: int) -> None:
        await self._counting.count_from(entry_id)

    @property
    def last_entry_id(self) -> int:
        return self._log.last_entry_id

    @property
    def sealed(self) -> bool:
        return self._log.sealed

    async def read_entries(
        self, from_entry_id: int, max_entries: int, max_bytes: int
    ) -> list[tuple[int, int, bytes]]:
        entries = await self._log.read(from_entry_id, max_entries, max_bytes)
        return [(e.entry_id, e.timestamp_ms, e.payload) for e in entries]


_FORGET_EVERY = 1024  # appends between two looks at whether counted entries can go


class _Counting:
    """The segment's message counts (broker/message_counts.py): extended back from the log
    when a cursor goes below them, one extension at a time, with nothing forgotten meanwhile
    (the extension reads below ``base`` while it stands)."""

    def __init__(self, segment_log: SegmentLog) -> None:
        self._log = segment_log
        self.counts = MessageCounts(segment_log.next_entry_id)
        self._extending = asyncio.Lock()

    async def count_from(self, entry_id: int) -> None:
        async with self._extending:
            start = max(entry_id, self._log.first_entry_id)
            base = self.counts.base
            if start >= base:
                return
            sizes: list[int] = []
            entry = start
            while entry < base:
                read = await self._log.read(entry, min(512, base - entry), 8 * 1024 * 1024)
                if not read:
                    break
                for item in read:
                    if item.entry_id >= base:
                        break
                    sizes.append(batch_size(item.payload))
                entry = read[-1].entry_id + 1
            if start + len(sizes) == base:  # else trimmed meanwhile: nothing to count there
                self.counts.prepend(sizes)

    def forget_before(self, floor: int) -> None:
        if not self._extending.locked():
            self.counts.forget_before(floor)


class HostedSegment:
    def __init__(
        self,
        directory: Path,
        meta: SegmentMeta,
        segment_log: SegmentLog,
        cursors: CursorStore,
        config: BrokerConfig,
        gate: DrainGate,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.directory = directory
        self.key = SegmentKey(meta.namespace, meta.topic, meta.segment_id)
        self._meta = meta
        # One metadata write at a time, each writing the newest metadata: writes racing on
        # the same file once left a request unanswered and could have stored an older epoch.
        self._meta_writes = asyncio.Lock()
        self._log = segment_log
        self._counting = _Counting(segment_log)
        self._reader = _LogReader(segment_log, self._counting)
        self._cursors = cursors
        self._config = config
        self._gate = gate
        self._access = ProducerAccess(meta.producer_epoch, meta.reserved_for)
        self._producer_links: dict[Hashable, ProducerLink] = {}
        # Producers admitted after the seal, by name: they only learn which batches are stored.
        self._after_seal: dict[Hashable, str] = {}
        self._waiters: dict[Hashable, asyncio.Future[Grant]] = {}
        self._dedup = DedupTracker()
        self._in_flight: dict[tuple[str, int], asyncio.Future[int]] = {}
        self._subscriptions: dict[str, Subscription] = {}
        # Creating or deleting a subscription awaits its cursor file: one change at a time, so
        # the checks that a name is new (and of the limit) hold until the insertion.
        self._subscription_changes = asyncio.Lock()
        self._last_publish_ms = 0
        self._entries_since_snapshot = 0
        self._deleted = False
        self.load = SegmentLoad(config.load_window_seconds, monotonic)
        self.messages_in_total = 0
        self.bytes_in_total = 0
        self._unlisten = gate.listen(meta.namespace, meta.topic, meta.parents, self._gate_changed)

    # -- opening --------------------------------------------------------------------------------

    @classmethod
    async def create(
        cls,
        directory: Path,
        meta: SegmentMeta,
        subscriptions: list[str],
        config: BrokerConfig,
        gate: DrainGate,
        locked_by_owner: bool = False,
    ) -> HostedSegment:
        """Create the segment's storage with ``subscriptions`` at Earliest. With
        ``locked_by_owner`` (a broker holding its data directory's lock) the log and cursor
        directories take no locks, nor the open files they cost."""
        await asyncio.to_thread(directory.mkdir, parents=True, exist_ok=False)
        await save_meta(directory, meta)
        segment = await cls._open(directory, meta, config, gate, locked_by_owner)
        for name in subscriptions:
            await segment.create_subscription(name, InitialPosition.EARLIEST)
        return segment

    @classmethod
    async def open(
        cls, directory: Path, config: BrokerConfig, gate: DrainGate, locked_by_owner: bool = False
    ) -> HostedSegment:
        """Open a segment this broker created before (after a restart or a crash)."""
        return await cls._open(directory, load_meta(directory), config, gate, locked_by_owner)

    @classmethod
    async def _open(
        cls,
        directory: Path,
        meta: SegmentMeta,
        config: BrokerConfig,
        gate: DrainGate,
        locked_by_owner: bool,
    ) -> HostedSegment:
        segment_log = await SegmentLog.open(
            directory / "log",
            sync=SyncPolicy.named(config.sync),
            max_record_bytes=config.max_frame_bytes,
            file_bytes=config.log_file_bytes,
            locked_by_owner=locked_by_owner,
        )
        try:
            cursors = await CursorStore.open(directory / "cursors", locked_by_owner=locked_by_owner)
        except BaseException:
            await segment_log.close()
            raise
        segment = cls(directory, meta, segment_log, cursors, config, gate)
        await segment._restore()
        return segment

    async def _restore(self) -> None:
        for name in self._cursors.subscriptions():
            state = self._cursors.load(name)
            if state is not None:
                self._subscriptions[name] = self._new_subscription(name, state)
        for producer, sequence in self._meta.dedup.items():
            self._dedup.persisted(producer, sequence, self._meta.dedup_through_entry)
        entry = max(self._meta.dedup_through_entry + 1, self._log.first_entry_id)
        while entry <= self._log.last_entry_id:
            entries = await self._log.read(entry, 512, 8 * 1024 * 1024)
            if not entries:
                break
            for item in entries:
                record = decode_batch(item.payload)
                self._dedup.persisted(record.producer_name, record.last_sequence_id, item.entry_id)
                self._last_publish_ms = max(self._last_publish_ms, item.timestamp_ms)
                entry = item.entry_id + 1
        # Messages per entry from the lowest cursor on: what the backlogs count.
        await self._counting.count_from(self._floor())

    # -- reading state --------------------------------------------------------------------------

    @property
    def meta(self) -> SegmentMeta:
        return self._meta

    @property
    def last_entry_id(self) -> int:
        return self._log.last_entry_id

    @property
    def sealed(self) -> bool:
        return self._log.sealed

    def highest_sequence_id(self, producer_name: str) -> int:
        """The last sequence id durably written by ``producer_name`` (-1: none)."""
        return self._dedup.highest_persisted(producer_name)

    @property
    def producer_epoch(self) -> int:
        return self._access.epoch

    @property
    def reserved_for(self) -> str | None:
        return self._access.reserved_for

    @property
    def subscriptions(self) -> dict[str, Subscription]:
        return dict(self._subscriptions)

    def subscription(self, name: str) -> Subscription:
        try:
            return self._subscriptions[name]
        except KeyError:
            raise SegmentError(
                ErrorCode.SUBSCRIPTION_NOT_FOUND, f"segment {self.key} has no subscription {name!r}"
            ) from None

    # -- producers ------------------------------------------------------------------------------

    async def open_producer(
        self,
        handle: Hashable,
        name: str,
        mode: ProducerAccessMode,
        requested_epoch: int | None,
        link: ProducerLink,
    ) -> Grant:
        """Admit a producer; a WaitForExclusive one waits here until it is granted.

        A sealed segment admits any producer, outside the access modes: it can store nothing
        more, but it answers a resent batch it did store with that batch's receipt, so a
        producer whose connection dropped before the answer can tell which of its batches
        to hand to the children (and hands over none twice)."""
        if self._deleted:
            raise SegmentError(ErrorCode.SEGMENT_NOT_FOUND, f"segment {self.key} was deleted")
        if self._log.sealed:
            self._after_seal[handle] = name
            self._producer_links[handle] = link
            return Grant(handle, name, mode, self._access.epoch)
        before = self._access_state()
        try:
            result = self._access.open(handle, name, mode, requested_epoch)
        except AccessError as error:
            raise SegmentError(ErrorCode(error.code), str(error)) from None
        self._producer_links[handle] = link
        if result.standing is Standing.GRANTED:
            assert result.grant is not None
            try:
                await self._close_fenced(list(result.fenced))
                await self._persist_access(before)
            except BaseException:
                # Cancelled (its connection closed, say) before it learnt it was admitted:
                # nobody will ever close this producer, so it must hold nothing.
                await self.close_producer(handle)
                raise
            return result.grant
        await self._close_fenced(list(result.fenced))
        waiter: asyncio.Future[Grant] = asyncio.get_running_loop().create_future()
        self._waiters[handle] = waiter
        try:
            return await waiter
        except BaseException:
            self._waiters.pop(handle, None)
            await self.close_producer(handle)
            raise

    async def close_producer(self, handle: Hashable) -> None:
        self._producer_links.pop(handle, None)
        if self._after_seal.pop(handle, None) is not None:
            return
        before = self._access_state()
        granted, refused = self._access.close(handle)
        await self._settle_waiters(granted, refused, before)

    async def fence(self, epoch: int, holder: str | None = None, *, if_free: bool = False) -> int:
        """Raise the producer epoch to at least ``epoch`` and reserve the segment for the
        topic-wide ``holder`` (None: no reservation): the controller's grant. Closes every
        producer granted under an older epoch or of another name. Returns the epoch in force.
        ``if_free``: refuse with SegmentBusy, changing nothing, while a producer of another name
        is connected (an Exclusive or WaitForExclusive grant)."""
        if if_free and holder is None:
            raise SegmentError(ErrorCode.INVALID_REQUEST, "a conditional fence needs a holder")
        before = self._access_state()
        try:
            fenced = self._access.fence(epoch, holder, if_free=if_free)
        except ProducerBusy as busy:
            others = sorted({g.name for g in self._access.others_than(holder)})
            raise SegmentBusy(f"segment {self.key}: {busy}", others) from None
        await self._persist_access(before)
        await self._close_fenced(fenced)
        granted, refused = self._access.promote_waiters()
        await self._settle_waiters(granted, refused, self._access_state())
        return self._access.epoch

    async def release(self, epoch: int) -> int:
        """Clear a topic-wide reservation made at ``epoch`` or before, raising nothing and
        fencing nobody (the grant ended, or its claim was undone). Returns the epoch in force."""
        before = self._access_state()
        self._access.release(epoch)
        await self._persist_access(before)
        granted, refused = self._access.promote_waiters()
        await self._settle_waiters(granted, refused, self._access_state())
        return self._access.epoch

    def producer_names(self) -> list[dict[str, Any]]:
        """The connected producers (not the waiting ones), for the controller's probe."""
        return [
            {"name": g.name, "accessMode": g.mode.value, "epoch": g.epoch}
            for g in self._access.producers
        ]

    async def publish(self, handle: Hashable, send: Send) -> tuple[MessageId | None, bool]:
        """Append one producer batch; return its id (None when a duplicate is no longer
        remembered) and whether it was a duplicate. Durable before it returns."""
        # Sealed first: termination also closes every grant, and a producer caught in between
        # must learn to go to the children, not that it was fenced.
        if self._log.sealed and not self._deleted and handle in self._after_seal:
            return await self._stored_before_seal(self._after_seal[handle], send)
        self._check_writable()
        try:
            grant = self._access.check_send(handle)
        except AccessError as error:
            raise SegmentError(ErrorCode(error.code), str(error)) from None
        producer, last = grant.name, send.last_sequence_id
        verdict = self._dedup.classify(producer, last)
        if verdict is Verdict.IN_FLIGHT:
            original = self._in_flight.get((producer, last))
            if original is not None:
                return MessageId(self.key.segment_id, await asyncio.shield(original)), True
            verdict = Verdict.DUPLICATE
        if verdict is Verdict.DUPLICATE:
            entry = self._dedup.original_entry(producer, last)
            return (None if entry is None else MessageId(self.key.segment_id, entry)), True
        record = encode_batch(producer, send.sequence_id, send.messages)
        if len(record) > self._config.max_message_bytes:
            # Only a record past the limit can hold a message past it: check them one by one.
            for message in send.messages:
                if message.size_bytes > self._config.max_message_bytes:
                    raise SegmentError(
                        ErrorCode.MESSAGE_TOO_LARGE,
                        f"a message of {message.size_bytes} bytes exceeds the limit of "
                        f"{self._config.max_message_bytes}",
                    )
        publish_ms = max(self._last_publish_ms, int(time.time() * 1000))
        self._last_publish_ms = publish_ms
        self._dedup.pushed(producer, last)
        done: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        self._in_flight[(producer, last)] = done
        # The id the append takes, counted before it is durable: its record is written even
        # if this caller is cancelled while waiting (backlogs count only durable entries).
        counted = self._log.next_entry_id
        self._counting.counts.add(counted, len(send.messages))
        try:
            entry_id = await self._log.append(record, publish_ms)
        except BaseException as caught:
            if self._log.next_entry_id == counted:  # refused before taking the id
                self._counting.counts.remove_last(counted)
            translated = self._translate(caught)
            self._dedup.failed(producer)
            done.set_exception(translated)
            done.exception()  # retrieved: a retry may or may not be waiting on it
            if translated is not caught:
                raise translated from None
            raise
        finally:
            self._in_flight.pop((producer, last), None)
        done.set_result(entry_id)
        self._dedup.persisted(producer, last, entry_id)
        size = sum(len(m.payload) for m in send.messages)
        self.messages_in_total += len(send.messages)
        self.bytes_in_total += size
        self.load.produced(len(send.messages), size)
        self._entries_since_snapshot += 1
        if entry_id % _FORGET_EVERY == 0:
            self._counting.forget_before(self._floor())
        for subscription in self._subscriptions.values():
            subscription.notify_appended()
        if self._entries_since_snapshot >= _DEDUP_SNAPSHOT_EVERY:
            await self._snapshot_dedup()
        return MessageId(self.key.segment_id, entry_id), False

    async def _stored_before_seal(self, producer: str, send: Send) -> tuple[MessageId | None, bool]:
        """A batch sent to the sealed segment: its receipt if it was stored, else the
        refusal that sends it to the children."""
        last = send.last_sequence_id
        verdict = self._dedup.classify(producer, last)
        if verdict is Verdict.IN_FLIGHT:
            original = self._in_flight.get((producer, last))
            if original is not None:  # appended as the seal came: stored or refused with it
                return MessageId(self.key.segment_id, await asyncio.shield(original)), True
            verdict = Verdict.DUPLICATE
        if verdict is Verdict.DUPLICATE:
            entry = self._dedup.original_entry(producer, last)
            return (None if entry is None else MessageId(self.key.segment_id, entry)), True
        raise self._terminated()

    # -- subscriptions --------------------------------------------------------------------------

    async def create_subscription(
        self, name: str, initial: InitialPosition, *, limit: int | None = None
    ) -> Subscription:
        """Create ``name`` (idempotent: an existing subscription is returned unchanged).
        Single-flight: callers that race to create the same subscription (consumers starting
        together) all get the one that was stored. ``limit``: refuse (InvalidRequest) to
        create one while the segment holds that many."""
        existing = self._existing_subscription(name)
        if existing is not None:
            return existing
        async with self._subscription_changes:
            existing = self._existing_subscription(name)
            if existing is not None:
                return existing
            if limit is not None and len(self._subscriptions) >= limit:
                raise SegmentError(
                    ErrorCode.INVALID_REQUEST,
                    f"subscription {name!r} cannot be created: segment {self.key} holds "
                    f"{len(self._subscriptions)} subscriptions, the most consumers may create "
                    f"({limit}, maxSubscriptionsPerTopic)",
                )
            start = (
                self._log.first_entry_id
                if initial is InitialPosition.EARLIEST
                else self._log.last_entry_id + 1
            )
            state = CursorState.starting_at(max(0, start))
            await self._counting.count_from(state.first_unacked_entry)
            await self._cursors.save(name, state)
            if self._deleted:  # deleted meanwhile: it stored nothing that lasts
                raise SegmentError(ErrorCode.SEGMENT_NOT_FOUND, f"segment {self.key} was deleted")
            subscription = self._subscriptions[name] = self._new_subscription(name, state)
            return subscription

    def _existing_subscription(self, name: str) -> Subscription | None:
        if self._deleted:
            raise SegmentError(ErrorCode.SEGMENT_NOT_FOUND, f"segment {self.key} was deleted")
        return self._subscriptions.get(name)

    async def delete_subscription(self, name: str) -> bool:
        async with self._subscription_changes:
            subscription = self._subscriptions.pop(name, None)
            if subscription is None:
                return False
            await subscription.close(
                ErrorCode.SUBSCRIPTION_NOT_FOUND, f"subscription {name!r} was deleted"
            )
            await self._cursors.delete(name)
            return True

    async def seek_by_timestamp(self, name: str, timestamp_ms: int) -> int:
        entry = await self._log.find_entry_by_timestamp(timestamp_ms)
        await self.subscription(name).seek(entry)
        return entry

    # -- lifecycle ------------------------------------------------------------------------------

    async def terminate(self) -> int:
        """Seal the segment: appends are refused from now on. Returns the last entry id."""
        last = await self._log.terminate()
        await self._snapshot_dedup()
        message = f"segment {self.key} is terminated at entry {last}: produce to its children"
        links = list(self._producer_links.items())
        for handle, _ in links:
            self._access.close(handle)
        self._producer_links.clear()
        for waiter in self._waiters.values():
            if not waiter.done():
                waiter.set_exception(SegmentError(ErrorCode.SEGMENT_TERMINATED, message))
        self._waiters.clear()
        for _, link in links:
            with contextlib.suppress(Exception):
                await link.closed_by_broker(ErrorCode.SEGMENT_TERMINATED, message)
        for subscription in self._subscriptions.values():
            subscription.notify_appended()
        return last

    async def delete(self) -> None:
        self._deleted = True
        message = f"segment {self.key} was deleted"
        await self._close_everything(ErrorCode.SEGMENT_NOT_FOUND, message)
        await self._log.delete()
        await self._cursors.remove()
        await asyncio.to_thread(shutil.rmtree, self.directory, True)

    async def close(self) -> None:
        """Release the segment on shutdown; everything stays on disk."""
        await self._close_everything(ErrorCode.SERVICE_NOT_READY, "the broker is shutting down")
        with contextlib.suppress(Exception):
            await self._snapshot_dedup()
        await self._log.close()
        await self._cursors.close()

    async def apply_retention(self) -> int:
        """Drop whole log files that every subscription has consumed and that are past the
        retention size or age; unconsumed data is never dropped. Returns entries dropped."""
        consumed = min(
            (s.cursor.mark_delete for s in self._subscriptions.values()),
            default=self._log.last_entry_id,
        )
        max_size_bytes = self._meta.retention_max_size_bytes
        max_age_seconds = self._meta.retention_max_age_seconds
        if max_size_bytes is None and max_age_seconds is None:
            return 0
        now_ms = int(time.time() * 1000)
        keep_from = self._log.first_entry_id
        total = self._log.size_bytes
        for info in self._log.files[:-1]:
            if info.last_entry_id > consumed:
                break
            too_big = max_size_bytes is not None and total > max_size_bytes
            too_old = (
                max_age_seconds is not None
                and info.last_timestamp_ms is not None
                and now_ms - info.last_timestamp_ms > max_age_seconds * 1000
            )
            if not (too_big or too_old):
                break
            keep_from = info.last_entry_id + 1
            total -= info.size_bytes
        if keep_from <= self._log.first_entry_id:
            return 0
        return await self._log.trim(keep_from)

    def stats(self) -> dict[str, Any]:
        subscriptions: dict[str, Any] = {}
        for name, subscription in self._subscriptions.items():
            dispatch = subscription.stats()
            subscriptions[name] = {
                "type": None if subscription.type is None else subscription.type.value,
                "backlog": subscription.backlog(),  # messages
                "backlogEntries": subscription.backlog_entries(),
                "markDelete": subscription.cursor.mark_delete,
                "drained": subscription.is_drained(),
                "consumers": subscription.consumer_count,
                "dispatch": None if dispatch is None else _dispatch_stats(dispatch),
            }
        sample = self.load.sample()
        return {
            "namespace": self.key.namespace,
            "topic": self.key.topic,
            "segmentId": self.key.segment_id,
            "descriptor": self._meta.descriptor,
            "state": "Terminated" if self.sealed else "Active",
            "firstEntryId": self._log.first_entry_id,
            "lastEntryId": self._log.last_entry_id,
            "sizeBytes": self._log.size_bytes,
            "producerEpoch": self._access.epoch,
            "reservedFor": self._access.reserved_for,
            "producers": self.producer_names(),
            "rates": {
                "msgRateIn": sample.msg_rate_in,
                "msgRateOut": sample.msg_rate_out,
                "byteRateIn": sample.byte_rate_in,
                "byteRateOut": sample.byte_rate_out,
            },
            "subscriptions": subscriptions,
        }

    # -- internals ------------------------------------------------------------------------------

    def _new_subscription(self, name: str, state: CursorState) -> Subscription:
        return Subscription(
            name,
            self.key.segment_id,
            state,
            self._reader,
            self._cursors.save,
            functools.partial(self._parents_drained, name),
            self._subscription_drained,
            self.load.dispatched,
            self._config.dispatch_batch,
            self._config.key_shared_unblock_interval,
            UnackedLimits(
                self._config.max_unacked_messages_per_consumer,
                self._config.max_unacked_messages_per_subscription,
            ),
        )

    def _floor(self) -> int:
        """The lowest entry a subscription has not fully acknowledged (the next entry id
        without subscriptions): below it, no backlog needs the messages per entry."""
        return min(
            (s.cursor.first_unacked_entry for s in self._subscriptions.values()),
            default=self._log.next_entry_id,
        )

    def _parents_drained(self, subscription: str, kind: SegmentSubscriptionType) -> bool:
        if not self._meta.parents:
            return True
        return self._gate.parents_drained(
            self.key.namespace, self.key.topic, self._meta.parents, subscription
        )

    def _subscription_drained(self, subscription: str) -> None:
        self._gate.mark_drained(
            self.key.namespace, self.key.topic, self._meta.descriptor, subscription
        )

    def _gate_changed(self) -> None:
        for subscription in self._subscriptions.values():
            subscription.notify_gate_changed()

    def _check_writable(self) -> None:
        if self._deleted:
            raise SegmentError(ErrorCode.SEGMENT_NOT_FOUND, f"segment {self.key} was deleted")
        if self._log.sealed:
            raise self._terminated()

    def _terminated(self) -> SegmentError:
        return SegmentError(
            ErrorCode.SEGMENT_TERMINATED,
            f"segment {self.key} is terminated at entry {self._log.last_entry_id}: produce to its children",
        )

    def _translate(self, error: BaseException) -> BaseException:
        if isinstance(error, SegmentTerminated):
            return SegmentError(
                ErrorCode.SEGMENT_TERMINATED, f"segment {self.key} is terminated: {error}"
            )
        if isinstance(error, RecordTooLarge):
            return SegmentError(ErrorCode.MESSAGE_TOO_LARGE, str(error))
        return error

    def _access_state(self) -> tuple[int, str | None]:
        return self._access.epoch, self._access.reserved_for

    async def _persist_access(self, before: tuple[int, str | None]) -> None:
        if self._access_state() != before:
            self._meta = self._meta.with_changes(
                producer_epoch=self._access.epoch, reserved_for=self._access.reserved_for
            )
            await self._save_meta()

    async def _close_fenced(self, fenced: list[Grant]) -> None:
        for grant in fenced:
            link = self._producer_links.pop(grant.handle, None)
            if link is not None:
                with contextlib.suppress(Exception):
                    await link.closed_by_broker(
                        ErrorCode.PRODUCER_FENCED,
                        f"producer {grant.name!r} was fenced: the segment's producer epoch is now {self._access.epoch}",
                    )

    async def _settle_waiters(
        self,
        granted: list[Grant],
        refused: list[tuple[Hashable, AccessError]],
        before: tuple[int, str | None],
    ) -> None:
        await self._persist_access(before)
        for grant in granted:
            waiter = self._waiters.pop(grant.handle, None)
            if waiter is not None and not waiter.done():
                waiter.set_result(grant)
        for handle, error in refused:
            waiter = self._waiters.pop(handle, None)
            if waiter is not None and not waiter.done():
                waiter.set_exception(SegmentError(ErrorCode(error.code), str(error)))

    async def _snapshot_dedup(self) -> None:
        marks = {name: self._dedup.highest_persisted(name) for name in self._dedup.producers()}
        self._meta = self._meta.with_changes(
            dedup=marks, dedup_through_entry=self._log.last_entry_id
        )
        self._entries_since_snapshot = 0
        await self._save_meta()

    async def _save_meta(self) -> None:
        async with self._meta_writes:
            await save_meta(self.directory, self._meta)

    async def _close_everything(self, code: ErrorCode, message: str) -> None:
        self._unlisten()
        # A copy: while a subscription tells its consumers, their sessions may delete another.
        for subscription in list(self._subscriptions.values()):
            await subscription.close(code, message)
        links = list(self._producer_links.values())
        self._producer_links.clear()
        self._after_seal.clear()
        for waiter in self._waiters.values():
            if not waiter.done():
                waiter.set_exception(SegmentError(code, message))
        self._waiters.clear()
        for link in links:
            with contextlib.suppress(Exception):
                await link.closed_by_broker(code, message)


def _dispatch_stats(stats: Any) -> dict[str, Any]:
    return {
        "mode": stats.mode.value,
        "bufferedMessages": stats.buffered_messages,
        "replayMessages": stats.replay_messages,
        "deliveredTotal": stats.delivered_total,
        "ackedTotal": stats.acked_total,
        "redeliveredTotal": stats.redelivered_total,
        "unackedMessages": stats.unacked_messages,
        "blockedOnUnacked": stats.blocked_on_unacked,
        "drainingHashesCount": stats.draining_hashes_count,
        "drainingHashesPendingMessages": stats.draining_hashes_pending_messages,
        "drainingHashesClearedTotal": stats.draining_hashes_cleared_total,
        "consumers": [
            {
                "consumerId": c.consumer_id,
                "name": c.name,
                "priority": c.priority,
                "permits": c.permits,
                "pendingMessages": c.pending_messages,
                "blockedOnUnacked": c.blocked_on_unacked,
                "active": c.active,
                "assignedRanges": [str(r) for r in c.assigned_ranges],
                "drainingHashes": [_draining(d) for d in c.draining_hashes],
            }
            for c in stats.consumers
        ],
    }


def _draining(entry: Any) -> dict[str, Any]:
    return {
        "hash": entry.key_hash,
        "pendingMessages": entry.pending_messages,
        "blockedAttempts": entry.blocked_attempts,
    }
