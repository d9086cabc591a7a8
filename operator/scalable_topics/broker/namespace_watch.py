"""Namespace watch sessions: the broker's one registry of them, fed by the process's
ScalableTopic informer (docs/protocol.md, "Namespace watch").

The registry subscribes to the informer once, however many watches open and close, and keeps
them by namespace, then by filter set: a change of a topic costs a dictionary lookup when
nobody watches its namespace, and one filter test per distinct filter set of the namespace
when somebody does. The watches of one (namespace, filters) share a *group*: one member set
(namespace_set.py), kept current from the informer, from which each watch's updates are cut.
A group is registered before it reads the cache, so no change is lost in between, and it goes
with its last watch: a closed watch leaves nothing behind, and an event never visits it.

Each watch sends through one sender task, in order: the snapshot first (unless the client's
hash matches), then diffs. A change marks the watches of its group; about COALESCE_SECONDS
later the group tells them to send what differs, so a burst of changes is one diff and a change
undone within the window is none. A watch keeps what its client lags behind (one entry per
changed name), never a queue of updates, so a slow client costs at most the set.
"""

from __future__ import annotations

import asyncio
import builtins
import logging
from collections import deque
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Protocol

from ..protocol import Command, ErrorCode, NamespaceUpdate, TopicsSnapshot, WatchEnded
from ..store import StoreError
from ..store.informer import Change, Handler, Unsubscribe
from ..tasks import TaskOwner, cancel_all, cancel_and_wait
from .errors import BrokerError
from .namespace_set import (
    Filters,
    Lag,
    MemberSet,
    diff_parts,
    frame_budget,
    member_uid,
    normalized,
    opening,
)

log = logging.getLogger(__name__)

Send = Callable[[Command], Awaitable[None]]

COALESCE_SECONDS = 0.05
# How long a watch waits for the informer's first list (a broker that has just started) before
# it is ended with ServiceNotReady: the store cannot be read.
SYNC_WAIT_SECONDS = 5.0
_SHUTDOWN_SEND_SECONDS = 1.0


class TopicSource(Protocol):
    """What the registry reads: the process's ScalableTopic informer (store/informer.py)."""

    @property
    def synced(self) -> bool: ...

    @property
    def last_error(self) -> str | None: ...

    async def wait_synced(self) -> None: ...

    def subscribe(self, handler: Handler) -> Unsubscribe: ...

    def list(self, namespace: str | None = None) -> builtins.list[dict[str, Any]]: ...


class NamespaceWatch:
    """One client watch. Opened once its group's set is loaded; ended by the broker (a final
    WatchEnded), closed by the client, or dropped with the connection."""

    def __init__(
        self,
        group: _Group,
        watch_id: int,
        current_hash: int | None,
        send: Send,
        on_end: Callable[[NamespaceWatch], None],
        max_frame_bytes: int,
    ) -> None:
        self.watch_id = watch_id
        self.group = group
        self._hash = current_hash
        self._send = send
        self._on_end = on_end
        self._budget = frame_budget(max_frame_bytes)
        self._lag = Lag()
        self._parts: deque[NamespaceUpdate] = deque()  # one snapshot's or one diff's
        self._due = False  # the coalescing window of the changes in ``_lag`` is over
        self._final: NamespaceUpdate | None = None
        self._sender: asyncio.Task[None] | None = None
        self.opened = False
        self.ended = False

    @property
    def namespace(self) -> str:
        return self.group.namespace

    @property
    def sender(self) -> asyncio.Task[None] | None:
        return self._sender

    @property
    def lagging(self) -> int:
        """Names whose change the client has not been sent yet."""
        return len(self._lag)

    def open(self) -> None:
        """The group's set is loaded: the snapshot, or nothing when the client's hash matches."""
        if self.ended or self.opened:
            return
        self.opened = True
        snapshot: list[TopicsSnapshot] = opening(self.group.members, self._hash, self._budget)
        self._parts.extend(NamespaceUpdate(self.watch_id, snapshot=part) for part in snapshot)
        if self._parts:
            self._kick()

    def changed(self, name: str, previous: str | None) -> None:
        """A member of the group's set changed; ``previous`` is what it was."""
        if self.opened and not self.ended:
            self._lag.note(name, previous)

    def flush(self) -> None:
        """The coalescing window is over: send what differs."""
        if self._lag and not self.ended:
            self._due = True
            self._kick()

    def end(self, code: ErrorCode, message: str) -> None:
        """The broker ends the watch: WatchEnded follows what is being sent, and nothing else."""
        if self.ended:
            return
        self.ended = True
        self._lag.clear()
        self._parts.clear()
        self._final = NamespaceUpdate(self.watch_id, ended=WatchEnded(code, message))
        self._kick()
        self._on_end(self)

    async def close(self) -> None:
        """The client closed the watch: nothing more is sent once a frame in flight is out."""
        self._drop()
        if self._sender is not None:
            await asyncio.wait({self._sender})

    async def cancel(self) -> None:
        """The connection is gone: drop everything."""
        self._drop()
        if self._sender is not None:
            await cancel_and_wait(self._sender)

    def _drop(self) -> None:
        self.ended = True
        self._lag.clear()
        self._parts.clear()
        self._final = None

    def _kick(self) -> None:
        if self._sender is None or self._sender.done():
            self._sender = asyncio.get_running_loop().create_task(
                self._drain(), name=f"namespace watch {self.watch_id} sender"
            )

    def _next(self) -> NamespaceUpdate | None:
        while True:
            if self._parts:
                return self._parts.popleft()
            if self._due and self._lag:
                self._due = False
                diff = self._lag.take(self.group.members)
                if diff is not None:
                    parts = diff_parts(diff, self._budget)
                    self._parts.extend(NamespaceUpdate(self.watch_id, diff=p) for p in parts)
                continue
            self._due = False
            final, self._final = self._final, None
            return final

    async def _drain(self) -> None:
        try:
            while (update := self._next()) is not None:
                await self._send(update)
        except Exception:
            log.debug("sending to namespace watch %d failed", self.watch_id, exc_info=True)


class _Group:
    """The watches of one namespace with one filter set, and their shared member set."""

    def __init__(self, namespace: str, filters: Filters) -> None:
        self.namespace = namespace
        self.filters = filters
        self.members = MemberSet()
        self.watches: set[NamespaceWatch] = set()
        self.loader: asyncio.Task[None] | None = None
        self.flush: asyncio.TimerHandle | None = None


class NamespaceWatchRegistry:
    """Every namespace watch of this broker."""

    def __init__(
        self,
        topics: TopicSource,
        *,
        coalesce_seconds: float = COALESCE_SECONDS,
        sync_wait_seconds: float = SYNC_WAIT_SECONDS,
    ) -> None:
        if coalesce_seconds < 0:
            raise ValueError(f"coalesce_seconds must be >= 0, not {coalesce_seconds}")
        if sync_wait_seconds <= 0:
            raise ValueError(f"sync_wait_seconds must be > 0, not {sync_wait_seconds}")
        self._topics = topics
        self._coalesce = coalesce_seconds
        self._sync_wait = sync_wait_seconds
        self._namespaces: dict[str, dict[Filters, _Group]] = {}
        self._loaders = TaskOwner("a namespace watch's load", log)
        # The senders of watches the broker ended, until their WatchEnded is out: no session
        # holds those watches any more, so the registry owns what is left of them.
        self._ending: set[asyncio.Task[None]] = set()
        self._unsubscribe: Unsubscribe | None = None
        self._stopped = False
        # What the informer's changes cost, for tests and benchmarks: changes received, groups
        # whose filters were tested, and watches told of a change of their set.
        self.changes_received = 0
        self.groups_visited = 0
        self.watches_visited = 0

    @property
    def watch_count(self) -> int:
        return sum(len(g.watches) for groups in self._namespaces.values() for g in groups.values())

    @property
    def namespace_count(self) -> int:
        return len(self._namespaces)

    @property
    def group_count(self) -> int:
        return sum(len(groups) for groups in self._namespaces.values())

    async def start(self) -> None:
        if self._unsubscribe is None:
            self._unsubscribe = self._topics.subscribe(self._on_topic)

    async def stop(self) -> None:
        """End every watch (ServiceNotReady), giving their last frames a moment to go out,
        and stop following the informer. Idempotent."""
        self._stopped = True
        if self._unsubscribe is not None:
            self._unsubscribe()
            self._unsubscribe = None
        for groups in list(self._namespaces.values()):
            for group in list(groups.values()):
                for watch in list(group.watches):
                    self.end(watch, ErrorCode.SERVICE_NOT_READY, "the broker is shutting down")
        await self._loaders.close()
        if self._ending:
            _, late = await asyncio.wait(set(self._ending), timeout=_SHUTDOWN_SEND_SECONDS)
            await cancel_all(late, log, "a namespace watch sender")

    def watch(
        self,
        namespace: str,
        filters: Mapping[str, str],
        watch_id: int,
        current_hash: int | None,
        send: Send,
        on_end: Callable[[NamespaceWatch], None],
        max_frame_bytes: int,
    ) -> NamespaceWatch:
        """Open a watch (arguments checked by the caller). Its snapshot, if any, is sent at
        once when the informer has listed the topics, else once it has; ``on_end`` is called
        when the broker ends the watch."""
        if self._stopped:
            raise BrokerError(ErrorCode.SERVICE_NOT_READY, "the broker is shutting down")
        key = normalized(filters)
        groups = self._namespaces.setdefault(namespace, {})
        group = groups.get(key)
        if group is None:
            group = groups[key] = _Group(namespace, key)
        watch = NamespaceWatch(group, watch_id, current_hash, send, on_end, max_frame_bytes)
        group.watches.add(watch)
        try:
            if group.members.loaded:
                watch.open()
            elif group.loader is None:
                if self._topics.synced:
                    self._load(group)
                else:
                    group.loader = self._loaders.spawn(
                        self._load_when_synced(group), f"namespace watch load {namespace}"
                    )
        except BaseException:
            self.release(watch)
            raise
        return watch

    def release(self, watch: NamespaceWatch) -> None:
        """Forget a watch; its group goes with its last watch, its namespace with its last
        group."""
        groups = self._namespaces.get(watch.namespace)
        if groups is None:
            return
        group = watch.group
        group.watches.discard(watch)
        if group.watches or groups.get(group.filters) is not group:
            return
        del groups[group.filters]
        if not groups:
            del self._namespaces[group.namespace]
        if group.flush is not None:
            group.flush.cancel()
        if group.loader is not None and group.loader is not asyncio.current_task():
            group.loader.cancel()

    def end(self, watch: NamespaceWatch, code: ErrorCode, message: str) -> None:
        """End an open watch from the broker's side: WatchEnded ``code``, then nothing."""
        self.release(watch)
        watch.end(code, message)
        sender = watch.sender
        if sender is not None and not sender.done():
            self._ending.add(sender)
            sender.add_done_callback(self._ending.discard)

    # -- loading a group's set --------------------------------------------------------------------

    async def _load_when_synced(self, group: _Group) -> None:
        try:
            async with asyncio.timeout(self._sync_wait):
                await self._topics.wait_synced()
        except (TimeoutError, StoreError):
            reason = self._topics.last_error or f"not listed within {self._sync_wait:g} s"
            for watch in list(group.watches):
                self.end(
                    watch,
                    ErrorCode.SERVICE_NOT_READY,
                    f"the broker cannot read its store yet ({reason}); watch again later",
                )
            return
        group.loader = None
        try:
            self._load(group)
        except Exception as error:
            # A bug must not leave watches waiting for a snapshot that never comes.
            log.exception("loading namespace %s for its watches failed", group.namespace)
            for watch in list(group.watches):
                self.end(watch, ErrorCode.INTERNAL_ERROR, f"internal error: {error}")

    def _load(self, group: _Group) -> None:
        """Read the group's set from the cache (changes seen since it was registered are
        replayed onto it) and open its watches."""
        read: dict[str, str] = {}
        for topic in self._topics.list(group.namespace):
            uid = member_uid(topic, group.filters)
            if uid is not None:
                read[str(topic["metadata"]["name"])] = uid
        group.members.load(read)
        for watch in list(group.watches):
            watch.open()

    # -- the informer's changes -------------------------------------------------------------------

    def _on_topic(self, change: Change) -> None:
        self.changes_received += 1
        namespace, name = change.key
        groups = self._namespaces.get(namespace)
        if groups is None:
            return
        for group in groups.values():
            self.groups_visited += 1
            changed, previous = group.members.observe(name, member_uid(change.new, group.filters))
            if not changed:
                continue
            for watch in group.watches:
                self.watches_visited += 1
                watch.changed(name, previous)
            if group.flush is None:
                group.flush = asyncio.get_running_loop().call_later(
                    self._coalesce, self._flush, group
                )

    def _flush(self, group: _Group) -> None:
        group.flush = None
        for watch in list(group.watches):
            watch.flush()
