"""A namespace watch: the set of topics of a namespace whose properties match filters, kept
current across broker failures.

Any broker of protocol version 2 serves a namespace watch, so the watcher asks the service
URLs in turn. The first watch asks for a snapshot; a watch opened again after a drop sends the
hash of the set the watcher holds, and the broker stays silent when its set hashes the same
(else it sends a snapshot, which reaches listeners as a change against the held set). The
reconnect backoff is reset as soon as the watch frame is written: with a matching hash no
answer ever comes, and waiting for one would let short drops in a row grow the delay.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import weakref
from collections.abc import AsyncGenerator, Callable, Mapping, Sequence
from types import MappingProxyType

from ..protocol import (
    INTRODUCED_IN,
    SUPPORTED_VERSIONS,
    Command,
    ErrorCode,
    NamespaceUpdate,
    NamespaceWatchClose,
    WatchEnded,
    WatchNamespace,
    speaks,
)
from ..tasks import cancel_and_wait
from .backoff import Backoff
from .connection import BrokerConnection, Channel
from .errors import (
    ClientClosed,
    ClientError,
    ConnectionFailed,
    Timeout,
    Unauthorized,
    UnsupportedVersion,
    error_for,
)
from .namespace_set import NamespaceSet, OutOfOrderUpdate, TopicSetChange
from .pool import ConnectionPool

__all__ = ["NamespaceWatcher", "TopicSetChange"]

log = logging.getLogger(__name__)

RECONNECT_INITIAL_SECONDS = 0.1
RECONNECT_MAX_SECONDS = 30.0
# How long close() waits for the broker to confirm the watch is closed.
_CLOSE_SECONDS = 5.0
# Refusals that watching again cannot mend: the watch ends for good with them.
FINAL_CODES = frozenset(
    {ErrorCode.NOT_AUTHORIZED, ErrorCode.INVALID_REQUEST, ErrorCode.TOO_MANY_OPEN}
)

ChangeListener = Callable[[TopicSetChange], None]
EndListener = Callable[[ClientError], None]


def reconnect_backoff() -> Backoff:
    return Backoff(initial=RECONNECT_INITIAL_SECONDS, maximum=RECONNECT_MAX_SECONDS)


class NamespaceWatcher:
    def __init__(
        self,
        namespace: str,
        filters: Mapping[str, str],
        pool: ConnectionPool,
        service_urls: Sequence[str],
        *,
        backoff: Backoff | None = None,
    ) -> None:
        """Nothing happens until :meth:`start`; ``Client.watch_namespace`` checks the namespace
        and filters and starts one. ``backoff`` paces watching again after a drop (100 ms
        doubling to 30 s, jittered, by default)."""
        self.namespace = namespace
        self.filters: Mapping[str, str] = MappingProxyType(dict(filters))
        self._pool = pool
        self._urls = itertools.cycle(service_urls)
        self._url_count = len(set(service_urls))
        self._backoff = backoff or reconnect_backoff()
        self._set = NamespaceSet(namespace)
        self._listeners: list[tuple[ChangeListener, EndListener | None]] = []
        self._ended: ClientError | None = None
        self._ready = asyncio.Event()  # the set is known, or the watch ended
        self._task: asyncio.Task[None] | None = None
        # The watch being served: its connection and id while open, and why it stopped.
        self._open_on: tuple[BrokerConnection, int] | None = None
        self._session_over = asyncio.Event()
        self._session_end: WatchEnded | None = None

    @property
    def topics(self) -> frozenset[str]:
        """The set in qualified names (``namespace/name``); valid after :meth:`start`, and
        the last one known after the watch ended."""
        return self._set.topics

    async def start(self, wait_seconds: float) -> frozenset[str]:
        """Watch until the first complete snapshot arrives and return the set.
        ConnectionFailed as soon as no service URL could be connected to (each tried once),
        UnsupportedVersion when every one that could be agreed on protocol version 1,
        AuthenticationFailed for a token the brokers refuse, NotAuthorized, InvalidRequest
        or TooManyOpen when the broker refused the watch, Timeout when none answered in
        ``wait_seconds``. The watcher is closed when start fails."""
        if self._task is not None:
            raise RuntimeError("a NamespaceWatcher starts once")
        self._task = asyncio.get_running_loop().create_task(
            self._run(), name=f"watch namespace {self.namespace}"
        )
        try:
            async with asyncio.timeout(wait_seconds):
                await self._ready.wait()
        except TimeoutError:
            await self.close()
            raise Timeout(
                f"no broker answered a watch of namespace {self.namespace} in "
                f"{wait_seconds:g} s; is the service running?"
            ) from None
        except BaseException:
            await self.close()
            raise
        if self._ended is not None:
            ended = self._ended
            await self.close()
            raise ended
        return self._set.topics

    def listen(
        self, on_change: ChangeListener, on_end: EndListener | None = None
    ) -> Callable[[], None]:
        """Call ``on_change`` with every change after start (a snapshot after a reconnect that
        differs from the held set included, as a change against it), and ``on_end`` once, when
        the watch ends for good: refused in a way watching again cannot mend (NotAuthorized,
        InvalidRequest, TooManyOpen), or closed (ClientClosed). A listener added after the end
        hears it at once. Listeners run on the event loop and must not block; one that raises
        is logged and stays. Returns the function that stops listening."""
        entry = (on_change, on_end)
        self._listeners.append(entry)
        if self._ended is not None and on_end is not None:
            on_end(self._ended)

        def stop() -> None:
            with contextlib.suppress(ValueError):
                self._listeners.remove(entry)

        return stop

    def __aiter__(self) -> AsyncGenerator[TopicSetChange, None]:
        """Every change from this call on; raises the error the watch ended with (ends
        quietly when it was closed)."""
        queue: asyncio.Queue[TopicSetChange | ClientError] = asyncio.Queue()
        stop = self.listen(queue.put_nowait, queue.put_nowait)
        changes = _changes(queue, stop)
        # An iteration dropped unfinished (or never begun) stops listening once collected.
        weakref.finalize(changes, stop)
        return changes

    async def close(self) -> None:
        """Stop watching: on_end listeners hear ClientClosed, iterations end, and the broker
        is told (NamespaceWatchClose) when the watch is open on a live connection."""
        if self._ended is None:
            self._end(ClientClosed(f"the watch of namespace {self.namespace} was closed"))
        open_on, self._open_on = self._open_on, None
        if self._task is not None:
            await cancel_and_wait(self._task)
        if open_on is not None:
            connection, watch_id = open_on
            connection.detach(Channel.NAMESPACE_WATCH, watch_id)
            if connection.is_open:
                with contextlib.suppress(ClientError):
                    await connection.request(
                        NamespaceWatchClose(0, watch_id), wait_seconds=_CLOSE_SECONDS
                    )

    # -- the session ----------------------------------------------------------------------------

    async def _run(self) -> None:
        # After a broker ended the watch as not ready, the delay before watching again grows
        # with each such end in a row: the frame was written (which resets the reconnect
        # backoff), yet no watch came of it.
        refusals = reconnect_backoff()
        # Until the set is known, why each service URL cannot serve: once every one failed,
        # the start fails at once rather than retrying until its time is up.
        unusable: dict[str, ClientError] = {}
        while self._ended is None:
            url = next(self._urls)
            try:
                connection = await self._pool.get(url)
            except ClientError as error:
                if not self._set.known and isinstance(error, Unauthorized):
                    self._end(error)  # the token is refused: waiting changes nothing
                    return
                if (
                    not self._set.known
                    and isinstance(error, ConnectionFailed)
                    and self._all_unusable(unusable, url, error)
                ):
                    return
                log.debug("watch of namespace %s: %s", self.namespace, error)
                await asyncio.sleep(self._backoff.next_delay())
                continue
            if not speaks(connection.protocol_version, WatchNamespace):
                too_old = _too_old(connection)
                if not self._set.known and self._all_unusable(unusable, url, too_old):
                    return
                log.warning("watch of namespace %s: %s", self.namespace, too_old.message)
                await asyncio.sleep(self._backoff.next_delay())
                continue
            ended = await self._watch_once(connection)
            if ended is None:
                refusals.reset()
                delay = self._backoff.next_delay()
            elif ended.code in FINAL_CODES:
                self._end(error_for(ended.code, ended.message))
                return
            else:  # ServiceNotReady: another broker (the next URL) may serve it
                log.info(
                    "watch of namespace %s ended by %s: %s %s",
                    self.namespace,
                    url,
                    ended.code,
                    ended.message,
                )
                delay = refusals.next_delay()
            await asyncio.sleep(delay)

    async def _watch_once(self, connection: BrokerConnection) -> WatchEnded | None:
        """Open the watch on ``connection`` and serve it until it is over: the broker's
        WatchEnded, or None when the connection was lost (or the watch must be opened again)."""
        watch_id = connection.new_id(Channel.NAMESPACE_WATCH)
        self._session_over = asyncio.Event()
        self._session_end = None
        self._set.begin_watch()
        connection.attach(Channel.NAMESPACE_WATCH, watch_id, self)
        watch = WatchNamespace(
            watch_id, self.namespace, dict(self.filters), self._set.rewatch_hash()
        )
        # Open from the moment it may have been written, so that a close() cancelling the
        # send still tells the broker.
        self._open_on = (connection, watch_id)
        try:
            await connection.send(watch)
            self._backoff.reset()  # written: the watch is up, whether or not a snapshot comes
            await self._session_over.wait()
            return self._session_end
        except ClientError as error:
            log.debug("watch of namespace %s interrupted: %s", self.namespace, error)
            return None
        finally:
            connection.detach(Channel.NAMESPACE_WATCH, watch_id)
            if self._open_on == (connection, watch_id):
                self._open_on = None

    def _all_unusable(self, unusable: dict[str, ClientError], url: str, why: ClientError) -> bool:
        """Note why ``url`` cannot serve; once every URL cannot, end the watch with why."""
        unusable[url] = why
        if len(unusable) < self._url_count:
            return False
        self._end(_no_broker(self.namespace, unusable))
        return True

    # -- pushes ---------------------------------------------------------------------------------

    def on_push(self, command: Command) -> None:
        if not isinstance(command, NamespaceUpdate):
            log.debug("namespace watch ignores %s", type(command).__name__)
            return
        if self._session_over.is_set() or self._ended is not None:
            return  # what the broker sent before it heard the watch is over
        if command.ended is not None:
            self._session_end = command.ended
            self._open_on = None  # the broker holds nothing of it any more
            self._session_over.set()
            return
        initial = not self._set.known
        try:
            if command.snapshot is not None:
                change = self._set.snapshot(command.snapshot)
            else:
                assert command.diff is not None
                change = self._set.diff(command.diff)
        except OutOfOrderUpdate as error:
            self._watch_again(str(error))
            return
        if initial:
            if self._set.known:
                self._ready.set()
        elif change is not None:
            self._deliver(change)

    def on_connection_lost(self, error: ClientError) -> None:
        self._open_on = None
        self._session_over.set()

    def _watch_again(self, why: str) -> None:
        """Close the broker's watch and open another, whose hash resynchronises the set."""
        log.warning("watch of namespace %s: %s; watching again", self.namespace, why)
        if self._open_on is not None:
            connection, watch_id = self._open_on
            self._open_on = None
            connection.request_soon(NamespaceWatchClose(0, watch_id))
        self._session_over.set()

    def _deliver(self, change: TopicSetChange) -> None:
        for on_change, _ in list(self._listeners):
            try:
                on_change(change)
            except Exception:
                log.exception("a change listener of the watch of %s failed", self.namespace)

    def _end(self, error: ClientError) -> None:
        self._ended = error
        self._ready.set()
        self._session_over.set()
        for _, on_end in list(self._listeners):
            if on_end is None:
                continue
            try:
                on_end(error)
            except Exception:
                log.exception("an end listener of the watch of %s failed", self.namespace)


async def _changes(
    queue: asyncio.Queue[TopicSetChange | ClientError], stop: Callable[[], None]
) -> AsyncGenerator[TopicSetChange, None]:
    try:
        while True:
            item = await queue.get()
            if isinstance(item, ClientClosed):
                return
            if isinstance(item, ClientError):
                raise item
            yield item
    finally:
        stop()


def _too_old(connection: BrokerConnection) -> UnsupportedVersion:
    return UnsupportedVersion(
        f"{connection.url} (broker {connection.broker_name or 'unnamed'}) agreed on protocol "
        f"version {connection.protocol_version}; a namespace watch needs version "
        f"{INTRODUCED_IN[WatchNamespace.TYPE]} (this client speaks {', '.join(map(str, SUPPORTED_VERSIONS))})",
        ErrorCode.UNSUPPORTED_VERSION,
    )


def _no_broker(namespace: str, unusable: dict[str, ClientError]) -> ClientError:
    """One URL: its own error; several: one line, each URL with its reason. Every broker
    too old: UnsupportedVersion; else ConnectionFailed."""
    errors = list(unusable.values())
    if len(errors) == 1:
        return errors[0]
    if all(isinstance(error, UnsupportedVersion) for error in errors):
        reasons = "; ".join(error.message for error in errors)
        return UnsupportedVersion(
            f"no broker can serve a watch of namespace {namespace}: {reasons}",
            ErrorCode.UNSUPPORTED_VERSION,
        )
    reasons = "; ".join(error.message.removeprefix("cannot connect to ") for error in errors)
    return ConnectionFailed(f"cannot watch namespace {namespace} on any broker: {reasons}")
