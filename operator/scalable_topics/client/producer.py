"""The producer of a scalable topic: routes each message to the Active segment owning its key,
and keeps every key's order across splits and merges (DESIGN guarantee 3).

When a segment is sealed under it, the producer holds back every successor overlapping the
sealed range, waits until the sealed segment's writer has an answer for every batch it sent,
and puts the messages that were not stored at the front of the successors' queues, in their
original order. Only then do the successors start writing, so no newer message for a key can
overtake an older one. Keyless messages go round-robin over the Active segments.

Sequence ids come from one counter per producer, taken when a batch is formed, so they grow
within every segment; the broker deduplicates retries by (producer name, sequence id).

No message is reported acknowledged unless a broker acknowledged it. Each send's future fails
on its own; a message that times out fails every message waiting behind it for the same segment
(as Pulsar's producers do), so that none is stored after an earlier one to its segment failed
and a producer facing a dead service is answered within one send timeout. The failures of
messages queued with ``send_async`` are kept until ``flush()`` or ``close()`` raises SendFailed
for them, so an application that only checks those calls never takes a lost message for sent.
"""

from __future__ import annotations

import asyncio
import functools
import itertools
import logging
import uuid
from collections.abc import Mapping
from types import TracebackType
from typing import TYPE_CHECKING

from ..model.hash_range import HashRange
from ..model.resources import ProducerAccessMode
from ..protocol import (
    DEFAULT_MAX_MESSAGE_BYTES,
    NO_PROPERTIES,
    BatchMessage,
    MessageId,
    ProducerOpen,
    ProducerOpened,
)
from .errors import ClientClosed, ClientError, FailedSend, MessageTooLarge, SendFailed, Timeout
from .exclusive_grant import ExclusiveGrant
from .outgoing import OutgoingMessage
from .pool import ConnectionPool
from .segment_writer import DEFAULT_MAX_PENDING_BATCHES, Batching, SegmentGone, SegmentWriter
from .topic_layout import TopicLayout
from .topic_watcher import TopicWatcher

if TYPE_CHECKING:
    from .client import Client

log = logging.getLogger(__name__)


class Producer:
    """Create with ``await client.create_producer(topic)``."""

    def __init__(
        self,
        client: Client,
        watcher: TopicWatcher,
        *,
        name: str | None,
        access_mode: ProducerAccessMode,
        batching: Batching,
        send_timeout: float,
        max_pending_messages: int,
        max_pending_batches: int = DEFAULT_MAX_PENDING_BATCHES,
    ) -> None:
        if max_pending_messages < 1:
            raise ValueError("max_pending_messages must be at least 1")
        if max_pending_batches < 1:
            raise ValueError("max_pending_batches must be at least 1")
        if send_timeout <= 0:
            raise ValueError("send_timeout must be positive (seconds)")
        self.topic = watcher.topic
        self.name = name or f"{client.client_name}-{uuid.uuid4().hex[:12]}"
        self.access_mode = access_mode
        self.batching = batching
        self.max_pending_batches = max_pending_batches
        self.send_timeout = send_timeout
        self.pool: ConnectionPool = client.pool
        self._client = client
        self._watcher = watcher
        self._writers: dict[int, SegmentWriter] = {}
        self._keyless = itertools.count()
        self._next_sequence_id = 0
        self._epoch: int | None = None
        self._grant: ExclusiveGrant | None = None
        self._space = asyncio.Semaphore(max_pending_messages)
        self._outstanding: set[asyncio.Future[MessageId | None]] = set()
        self._queued = itertools.count()  # send_async order, to report failures in it
        self._failed_sends: list[tuple[int, FailedSend]] = []  # since the last flush
        self._resolving: set[asyncio.Task[None]] = set()
        self._failure: ClientError | None = None
        self._closed = False
        self._max_message_bytes = DEFAULT_MAX_MESSAGE_BYTES
        self._stop_listening = watcher.listen(self._layout_changed)

    async def _start(self) -> None:
        """Take the topic-wide grant if the mode asks for one, then open a writer on every
        Active segment, so that a refusal (ProducerBusy, Unauthorized...) surfaces here."""
        wait_seconds = self._client.operation_timeout
        if self.access_mode is not ProducerAccessMode.SHARED:
            self._grant = ExclusiveGrant(
                self.topic,
                self.name,
                self.access_mode,
                self.pool,
                self._client.service_urls,
                self._fail,
            )
            if self.access_mode is ProducerAccessMode.WAIT_FOR_EXCLUSIVE:
                wait_seconds = float("inf")
            self._epoch = await self._grant.acquire(wait_seconds)
        layout = self._watcher.layout
        for segment in layout.active:
            self._writer(segment.segment_id, layout)
        opened = [asyncio.ensure_future(w.opened) for w in self._writers.values()]
        try:
            async with asyncio.timeout(self._client.operation_timeout):
                await asyncio.gather(*opened)
        except TimeoutError:
            raise Timeout(
                f"could not open a producer on every segment of {self.topic} in "
                f"{self._client.operation_timeout:g} s; are its brokers running?"
            ) from None

    # -- the application's API ------------------------------------------------------------------

    async def send(
        self,
        payload: bytes,
        *,
        key: str | None = None,
        properties: Mapping[str, str] | None = None,
        event_time_ms: int | None = None,
    ) -> MessageId | None:
        """Send one message and return its id once it is durable. The id is None only for a
        retry the broker recognised as stored long ago without remembering where. A failure is
        raised here, and not reported again by ``flush()``."""
        future = await self._queue(payload, key, properties, event_time_ms, report=False)
        return await future

    async def send_async(
        self,
        payload: bytes,
        *,
        key: str | None = None,
        properties: Mapping[str, str] | None = None,
        event_time_ms: int | None = None,
    ) -> asyncio.Future[MessageId | None]:
        """Queue one message and return the future of its id: waits only while
        ``max_pending_messages`` are unanswered. If it fails, the future says why, and the next
        ``flush()`` or ``close()`` raises SendFailed naming it."""
        return await self._queue(payload, key, properties, event_time_ms, report=True)

    async def _queue(
        self,
        payload: bytes,
        key: str | None,
        properties: Mapping[str, str] | None,
        event_time_ms: int | None,
        *,
        report: bool,
    ) -> asyncio.Future[MessageId | None]:
        self._check_open()
        message = BatchMessage(
            bytes(payload), key, dict(properties) if properties else NO_PROPERTIES, event_time_ms
        )
        if message.size_bytes > self._max_message_bytes:
            raise MessageTooLarge(
                f"the message is {message.size_bytes} bytes (payload, key and properties), "
                f"over the brokers' limit of {self._max_message_bytes}"
            )
        await self._space.acquire()
        self._check_open()
        loop = asyncio.get_running_loop()
        future: asyncio.Future[MessageId | None] = loop.create_future()
        outgoing = OutgoingMessage(message, future)
        expiry = loop.call_later(self.send_timeout, self._expired, outgoing)
        self._outstanding.add(future)
        order = next(self._queued) if report else None
        future.add_done_callback(functools.partial(self._answered, outgoing, order, expiry))
        layout = self._watcher.layout
        if key is None:
            active = layout.active
            segment_id = active[next(self._keyless) % len(active)].segment_id
        else:
            segment_id = layout.segment_for_key(key).segment_id
        self._writer(segment_id, layout).append(outgoing)
        return future

    async def flush(self) -> None:
        """Send everything queued now and wait until each message sent so far is answered;
        raise SendFailed if any message queued with ``send_async`` since the last flush (or
        while this one waited) failed. Each failure is raised once."""
        await self._answer_everything()
        self._raise_failed_sends()

    async def _answer_everything(self) -> None:
        for writer in self._writers.values():
            writer.flush()
        waiting = list(self._outstanding)
        if waiting:
            await asyncio.wait(waiting)

    async def close(self) -> None:
        """Flush, then let go of every segment and of the topic-wide grant; raise SendFailed
        once all that is done if a message queued with ``send_async`` since the last flush
        failed (a message still queued by a concurrent call fails with ClientClosed)."""
        if self._closed:
            return
        await self._answer_everything()
        self._closed = True
        self._stop_listening()
        for task in list(self._resolving):
            task.cancel()
        for writer in list(self._writers.values()):
            await writer.close()
            writer.fail_all(ClientClosed(f"the producer of {self.topic} was closed"))
        self._writers.clear()
        failing = list(self._outstanding)
        if failing:  # answered just now: let their callbacks record them
            await asyncio.wait(failing)
        if self._grant is not None:
            await self._grant.release()
        self._client.untrack(self)
        self._raise_failed_sends()

    async def __aenter__(self) -> Producer:
        return self

    async def __aexit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        """Close; failed sends are raised when the block ended normally, and logged when it
        raised (its own error is the one to see)."""
        try:
            await self.close()
        except SendFailed as failed:
            if error is None:
                raise
            log.warning("producer %s of %s: %s", self.name, self.topic, failed.message)

    @property
    def epoch(self) -> int | None:
        """The topic-wide exclusive epoch this producer was granted (None when Shared)."""
        return self._epoch

    def _check_open(self) -> None:
        if self._failure is not None:
            raise self._failure
        if self._closed:
            raise ClientClosed(f"the producer of {self.topic} is closed; create a new one")

    def _answered(
        self,
        outgoing: OutgoingMessage,
        order: int | None,
        expiry: asyncio.Handle,
        future: asyncio.Future[MessageId | None],
    ) -> None:
        expiry.cancel()
        self._outstanding.discard(future)
        self._space.release()
        if future.cancelled():
            return
        error = future.exception()  # retrieved: an unawaited send_async must not warn
        if error is not None and order is not None:
            self._failed_sends.append((order, FailedSend(self.topic, outgoing.message, error)))

    def _raise_failed_sends(self) -> None:
        if not self._failed_sends:
            return
        failed = sorted(self._failed_sends, key=lambda entry: entry[0])
        self._failed_sends.clear()
        failures = [failure for _, failure in failed]
        raise SendFailed(failures) from failures[0].error

    def _expired(self, outgoing: OutgoingMessage) -> None:
        """The message's send timeout is up: it fails, and so does every message waiting
        behind it for the same segment (which would otherwise be stored after it failed, and
        each wait out its own timeout against a service that may be gone)."""
        if outgoing.future.done():
            return
        seconds = f"{self.send_timeout:g}"
        outgoing.future.set_exception(
            Timeout(
                f"the message was not acknowledged within the send timeout of {seconds} s; "
                "it may or may not have been stored"
            )
        )
        for writer in self._writers.values():
            if writer.holds(outgoing):
                behind = (
                    f"an earlier message to segment {writer.segment_id} was not acknowledged "
                    f"within the send timeout of {seconds} s, and the messages waiting behind "
                    "it fail with it"
                )
                writer.fail_pending(
                    sent=Timeout(f"{behind}; this one may or may not have been stored"),
                    queued=Timeout(f"{behind}; this one was not sent"),
                )
                return

    # -- writers and routing --------------------------------------------------------------------

    def _writer(self, segment_id: int, layout: TopicLayout) -> SegmentWriter:
        writer = self._writers.get(segment_id)
        if writer is None:
            hash_range = layout.segments[segment_id].hash_range
            held = any(
                w.sealed and _overlap(w.hash_range, hash_range) for w in self._writers.values()
            )
            writer = SegmentWriter(self, segment_id, hash_range, held=held)
            self._writers[segment_id] = writer
        return writer

    def _layout_changed(self, layout: TopicLayout) -> None:
        for writer in self._writers.values():
            if not writer.sealed and not layout.is_active(writer.segment_id):
                writer.seal()

    def writer_sealed(self, writer: SegmentWriter) -> None:
        task = asyncio.get_running_loop().create_task(self._resolve(writer))
        self._resolving.add(task)
        task.add_done_callback(self._resolving.discard)

    async def _resolve(self, sealed: SegmentWriter) -> None:
        """Route what a sealed segment did not store to its successors, ahead of anything
        newer, then let successors no longer overlapping a sealed segment write."""
        try:
            layout = await self._watcher.wait_for(
                lambda layout: not layout.is_active(sealed.segment_id)
            )
        except ClientError as error:
            self._fail(error)
            return
        # From here to the prepends nothing may yield: a successor created meanwhile would not
        # be held (the sealed writer is no longer listed) and could write newer messages first.
        unstored = sealed.unstored()
        del self._writers[sealed.segment_id]
        by_successor: dict[int, list[OutgoingMessage]] = {}
        for outgoing in unstored:
            key = outgoing.message.key
            if key is None:
                segment_id = layout.active[next(self._keyless) % len(layout.active)].segment_id
            else:
                segment_id = layout.segment_for_key(key).segment_id
            by_successor.setdefault(segment_id, []).append(outgoing)
        for segment_id, messages in by_successor.items():
            self._writer(segment_id, layout).prepend(messages)
        if unstored:
            log.debug(
                "%s: %d messages of sealed segment %d routed to %s",
                self.topic,
                len(unstored),
                sealed.segment_id,
                sorted(by_successor),
            )
        sealed_writers = [w for w in self._writers.values() if w.sealed]
        for writer in self._writers.values():
            if not writer.sealed and not any(
                _overlap(writer.hash_range, s.hash_range) for s in sealed_writers
            ):
                writer.release()
        await sealed.close()

    # -- what writers ask of the producer -------------------------------------------------------

    async def broker_url(self, segment_id: int) -> str:
        def placed_or_pruned(layout: TopicLayout) -> bool:
            node = layout.segments.get(segment_id)
            return node is None or node.broker_url is not None

        node = (await self._watcher.wait_for(placed_or_pruned)).segments.get(segment_id)
        if node is None or node.broker_url is None:
            raise SegmentGone(segment_id)
        return node.broker_url

    def open_request(self, producer_id: int, segment_id: int) -> ProducerOpen:
        if self._grant is None:
            return ProducerOpen(0, producer_id, self.topic, segment_id, self.name)
        return ProducerOpen(
            0,
            producer_id,
            self.topic,
            segment_id,
            self.name,
            ProducerAccessMode.EXCLUSIVE_WITH_FENCING,
            self._grant.epoch,
        )

    def opened(self, reply: ProducerOpened, max_message_bytes: int) -> None:
        if reply.last_sequence_id is not None:
            self._next_sequence_id = max(self._next_sequence_id, reply.last_sequence_id + 1)
        self._max_message_bytes = max_message_bytes

    def next_sequence_ids(self, count: int) -> int:
        first = self._next_sequence_id
        self._next_sequence_id += count
        return first

    def writer_failed(self, writer: SegmentWriter, error: ClientError) -> None:
        self._fail(error)

    def _fail(self, error: ClientError) -> None:
        """Fenced, refused for good, or the topic is gone: every message still unanswered
        fails with ``error``, and so does every later send."""
        if self._failure is not None or self._closed:
            return
        self._failure = error
        log.warning("producer %s of %s failed: %s", self.name, self.topic, error.message)
        for writer in self._writers.values():
            writer.fail_all(error)
            task = asyncio.get_running_loop().create_task(writer.close())
            self._resolving.add(task)
            task.add_done_callback(self._resolving.discard)


def _overlap(a: HashRange, b: HashRange) -> bool:
    return a.start <= b.end and b.start <= a.end
