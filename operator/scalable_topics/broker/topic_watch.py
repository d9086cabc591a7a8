"""DAG watch sessions: any broker serves them from the store (DESIGN 4.8, seed: DAG Watch
Sessions).

The hub reads the process's informers (ScalableTopic, Segment, and the shard Leases that say
which controller leads a topic), however many client watches are open. Each watched topic has
a *feed*: when an informer change can alter the topic's view (see ``topic_view``), the feed
waits a short coalescing delay, so that the several writes of one split arrive as one update,
then builds the view from the caches and offers it to every watch on it. A new watch is
answered from a read that starts after it was registered, and without the delay. A gap in an
informer's watch is closed by its relist, whose differences arrive as changes like any other.

Every update is the whole DAG, so a client that reads slowly simply skips views it has not
been sent yet; a watch never sends the same view twice.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from ..model.ownership import lease_endpoint, shard_of, shard_of_lease
from ..protocol import Command, Error, ErrorCode, TopicUpdate, WatchClosed
from ..store import StoreError
from ..store.informer import Change, Unsubscribe
from ..store.informers import Informers
from ..tasks import cancel_all
from .errors import BrokerError
from .topic_view import (
    LayoutKey,
    TopicView,
    build_view,
    layout_key,
    segment_changes_view,
    segment_placement,
    topic_changes_view,
)

log = logging.getLogger(__name__)

Send = Callable[[Command], Awaitable[None]]
TopicKey = tuple[str, str]  # namespace, name

COALESCE_SECONDS = 0.05
_SHUTDOWN_SEND_SECONDS = 1.0


class TopicWatch:
    """One client watch. Its frames go out through one sender task, in order; a view not sent
    yet is replaced by a newer one."""

    def __init__(
        self,
        topic: TopicKey,
        watch_id: int,
        request_id: int,
        send: Send,
        on_end: Callable[[TopicWatch], None],
    ) -> None:
        self.topic = topic
        self.watch_id = watch_id
        self._request_id = request_id
        self._send = send
        self._on_end = on_end
        self._last: tuple[object, ...] | None = None  # the last view handed to the sender
        self._next: TopicView | None = None
        self._final: Command | None = None
        self._first_sent = False
        self._sender: asyncio.Task[None] | None = None
        self.ended = False

    def offer(self, view: TopicView) -> None:
        content = (view.epoch, view.segments, view.controller_endpoint)
        if self.ended or content == self._last:
            return
        self._last = content
        self._next = view
        self._kick()

    def end(self, code: ErrorCode, message: str) -> None:
        """The broker ends the watch: WatchClosed, or an Error answering WatchTopic when no
        update has gone out yet."""
        if self.ended:
            return
        self.ended = True
        self._next = None
        self._final = (
            WatchClosed(self.watch_id, code, message)
            if self._first_sent
            else Error(self._request_id, code, message)
        )
        self._kick()
        self._on_end(self)

    async def close(self) -> None:
        """The client closed the watch: nothing more is sent once a frame in flight is out."""
        self.ended = True
        self._next = self._final = None
        if self._sender is not None:
            await self._sender

    def cancel(self) -> None:
        """The connection is gone: drop everything."""
        self.ended = True
        self._next = self._final = None
        if self._sender is not None:
            self._sender.cancel()

    @property
    def sender(self) -> asyncio.Task[None] | None:
        return self._sender

    def _kick(self) -> None:
        if self._sender is None or self._sender.done():
            self._sender = asyncio.get_running_loop().create_task(
                self._drain(), name=f"watch {self.watch_id} sender"
            )

    async def _drain(self) -> None:
        try:
            while True:
                command: Command
                if self._next is not None:
                    view, self._next = self._next, None
                    request_id = None if self._first_sent else self._request_id
                    self._first_sent = True
                    command = TopicUpdate(
                        self.watch_id,
                        request_id,
                        view.epoch,
                        view.segments,
                        view.controller_endpoint,
                    )
                elif self._final is not None:
                    command, self._final = self._final, None
                else:
                    return
                await self._send(command)
        except Exception:
            log.debug("sending to watch %d failed", self.watch_id, exc_info=True)


class _Feed:
    """One watched topic: its watches and what the last read of it saw."""

    def __init__(self, key: TopicKey) -> None:
        self.key = key
        self.watches: set[TopicWatch] = set()
        self.unanswered: set[TopicWatch] = set()
        self.seen_layout: LayoutKey | None = None
        self.view: TopicView | None = None
        self.uid: str | None = None
        self.urgent = False  # a watch waits for its first answer: read without the delay
        self.wake = asyncio.Event()
        self.task: asyncio.Task[None] | None = None

    @property
    def name(self) -> str:
        return f"{self.key[0]}/{self.key[1]}"

    def add(self, watch: TopicWatch) -> None:
        self.watches.add(watch)
        self.unanswered.add(watch)
        self.urgent = True
        self.wake.set()

    def poke(self) -> None:
        self.wake.set()


class TopicWatchHub:
    """Every DAG watch on this broker, fed by the process's informers."""

    def __init__(
        self,
        informers: Informers,
        *,
        coalesce_seconds: float = COALESCE_SECONDS,
    ) -> None:
        if coalesce_seconds < 0:
            raise ValueError(f"coalesce_seconds must be >= 0, not {coalesce_seconds}")
        self._informers = informers
        self._coalesce = coalesce_seconds
        self._feeds: dict[TopicKey, _Feed] = {}
        self._unsubscribes: list[Unsubscribe] = []
        # The endpoint each shard Lease announced last: renewals, which change nothing a view
        # shows, cost one comparison.
        self._shard_endpoints: dict[int, str | None] = {}
        self._stopped = False

    @property
    def informers(self) -> Informers:
        return self._informers

    @property
    def watch_count(self) -> int:
        return sum(len(feed.watches) for feed in self._feeds.values())

    @property
    def topic_count(self) -> int:
        return len(self._feeds)

    async def start(self) -> None:
        informers = self._informers
        self._unsubscribes = [
            informers.topics.subscribe(self._on_topic),
            informers.segments.subscribe(self._on_segment),
            informers.leases.subscribe(self._on_lease),
        ]

    async def stop(self) -> None:
        """End every watch (ServiceNotReady) and stop following the informers."""
        self._stopped = True
        for unsubscribe in self._unsubscribes:
            unsubscribe()
        senders: list[asyncio.Task[None]] = []
        tasks: list[asyncio.Task[None]] = []
        for feed in list(self._feeds.values()):
            for watch in list(feed.watches):
                self._end(feed, watch, ErrorCode.SERVICE_NOT_READY, "the broker is shutting down")
                if watch.sender is not None:
                    senders.append(watch.sender)
            if feed.task is not None:
                tasks.append(feed.task)
        self._feeds.clear()
        for task in tasks:
            task.cancel()
        if senders:
            _, late = await asyncio.wait(senders, timeout=_SHUTDOWN_SEND_SECONDS)
            for task in late:
                task.cancel()
            tasks.extend(late)
        await cancel_all(tasks, log, "a topic watch feed")

    def watch(
        self,
        namespace: str,
        name: str,
        watch_id: int,
        request_id: int,
        send: Send,
        on_end: Callable[[TopicWatch], None],
    ) -> TopicWatch:
        """Open a watch; its first TopicUpdate (or an Error) answers ``request_id``.

        ``on_end`` is called when the broker ends the watch (the topic is gone, shutdown)."""
        if self._stopped:
            raise BrokerError(ErrorCode.SERVICE_NOT_READY, "the broker is shutting down")
        key = (namespace, name)
        feed = self._feeds.get(key)
        if feed is None:
            feed = self._feeds[key] = _Feed(key)
            feed.task = asyncio.get_running_loop().create_task(
                self._serve(feed), name=f"topic feed {feed.name}"
            )
        watch = TopicWatch(key, watch_id, request_id, send, on_end)
        feed.add(watch)
        return watch

    def release(self, watch: TopicWatch) -> None:
        """Forget a watch; the topic's feed goes with its last watch."""
        feed = self._feeds.get(watch.topic)
        if feed is None:
            return
        feed.watches.discard(watch)
        feed.unanswered.discard(watch)
        if not feed.watches:
            del self._feeds[feed.key]
            if feed.task is not None and feed.task is not asyncio.current_task():
                feed.task.cancel()

    # -- feeds ------------------------------------------------------------------------------------

    async def _serve(self, feed: _Feed) -> None:
        while self._feeds.get(feed.key) is feed:
            await feed.wake.wait()
            if not feed.urgent and self._coalesce:
                await asyncio.sleep(self._coalesce)  # let a burst of writes settle
            feed.wake.clear()
            feed.urgent = False
            answering = set(feed.unanswered)
            try:
                await self._informers.wait_synced()
                read = self._read(feed.key)
                if read[0] is None and answering:
                    # Perhaps created a moment ago: ask the store before saying "no topic".
                    with contextlib.suppress(StoreError):
                        await self._informers.topics.catch_up(*feed.key)
                    read = self._read(feed.key)
                self._publish(feed, answering, *read)
            except asyncio.CancelledError:
                raise
            except Exception as error:
                # A bug must not leave watches waiting for an answer that never comes.
                log.exception("publishing topic %s to its watches failed", feed.name)
                for watch in answering & feed.unanswered:
                    self._end(feed, watch, ErrorCode.INTERNAL_ERROR, f"internal error: {error}")

    def _read(
        self, key: TopicKey
    ) -> tuple[dict[str, Any] | None, list[dict[str, Any]], dict[str, Any] | None]:
        namespace, name = key
        informers = self._informers
        topic = informers.topics.get(namespace, name)
        if topic is None:
            return None, [], None
        return topic, informers.segments_of(namespace, name), informers.shard_lease(namespace, name)

    def _publish(
        self,
        feed: _Feed,
        answering: set[TopicWatch],
        topic: dict[str, Any] | None,
        segments: list[dict[str, Any]],
        lease: dict[str, Any] | None,
    ) -> None:
        if topic is None:
            for watch in list(feed.watches):
                message = (
                    f"no topic {feed.name}"
                    if watch in feed.unanswered
                    else f"topic {feed.name} was deleted"
                )
                self._end(feed, watch, ErrorCode.TOPIC_NOT_FOUND, message)
            return
        key = layout_key(topic)
        if feed.uid is not None and key[0] != feed.uid:
            # Deleted and created again: a new topic, whose epochs start over.
            for watch in list(feed.watches - feed.unanswered):
                self._end(
                    feed,
                    watch,
                    ErrorCode.TOPIC_NOT_FOUND,
                    f"topic {feed.name} was deleted (a new topic of that name exists now)",
                )
            feed.view = None
        feed.uid = key[0]
        feed.seen_layout = key
        try:
            view = build_view(topic, segments, lease)
        except ValueError as error:
            log.error("topic %s has a corrupt layout: %s", feed.name, error)
            for watch in answering & feed.unanswered:
                self._end(
                    feed,
                    watch,
                    ErrorCode.INTERNAL_ERROR,
                    f"the layout of topic {feed.name} is corrupt: {error}",
                )
            return
        if view is None:
            return  # no layout yet: new watches wait for the first one
        feed.view = view
        for watch in list(feed.watches):
            if watch in feed.unanswered:
                if watch not in answering:
                    continue  # registered during this read: answered by the next one
                feed.unanswered.discard(watch)
            watch.offer(view)

    def _end(self, feed: _Feed, watch: TopicWatch, code: ErrorCode, message: str) -> None:
        self.release(watch)
        watch.end(code, message)

    # -- informer changes -------------------------------------------------------------------------

    def _on_topic(self, change: Change) -> None:
        feed = self._feeds.get(change.key)
        if feed is not None and topic_changes_view(feed.seen_layout, change.new):
            feed.poke()

    def _on_segment(self, change: Change) -> None:
        placed = segment_placement(change.object)
        if placed is None:
            return
        topic, segment_id, broker = placed
        feed = self._feeds.get((change.key[0], topic))
        if feed is not None and segment_changes_view(
            feed.view, segment_id, broker, deleted=change.new is None
        ):
            feed.poke()

    def _on_lease(self, change: Change) -> None:
        shard = shard_of_lease(change.key[1])
        if shard is None:
            return
        endpoint = lease_endpoint(change.new)
        known = shard in self._shard_endpoints
        if known and self._shard_endpoints[shard] == endpoint:
            return  # a renewal
        self._shard_endpoints[shard] = endpoint
        count = self._informers.shard_count()
        for (namespace, name), feed in self._feeds.items():
            if count is None or shard_of(namespace, name, count) == shard:
                feed.poke()
