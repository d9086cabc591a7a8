"""A DAG watch session for one topic, kept open across broker failures.

Any broker serves a watch, so the watcher asks the service URLs in turn. Every update is the
whole DAG; the watcher keeps the newest (epochs never go back) and wakes whoever waits for a
change. A drop is followed by a re-watch with jittered backoff, reset once a watch is answered.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
from collections.abc import Callable, Sequence

from ..protocol import Command, ErrorCode, TopicUpdate, WatchClose, WatchClosed, WatchTopic
from ..tasks import cancel_and_wait
from .backoff import Backoff
from .connection import BrokerConnection, Channel
from .errors import (
    ClientClosed,
    ClientError,
    ConnectionFailed,
    NotFound,
    Timeout,
    TooManyOpen,
    Unauthorized,
)
from .pool import ConnectionPool
from .topic_layout import TopicLayout

log = logging.getLogger(__name__)

LayoutListener = Callable[[TopicLayout], None]


class TopicWatcher:
    def __init__(self, topic: str, pool: ConnectionPool, service_urls: Sequence[str]) -> None:
        self.topic = topic
        self._pool = pool
        self._urls = itertools.cycle(service_urls)
        self._url_count = len(set(service_urls))
        self._layout: TopicLayout | None = None
        self._changed = asyncio.Event()
        self._ended: ClientError | None = None
        self._listeners: list[LayoutListener] = []
        self._task: asyncio.Task[None] | None = None
        self._session_over: asyncio.Event = asyncio.Event()
        self._connection: BrokerConnection | None = None
        self._watch_id = 0

    @property
    def layout(self) -> TopicLayout:
        """The newest layout; only valid after :meth:`start` returned."""
        if self._ended is not None:
            raise self._ended
        assert self._layout is not None, "start() first"
        return self._layout

    @property
    def ended(self) -> bool:
        """Ended for good: closed, or the topic was deleted (or never existed)."""
        return self._ended is not None

    async def start(self, wait_seconds: float) -> None:
        """Watch until the first layout arrives. NotFound when the topic does not exist,
        ConnectionFailed as soon as no service URL could be connected to (each tried once,
        within the pool's connect timeout), Unauthorized for a token the brokers refuse,
        Timeout when no broker answered in time."""
        self._task = asyncio.get_running_loop().create_task(self._run(), name=f"watch {self.topic}")
        try:
            async with asyncio.timeout(wait_seconds):
                await self.wait_for(lambda layout: True)
        except TimeoutError:
            await self.close()
            raise Timeout(
                f"no broker answered a watch of {self.topic} in {wait_seconds:g} s; "
                "is the service running?"
            ) from None
        except BaseException:
            await self.close()
            raise

    def listen(self, listener: LayoutListener) -> Callable[[], None]:
        """Call ``listener`` with every new layout; returns the function that stops it."""
        self._listeners.append(listener)
        return lambda: self._listeners.remove(listener) if listener in self._listeners else None

    async def wait_for(self, predicate: Callable[[TopicLayout], bool]) -> TopicLayout:
        """The first layout (the current one included) for which ``predicate`` holds."""
        while True:
            if self._ended is not None:
                raise self._ended
            changed = self._changed
            if self._layout is not None and predicate(self._layout):
                return self._layout
            await changed.wait()

    async def close(self) -> None:
        if self._ended is None:
            self._ended = ClientClosed(f"the watch of {self.topic} was closed")
        self._wake()
        # Read before the session task ends: its cleanup forgets the connection, and the
        # broker would hold the watch until the connection closes.
        connection, watch_id = self._connection, self._watch_id
        if self._task is not None:
            await cancel_and_wait(self._task)
        if connection is not None and connection.is_open:
            connection.detach(Channel.WATCH, watch_id)
            with contextlib.suppress(ClientError):
                await connection.request(WatchClose(0, watch_id), wait_seconds=5)

    # -- the session ----------------------------------------------------------------------------

    async def _run(self) -> None:
        backoff = Backoff()
        # Until the first layout, why each service URL could not be connected to: once every
        # one failed, the start fails at once rather than retrying until its time is up.
        unreachable: dict[str, ConnectionFailed] = {}
        while self._ended is None:
            url = next(self._urls)
            try:
                connection = await self._pool.get(url)
            except ClientError as error:
                if self._layout is None and isinstance(error, Unauthorized):
                    self._end(error)  # the token is refused: waiting changes nothing
                    return
                if self._layout is None and isinstance(error, ConnectionFailed):
                    unreachable[url] = error
                    if len(unreachable) == self._url_count:
                        self._end(_no_broker(unreachable))
                        return
                log.debug("watch of %s: %s", self.topic, error)
                await asyncio.sleep(backoff.next_delay())
                continue
            try:
                await self._watch_once(connection, backoff)
            except NotFound as error:  # never created, or deleted while we were away
                self._end(error)
                return
            except Unauthorized as error:  # a wrong token: asking again gets the same answer
                self._end(error)
                return
            except TooManyOpen as error:  # the application holds the broker's limit open
                self._end(error)
                return
            except ClientError as error:
                log.debug("watch of %s interrupted: %s", self.topic, error)
            await asyncio.sleep(backoff.next_delay())

    async def _watch_once(self, connection: BrokerConnection, backoff: Backoff) -> None:
        self._watch_id = connection.new_id(Channel.WATCH)
        self._connection = connection
        self._session_over = asyncio.Event()
        connection.attach(Channel.WATCH, self._watch_id, self)
        try:
            reply = await connection.request(WatchTopic(0, self._watch_id, self.topic))
            assert isinstance(reply, TopicUpdate)
            self._update(reply)
            backoff.reset()
            await self._session_over.wait()
        finally:
            connection.detach(Channel.WATCH, self._watch_id)
            self._connection = None

    # -- pushes ---------------------------------------------------------------------------------

    def on_push(self, command: Command) -> None:
        if isinstance(command, TopicUpdate):
            self._update(command)
        elif isinstance(command, WatchClosed):
            if command.code is ErrorCode.TOPIC_NOT_FOUND:
                self._end(NotFound(f"topic {self.topic} was deleted", command.code))
            self._session_over.set()
        else:
            log.debug("watch of %s ignores %s", self.topic, type(command).__name__)

    def on_connection_lost(self, error: ClientError) -> None:
        self._session_over.set()

    def _update(self, update: TopicUpdate) -> None:
        if self._layout is not None and update.epoch < self._layout.epoch:
            return  # a broker whose store lags behind another's
        self._layout = TopicLayout.from_update(update)
        for listener in list(self._listeners):
            try:
                listener(self._layout)
            except Exception:
                log.exception("a layout listener of %s failed", self.topic)
        self._wake()

    def _end(self, error: ClientError) -> None:
        self._ended = error
        self._session_over.set()
        self._wake()

    def _wake(self) -> None:
        self._changed.set()
        self._changed = asyncio.Event()


def _no_broker(unreachable: dict[str, ConnectionFailed]) -> ConnectionFailed:
    """One URL: its own error (a ConnectTimeout stays one); several: one line, each URL with
    its reason (the pool's messages name it already)."""
    if len(unreachable) == 1:
        return next(iter(unreachable.values()))
    reasons = "; ".join(
        error.message.removeprefix("cannot connect to ") for error in unreachable.values()
    )
    return ConnectionFailed(f"cannot connect to any broker: {reasons}")
