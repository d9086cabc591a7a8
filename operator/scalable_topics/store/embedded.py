"""EmbeddedStore: the store port on one SQLite file, shared by tasks and processes of a machine.

Storage. The file is in WAL mode; a change is committed (``synchronous=FULL`` by default) before
the call returns. Three tables: ``objects`` (the current state), ``events`` (one row per write:
the object as written, its labels and, for MODIFIED, the labels before, so that a selector watch
can turn a change into ADDED or DELETED) and ``meta`` (the global ``revision`` counter and the
``compacted`` mark). Every write runs in ``BEGIN IMMEDIATE``: SQLite's write lock serializes
writers of every process, and the counter grows inside that transaction, so revision order is
commit order; a reader that sees revision N sees everything below it. A write that changes
nothing is not a write: it returns the stored object and leaves the revision alone, as the
Kubernetes API does.

Threads. SQLite calls block, so each store owns one worker thread with its own connection;
coroutines hand it closures and await the result. Being single, the thread also serializes this
instance's calls, which a connection needs.

Compaction. Each write deletes events older than the last ``history_limit`` revisions and
raises ``compacted``; a watch that resumes from a revision below it raises Expired.

Watches. One change feed per store instance, running only while a watch is open: it reads new
events in revision order and fans each out to the open watches. It reads when a commit wakes
it: this instance's writes on the event loop, every other instance's (in this process or
another sharing the file, e.g. standalone's child brokers) through the instance's named pipe in
the directory ``<file>-wake`` next to the store, to which every writer sends a byte after each
commit (embedded_wake.py). An idle feed therefore costs nothing. It still reads every
``fallback_poll_interval`` (1 s), one indexed read of the revision counter, for the commits
that signal nobody: a writer killed between its commit and its signal, or one running older
code. Where the pipe cannot be made (a file system without FIFOs, a directory it may not
write), the feed says so in the log and polls every ``poll_interval`` (5 ms) instead.

Each watch has an unbounded queue: the feed never waits for a consumer and a slow consumer
loses nothing, even when compaction passes it; the backlog is bounded by what is written while
it lags, and relisting after an Expired would cost more than holding those events. A watch
releases its listener on ``aclose``, on leaving ``async with``, when it is garbage collected,
and when its iteration is cancelled outside ``async with`` (inside, a timed-out read leaves it
open). An object that leaves a selector's selection arrives as DELETED carrying its new state,
where Kubernetes sends the previous one; type, name and resourceVersion are the same. A watch
that allows bookmarks gets a BOOKMARK at most every ``bookmark_interval`` seconds once the feed
has served it past its last one (changes of other kinds, or outside its namespace or
selection, move it on too). ``close()`` first delivers to open watches the changes committed
before it began, then each raises StoreClosed from its iterator once its queue is drained.
"""

from __future__ import annotations

import asyncio
import builtins
import contextlib
import functools
import json
import logging
import sqlite3
import time
import uuid
import weakref
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from os import PathLike
from types import TracebackType
from typing import Any, Literal, Self, TypeVar

from ..model.clock import Clock, SystemClock
from ..model.timefmt import format_time
from . import write_rules as rules
from .embedded_wake import WakePipe, wake_directory, wake_others
from .embedded_watch import Batch, Change, EmbeddedWatch, Listener, event_type_for
from .errors import Expired, Invalid, NotFound, StoreClosed, StoreError, UnknownKind
from .kinds import DEFAULT_KINDS, KindInfo
from .port import EventType, Object, ObjectList, WatchEvent
from .selectors import LabelSelector, parse_selector

log = logging.getLogger(__name__)

T = TypeVar("T")
Synchronous = Literal["OFF", "NORMAL", "FULL", "EXTRA"]

_SCHEMA_VERSION = 1
_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value INTEGER NOT NULL) WITHOUT ROWID",
    "INSERT OR IGNORE INTO meta (key, value) VALUES ('revision', 0), ('compacted', 0)",
    """CREATE TABLE IF NOT EXISTS objects (
        kind TEXT NOT NULL, namespace TEXT NOT NULL, name TEXT NOT NULL,
        revision INTEGER NOT NULL, body TEXT NOT NULL,
        PRIMARY KEY (kind, namespace, name)
    ) WITHOUT ROWID""",
    """CREATE TABLE IF NOT EXISTS events (
        revision INTEGER PRIMARY KEY, kind TEXT NOT NULL, namespace TEXT NOT NULL,
        name TEXT NOT NULL, type TEXT NOT NULL, body TEXT NOT NULL,
        labels TEXT NOT NULL, prev_labels TEXT
    )""",
    f"PRAGMA user_version = {_SCHEMA_VERSION}",
)
_FEED_BATCH = 1000
_OPEN_RETRY_SECONDS = 0.05


# -- the store ----------------------------------------------------------------------------------


class EmbeddedStore:
    """The store port on a SQLite file (see the module docstring for the design)."""

    def __init__(
        self,
        path: str | PathLike[str],
        *,
        kinds: Mapping[str, KindInfo] = DEFAULT_KINDS,
        clock: Clock | None = None,
        history_limit: int = 10_000,
        poll_interval: float = 0.005,
        fallback_poll_interval: float = 1.0,
        synchronous: Synchronous = "FULL",
        busy_timeout: float = 30.0,
        bookmark_interval: float = 1.0,
    ) -> None:
        if history_limit < 1:
            raise ValueError(f"history_limit must be at least 1, not {history_limit}")
        if synchronous not in ("OFF", "NORMAL", "FULL", "EXTRA"):
            raise ValueError(f"synchronous must be OFF, NORMAL, FULL or EXTRA, not {synchronous!r}")
        if poll_interval <= 0:
            raise ValueError(f"poll_interval must be positive, not {poll_interval}")
        if fallback_poll_interval <= 0:
            raise ValueError(
                f"fallback_poll_interval must be positive, not {fallback_poll_interval}"
            )
        if bookmark_interval <= 0:
            raise ValueError(f"bookmark_interval must be positive, not {bookmark_interval}")
        self._path = str(path)
        self._kinds = kinds
        self._clock: Clock = clock or SystemClock()
        self._history_limit = history_limit
        self._poll_interval = poll_interval
        self._fallback_poll_interval = fallback_poll_interval
        self._wake_directory = wake_directory(self._path)
        self._wake_name: str | None = None  # this instance's pipe there, while the feed runs
        self._wake_failure_logged = False
        self._bookmark_interval = bookmark_interval
        self._synchronous = synchronous
        self._busy_timeout = busy_timeout
        self._closed = False
        self._listeners: set[Listener] = set()
        self._feed_task: asyncio.Task[None] | None = None
        self._wakeup = asyncio.Event()
        # The worker thread owns the connection from its first task to its last.
        self._conn: sqlite3.Connection | None = None
        self._open_error: BaseException | None = None
        self._worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="embedded-store")
        self._worker.submit(self._connect)
        weakref.finalize(self, self._worker.shutdown, wait=False)

    @classmethod
    async def open(cls, path: str | PathLike[str], **options: Any) -> EmbeddedStore:
        """Open a store and wait until its file is ready, so that errors surface here."""
        store = cls(path, **options)
        try:
            await store._call(lambda conn: None)
        except BaseException:
            await store.close()
            raise
        return store

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    @property
    def path(self) -> str:
        return self._path

    @property
    def open_watches(self) -> int:
        """Watches the change feed is serving right now."""
        return len(self._listeners)

    @property
    def feed_running(self) -> bool:
        return self._feed_task is not None and not self._feed_task.done()

    # -- the port ---------------------------------------------------------------------------

    async def get(self, kind: str, namespace: str, name: str) -> Object:
        self._kind(kind)
        found = await self._call(lambda conn: self._read_one(conn, kind, namespace, name))
        if found is None:
            raise NotFound(kind, namespace, name)
        return found

    async def list(
        self, kind: str, namespace: str | None = None, label_selector: str | None = None
    ) -> ObjectList:
        self._kind(kind)
        selector = parse_selector(label_selector)
        # As in Kubernetes, the empty namespace means all of them.
        revision, items = await self._snapshot(kind, namespace or None, selector)
        return ObjectList(items=items, resource_version=str(revision))

    async def create(self, obj: Object) -> Object:
        request = rules.private_copy(obj)
        info = rules.validate(request, self._kinds)
        now = format_time(self._clock.now())
        return await self._write(request, rules.create(request, info, str(uuid.uuid4()), now))

    async def replace(self, obj: Object) -> Object:
        request = rules.private_copy(obj)
        info = rules.validate(request, self._kinds)
        return await self._write(request, rules.replace(request, info))

    async def replace_status(self, obj: Object) -> Object:
        request = rules.private_copy(obj)
        info = rules.validate(request, self._kinds)
        return await self._write(request, rules.replace_status(request, info))

    async def patch(
        self,
        kind: str,
        namespace: str,
        name: str,
        patch: Object,
        resource_version: str | None = None,
    ) -> Object:
        return await self._patch(kind, namespace, name, patch, resource_version, status=False)

    async def patch_status(
        self,
        kind: str,
        namespace: str,
        name: str,
        patch: Object,
        resource_version: str | None = None,
    ) -> Object:
        return await self._patch(kind, namespace, name, patch, resource_version, status=True)

    async def delete(
        self, kind: str, namespace: str, name: str, resource_version: str | None = None
    ) -> Object:
        """Return the object as deleted, or as marked for deletion when finalizers hold it."""
        self._kind(kind)
        now = format_time(self._clock.now())
        rule = rules.delete(kind, namespace, name, resource_version, now)
        return await self._write_at(kind, namespace, name, rule)

    def watch(
        self,
        kind: str,
        namespace: str | None = None,
        resource_version: str | None = None,
        label_selector: str | None = None,
        allow_bookmarks: bool = False,
    ) -> EmbeddedWatch:
        if self._closed:
            raise StoreClosed(f"the store {self._path} is closed")
        self._kind(kind)
        selector = parse_selector(label_selector)
        start: int | None = None
        if resource_version:
            if not resource_version.isdecimal():
                raise Invalid(f"resourceVersion {resource_version!r} is not a store revision")
            start = int(resource_version)
        bookmarks = self._bookmark_interval if allow_bookmarks else None
        return EmbeddedWatch(self, kind, namespace or None, start, selector, bookmarks)

    async def close(self) -> None:
        """Release the file. Open watches first get the changes committed before close began,
        then raise StoreClosed; every later call raises StoreClosed too."""
        if self._closed:
            return
        self._closed = True
        task, self._feed_task = self._feed_task, None
        if task is not None:
            task.cancel()
            await asyncio.wait([task])
        with contextlib.suppress(StoreError):
            await self._catch_up()
        listeners, self._listeners = self._listeners, set()
        for listener in listeners:
            listener.queue.put_nowait(StoreClosed(f"the store {self._path} was closed"))
        # Queued calls run first: the executor is first in, first out.
        await asyncio.wrap_future(self._worker.submit(self._disconnect))
        self._worker.shutdown(wait=False)

    # -- helpers on the event loop ----------------------------------------------------------

    def _kind(self, kind: str) -> KindInfo:
        info = self._kinds.get(kind)
        if info is None:
            raise UnknownKind(kind, list(self._kinds))
        return info

    async def _call(self, work: Callable[[sqlite3.Connection], T]) -> T:
        if self._closed:
            raise StoreClosed(f"the store {self._path} is closed")
        try:
            future = self._worker.submit(self._run, work)
        except RuntimeError as exc:  # the worker shut down between the check and the submit
            raise StoreClosed(f"the store {self._path} is closed") from exc
        return await asyncio.wrap_future(future)

    async def _write(
        self, request: Object, rule: Callable[[Object | None], rules.Outcome]
    ) -> Object:
        return await self._write_at(*rules.identity(request), rule)

    async def _write_at(
        self, kind: str, namespace: str, name: str, rule: Callable[[Object | None], rules.Outcome]
    ) -> Object:
        result = await self._call(lambda conn: self._apply(conn, kind, namespace, name, rule))
        self._wakeup.set()  # the feed need not wait for its next poll
        return result

    async def _patch(
        self,
        kind: str,
        namespace: str,
        name: str,
        patch: Object,
        resource_version: str | None,
        *,
        status: bool,
    ) -> Object:
        info = self._kind(kind)
        if not isinstance(patch, dict):
            raise Invalid(f"a merge patch must be a JSON object, not {type(patch).__name__}")
        patch = rules.private_copy(patch)
        rule = rules.patch(
            kind, namespace, name, patch, info, self._kinds, resource_version, status=status
        )
        return await self._write_at(kind, namespace, name, rule)

    async def _snapshot(
        self, kind: str, namespace: str | None, selector: LabelSelector
    ) -> tuple[int, builtins.list[Object]]:
        return await self._call(lambda conn: self._read_all(conn, kind, namespace, selector))

    def _register(self, listener: Listener) -> Listener:
        if self._closed:
            raise StoreClosed(f"the store {self._path} is closed")
        self._listeners.add(listener)
        if self._feed_task is None or self._feed_task.done():
            self._wakeup = asyncio.Event()
            self._feed_task = asyncio.get_running_loop().create_task(
                self._feed(), name=f"embedded-store-feed {self._path}"
            )
        self._wakeup.set()  # catch the new watch up now
        return listener

    def _unregister(self, listener: Listener) -> asyncio.Task[None] | None:
        """Drop a listener; return the feed task when this stopped it, for the caller to await."""
        if listener not in self._listeners:
            return None  # already dropped: the store closed, or the watch expired
        self._listeners.remove(listener)
        if self._listeners or self._feed_task is None:
            return None
        task, self._feed_task = self._feed_task, None
        task.cancel()
        return task

    async def _feed(self) -> None:
        wakeup = self._wakeup
        pipe: WakePipe | None = None
        loop = asyncio.get_running_loop()
        try:
            # The pipe first: a commit after it has its name wakes the feed, one before it
            # is in the first read (embedded_wake.py). A few system calls, once per feed: on
            # the loop, so that a cancellation cannot leave a pipe open that nobody closes.
            pipe = self._open_pipe()
            poll = self._poll_interval
            if pipe is not None:
                loop.add_reader(pipe.fileno(), self._woken, pipe, wakeup)
                self._wake_name, poll = pipe.name, self._fallback_poll_interval
            while self._listeners:
                wakeup.clear()
                after = min(listener.cursor for listener in self._listeners)
                batch = await self._call(functools.partial(self._read_changes, after=after))
                self._fan_out(batch, after)
                if len(batch.changes) == _FEED_BATCH or wakeup.is_set():
                    continue
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(poll):
                        await wakeup.wait()
        except Exception as exc:  # the file failed: end the watches rather than leave them hanging
            error = exc if isinstance(exc, StoreError) else StoreError(f"watch feed failed: {exc}")
            listeners, self._listeners = self._listeners, set()
            for listener in listeners:
                listener.queue.put_nowait(error)
        finally:
            if pipe is not None:
                loop.remove_reader(pipe.fileno())
                self._wake_name = None
                pipe.close()
            if self._feed_task is asyncio.current_task():
                self._feed_task = None

    def _open_pipe(self) -> WakePipe | None:
        """This instance's wake pipe; None when the file system will not have one, and the
        feed then polls as often as it must."""
        try:
            return WakePipe.create(self._wake_directory)
        except OSError as error:
            if not self._wake_failure_logged:
                self._wake_failure_logged = True
                log.warning(
                    "%s: no wake pipe in %s (%s): watches poll the file every %g s instead",
                    self._path,
                    self._wake_directory,
                    error,
                    self._poll_interval,
                )
            return None

    @staticmethod
    def _woken(pipe: WakePipe, wakeup: asyncio.Event) -> None:
        pipe.drain()  # before the feed reads: a signal after this wakes it again
        wakeup.set()

    async def _catch_up(self) -> None:
        """One last pass of the feed, up to the revision committed when it starts."""
        target: int | None = None
        while self._listeners:
            after = min(listener.cursor for listener in self._listeners)
            if target is not None and after >= target:
                return
            read = functools.partial(self._read_changes, after=after)
            batch = await asyncio.wrap_future(self._worker.submit(self._run, read))
            self._fan_out(batch, after)
            target = batch.revision if target is None else target
            if not batch.changes:
                return

    def _fan_out(self, batch: Batch, after: int) -> None:
        # A listener registered while the batch was read may need older changes: next round.
        ready = [listener for listener in self._listeners if listener.cursor >= after]
        for listener in ready:
            if listener.cursor < batch.compacted:
                self._listeners.discard(listener)
                listener.queue.put_nowait(Expired(str(listener.cursor), str(batch.compacted)))
        ready = [listener for listener in ready if listener in self._listeners]
        for change in batch.changes:
            for listener in ready:
                if (
                    change.revision <= listener.cursor
                    or change.kind != listener.kind
                    or (listener.namespace is not None and change.namespace != listener.namespace)
                ):
                    continue
                event_type = event_type_for(change, listener.selector)
                if event_type is not None:
                    listener.queue.put_nowait(WatchEvent(event_type, json.loads(change.body)))
        if batch.changes:
            last = batch.changes[-1].revision
            for listener in ready:
                listener.cursor = max(listener.cursor, last)
                if listener.bookmark_interval is not None:
                    self._bookmark(listener)

    def _bookmark(self, listener: Listener) -> None:
        """Tell a bookmark watch how far it has been served, at most once an interval."""
        assert listener.bookmark_interval is not None
        now = listener.loop.time()
        if (
            listener.cursor > listener.bookmarked
            and now - listener.bookmarked_at >= listener.bookmark_interval
        ):
            listener.bookmarked, listener.bookmarked_at = listener.cursor, now
            info = self._kinds[listener.kind]
            bookmark = {
                "apiVersion": info.api_version,
                "kind": info.kind,
                "metadata": {"resourceVersion": str(listener.cursor)},
            }
            listener.queue.put_nowait(WatchEvent(EventType.BOOKMARK, bookmark))

    # -- the worker thread ------------------------------------------------------------------

    def _connect(self) -> None:
        try:
            self._conn = self._open_connection()
        except Exception as exc:  # raised to the caller by the first call
            self._open_error = exc

    def _open_connection(self) -> sqlite3.Connection:
        conn = sqlite3.connect(
            self._path, timeout=self._busy_timeout, isolation_level=None, check_same_thread=True
        )
        deadline = time.monotonic() + self._busy_timeout
        while True:  # switching to WAL takes a lock the busy handler does not always wait for
            try:
                mode = conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
                if str(mode).lower() != "wal":
                    raise StoreError(f"{self._path}: SQLite refused WAL mode (got {mode!r})")
                conn.execute(f"PRAGMA synchronous = {self._synchronous}")
                with self._transaction(conn, write=True):
                    version = conn.execute("PRAGMA user_version").fetchone()[0]
                    if version not in (0, _SCHEMA_VERSION):
                        raise StoreError(
                            f"{self._path} has schema version {version}, this code knows "
                            f"{_SCHEMA_VERSION}"
                        )
                    for statement in _SCHEMA:
                        conn.execute(statement)
                return conn
            except sqlite3.OperationalError as exc:
                if "locked" not in str(exc) or time.monotonic() > deadline:
                    conn.close()
                    raise
                time.sleep(_OPEN_RETRY_SECONDS)
            except BaseException:
                conn.close()
                raise

    def _disconnect(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def _run(self, work: Callable[[sqlite3.Connection], T]) -> T:
        if self._conn is None:
            if self._open_error is not None:
                raise StoreError(f"cannot open {self._path}: {self._open_error}")
            raise StoreClosed(f"the store {self._path} is closed")
        try:
            return work(self._conn)
        except sqlite3.Error as exc:
            raise StoreError(f"{self._path}: {exc}") from exc

    @staticmethod
    @contextlib.contextmanager
    def _transaction(conn: sqlite3.Connection, *, write: bool) -> Iterator[None]:
        conn.execute("BEGIN IMMEDIATE" if write else "BEGIN")
        try:
            yield
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise

    @staticmethod
    def _read_one(conn: sqlite3.Connection, kind: str, namespace: str, name: str) -> Object | None:
        row = conn.execute(
            "SELECT body FROM objects WHERE kind = ? AND namespace = ? AND name = ?",
            (kind, namespace, name),
        ).fetchone()
        return None if row is None else json.loads(row[0])

    def _read_all(
        self, conn: sqlite3.Connection, kind: str, namespace: str | None, selector: LabelSelector
    ) -> tuple[int, builtins.list[Object]]:
        with self._transaction(conn, write=False):
            revision = self._meta_value(conn, "revision")
            if namespace is None:
                rows = conn.execute(
                    "SELECT body FROM objects WHERE kind = ? ORDER BY namespace, name", (kind,)
                ).fetchall()
            else:
                rows = conn.execute(
                    "SELECT body FROM objects WHERE kind = ? AND namespace = ? ORDER BY name",
                    (kind, namespace),
                ).fetchall()
        objects = (json.loads(body) for (body,) in rows)
        return revision, [obj for obj in objects if selector.matches(rules.labels(obj))]

    def _read_changes(self, conn: sqlite3.Connection, after: int) -> Batch:
        with self._transaction(conn, write=False):
            revision = self._meta_value(conn, "revision")
            compacted = self._meta_value(conn, "compacted")
            if after >= revision:
                return Batch(revision, compacted, [])
            rows = conn.execute(
                "SELECT revision, kind, namespace, type, body, labels, prev_labels FROM events "
                "WHERE revision > ? ORDER BY revision LIMIT ?",
                (after, _FEED_BATCH),
            ).fetchall()
        changes = [
            Change(
                revision,
                kind,
                namespace,
                EventType(event_type),
                body,
                json.loads(labels),
                None if prev_labels is None else json.loads(prev_labels),
            )
            for revision, kind, namespace, event_type, body, labels, prev_labels in rows
        ]
        return Batch(revision, compacted, changes)

    @staticmethod
    def _meta_value(conn: sqlite3.Connection, key: str) -> int:
        row = conn.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return int(row[0])

    def _apply(
        self,
        conn: sqlite3.Connection,
        kind: str,
        namespace: str,
        name: str,
        rule: Callable[[Object | None], rules.Outcome],
    ) -> Object:
        with self._transaction(conn, write=True):
            stored = self._read_one(conn, kind, namespace, name)
            previous = None if stored is None else rules.encode(rules.labels(stored))
            outcome = rule(stored)  # rules never modify what they are given
            if outcome.type is None:
                return outcome.object
            revision = self._meta_value(conn, "revision") + 1
            body = outcome.object
            rules.metadata(body)["resourceVersion"] = str(revision)
            text = rules.encode(body)
            if outcome.type is EventType.DELETED:
                conn.execute(
                    "DELETE FROM objects WHERE kind = ? AND namespace = ? AND name = ?",
                    (kind, namespace, name),
                )
            else:
                conn.execute(
                    "INSERT OR REPLACE INTO objects (kind, namespace, name, revision, body) "
                    "VALUES (?, ?, ?, ?, ?)",
                    (kind, namespace, name, revision, text),
                )
            conn.execute(
                "INSERT INTO events (revision, kind, namespace, name, type, body, labels, "
                "prev_labels) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    revision,
                    kind,
                    namespace,
                    name,
                    outcome.type.value,
                    text,
                    rules.encode(rules.labels(body)),
                    previous if outcome.type is EventType.MODIFIED else None,
                ),
            )
            conn.execute("UPDATE meta SET value = ? WHERE key = 'revision'", (revision,))
            self._compact(conn, revision)
        # Committed: the other instances' feeds read it now (this one's is woken on the loop).
        wake_others(self._wake_directory, self._wake_name)
        return body

    def _compact(self, conn: sqlite3.Connection, revision: int) -> None:
        floor = revision - self._history_limit
        if floor > self._meta_value(conn, "compacted"):
            conn.execute("DELETE FROM events WHERE revision <= ?", (floor,))
            conn.execute("UPDATE meta SET value = ? WHERE key = 'compacted'", (floor,))
