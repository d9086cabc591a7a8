"""What the relays of consumer registrations and exclusive producer grants share.

A relayed request goes to the topic's leader, found through the endpoint annotation of the
Lease of the topic's ownership shard, over one link per controller endpoint and client connection
(:class:`ConnectionLinks`, shared by both relays of a connection). When the leader goes away
(the link drops, or it answers NotLeader) the relay asks whoever leads next, with backoff
(:func:`follow_leader`); when the client's connection ends, its relays stop and its links close.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass
from enum import Enum
from typing import Any, Generic, TypeVar

import aiohttp

from ..protocol import Command, ErrorCode
from ..store import StoreError
from ..store.informers import Informers
from .config import BrokerConfig
from .controller_link import ControllerLink, LinkLost, LinkRefused
from .errors import BrokerError

log = logging.getLogger(__name__)

Send = Callable[[Command], Awaitable[None]]  # writes a frame to the client
BACKOFF_FIRST, BACKOFF_MAX = 0.1, 2.0
# Refusals that say "ask again, perhaps elsewhere"; any other code is the final answer.
TRANSIENT = frozenset({ErrorCode.NOT_LEADER, ErrorCode.SERVICE_NOT_READY})


class ControllerLinks:
    """The broker-wide part: the informers (for the shard Leases) and one HTTP client for the
    links."""

    def __init__(self, informers: Informers, config: BrokerConfig) -> None:
        self._informers = informers
        self._config = config
        self._http: aiohttp.ClientSession | None = None
        self._finishing: set[asyncio.Task[None]] = set()

    async def start(self) -> None:
        self._http = aiohttp.ClientSession()

    async def stop(self) -> None:
        await asyncio.gather(*self._finishing, return_exceptions=True)
        if self._http is not None:
            await self._http.close()

    async def finish(self, work: Coroutine[Any, Any, None]) -> None:
        """Run ``work`` to its end even if the caller is cancelled meanwhile."""
        task = asyncio.get_running_loop().create_task(work)
        self._finishing.add(task)
        task.add_done_callback(self._finishing.discard)
        await asyncio.shield(task)

    def for_connection(self) -> ConnectionLinks:
        """The links of one client connection."""
        return ConnectionLinks(self)

    def leader_endpoint(self, namespace: str, name: str) -> str | None:
        """Where the topic's leader takes requests; None while nobody leads it. Raises
        BrokerError(TopicNotFound) when there is no such topic."""
        endpoint = self._informers.leader_endpoint(namespace, name)
        if endpoint is None and self._informers.topics.get(namespace, name) is None:
            if not self._informers.topics.synced:
                return None  # not known yet: asked again with backoff
            raise BrokerError(ErrorCode.TOPIC_NOT_FOUND, f"no topic {namespace}/{name}")
        return endpoint

    async def open_link(self, endpoint: str) -> ControllerLink:
        if self._http is None:
            raise LinkLost("the broker is not started")
        try:
            return await ControllerLink.open(
                self._http, endpoint, self._config.identity, self._config.auth_token
            )
        except LinkRefused as refusal:
            # Not the client's fault (a token mismatch between broker and controller, say).
            log.error("the controller at %s refused this broker: %s", endpoint, refusal)
            raise LinkLost(f"the controller at {endpoint} refused this broker: {refusal}") from None


class ConnectionLinks:
    """The links of one client connection: one per controller endpoint, for all its relays."""

    def __init__(self, shared: ControllerLinks) -> None:
        self._shared = shared
        self._links: dict[str, asyncio.Task[ControllerLink]] = {}
        self._stops: list[Callable[[], Awaitable[None]]] = []
        self._closed = False

    def on_close(self, stop: Callable[[], Awaitable[None]]) -> None:
        """Have ``close`` await ``stop`` (a relay's) before it closes the links."""
        self._stops.append(stop)

    async def leader(self, namespace: str, name: str) -> ControllerLink:
        """The link to the topic's leader; LinkLost while nobody leads it."""
        endpoint = self._shared.leader_endpoint(namespace, name)
        if endpoint is None:
            raise LinkLost(f"no controller leads {namespace}/{name} right now")
        opening = self._links.get(endpoint)
        if opening is not None and opening.done():
            failed = opening.cancelled() or opening.exception() is not None
            if failed or opening.result().closed:
                opening = None
        if opening is None:
            if self._closed:
                raise LinkLost("the client connection is closed")
            opening = asyncio.get_running_loop().create_task(self._shared.open_link(endpoint))
            self._links[endpoint] = opening
        return await asyncio.shield(opening)

    async def close(self) -> None:
        """The client is gone: stop the relays and close the links. The leaders keep what was
        relayed for their grace periods."""
        self._closed = True
        # The connection's handler may be cancelled while it cleans up: the links must close
        # anyway, or the controllers would keep the client's consumers and grants connected.
        await self._shared.finish(self._shut_down())

    async def _shut_down(self) -> None:
        for stop in self._stops:
            with contextlib.suppress(Exception):
                await stop()
        links, self._links = list(self._links.values()), {}
        for opening in links:
            opening.cancel()
        if links:
            await asyncio.wait(links)
        for opening in links:
            if opening.cancelled() or opening.exception() is not None:
                continue  # never opened: nothing to close
            with contextlib.suppress(Exception):
                await opening.result().close()


class Outcome(Enum):
    LOST = "lost"  # the link ended or the leader moved: ask again
    DONE = "done"  # the relayed request ended (the client gave it up, or the controller did)


class Signal(Enum):
    LOST = "lost"  # the link ended
    END = "end"  # the client asked to unregister or release


P = TypeVar("P")


class Attempt(Generic[P]):
    """One relayed request on one link: its pushes and signals, in arrival order."""

    def __init__(self) -> None:
        self.inbox: asyncio.Queue[P | Signal] = asyncio.Queue()

    def pushed(self, push: P) -> None:
        self.inbox.put_nowait(push)

    def lost(self) -> None:
        self.inbox.put_nowait(Signal.LOST)


@dataclass(eq=False, kw_only=True)
class Relayed(Generic[P]):
    """One relayed request of a client connection, under the client's ``relay_id``."""

    relay_id: int
    namespace: str
    name: str
    task: asyncio.Task[None] | None = None
    attempt: Attempt[P] | None = None  # while a leader has it


R = TypeVar("R", bound=Relayed[Any])


class ConnectionRelay(Generic[R]):
    """The relayed requests of one kind of one client connection, by id, over its ``links``;
    ``send`` writes a frame to the client."""

    def __init__(self, links: ConnectionLinks, send: Send) -> None:
        self._links = links
        self._send = send
        self._relayed: dict[int, R] = {}
        links.on_close(self._stop)

    def _spawn(self, relayed: R, work: Coroutine[Any, Any, None], name: str) -> None:
        self._relayed[relayed.relay_id] = relayed
        relayed.task = asyncio.get_running_loop().create_task(work, name=name)

    @property
    def open_count(self) -> int:
        """The requests relayed (asked for, or answered and followed) and not ended."""
        return len(self._relayed)

    def _forget(self, relayed: R) -> None:
        """Free its id (a later request may use it again)."""
        if self._relayed.get(relayed.relay_id) is relayed:
            del self._relayed[relayed.relay_id]

    async def _stop(self) -> None:
        tasks = [r.task for r in self._relayed.values() if r.task is not None]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self._relayed.clear()


async def follow_leader(
    *,
    attempt: Callable[[], Awaitable[Outcome]],
    transient: Callable[[ErrorCode], bool],
    end: Callable[[ErrorCode, str], Awaitable[None]],
    answered: Callable[[], bool],
    what: str,
    unanswered: str,
    first_timeout: float,
    nothing_to_keep: Callable[[], bool] = lambda: False,
    wakeup: asyncio.Event | None = None,
) -> None:
    """Make attempts until one is DONE or the request ends: ``end`` is called with a final
    refusal, or with ServiceNotReady once ``first_timeout`` passed unanswered (``unanswered``
    starts that message) or when ``nothing_to_keep`` says no leader need be found. ``what``
    names the request in the log; ``wakeup`` (when set) cuts a backoff short."""
    loop = asyncio.get_running_loop()
    give_up_at = loop.time() + first_timeout
    delay = BACKOFF_FIRST
    reason = "no controller answered"
    while True:
        try:
            if await attempt() is Outcome.DONE:
                return
            delay = BACKOFF_FIRST  # it was answered: the leader moved just now
            reason = "the leader went away"
        except (LinkLost, StoreError) as error:
            reason = str(error)
        except LinkRefused as refusal:
            if not transient(refusal.code):
                await end(refusal.code, refusal.message)
                return
            reason = refusal.message
        except BrokerError as refusal:  # no such topic
            await end(refusal.code, str(refusal))
            return
        if nothing_to_keep():
            await end(ErrorCode.SERVICE_NOT_READY, reason)
            return
        if not answered() and loop.time() >= give_up_at:
            await end(
                ErrorCode.SERVICE_NOT_READY,
                f"{unanswered} within {first_timeout:.0f}s: {reason}",
            )
            return
        log.info("%s: %s; retrying in %.1fs", what, reason, delay)
        pause = delay * random.uniform(0.8, 1.2)
        if wakeup is None:
            await asyncio.sleep(pause)
        else:
            wakeup.clear()
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(pause):
                    await wakeup.wait()
        delay = min(delay * 2, BACKOFF_MAX)
