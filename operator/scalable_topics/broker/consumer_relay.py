"""Stream and checkpoint consumers register through any broker, which relays to the controller.

A client's RegisterConsumer is relayed to the topic's leader, found through the endpoint
annotation of the topic's controller Lease, over one link per controller endpoint and client
connection (``controller_link.py``). The client's Success comes once the leader has persisted
the registration; its assignments follow as ConsumerAssignment pushes under the client's
registration id. An assignment older than the last one relayed (by term, then layout epoch) is
dropped (Pulsar issue #26273): a deposed leader's late push never reaches the client. Pushes of
one leader arrive in order on one link, so an equal (term, epoch) is a rebalance, not a replay.

When the leader goes away (the link drops, or it answers NotLeader) the relay reads the Lease
again and registers anew with whoever leads, with backoff, for as long as the client stays; the
new leader kept the registration (seed: Consumer Session Lifecycle), so nothing moves. When the
client's connection ends, its links close and the controller starts the grace periods; an
explicit UnregisterConsumer is the only way to leave at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass
from enum import Enum
from typing import Any

import aiohttp

from ..model.resources import ScalableTopic, controller_lease_name
from ..protocol import (
    Command,
    ConsumerAssignment,
    Error,
    ErrorCode,
    RegisterConsumer,
    RegistrationClosed,
    Success,
    UnregisterConsumer,
)
from ..store import NotFound, Store, StoreError
from ..store.kinds import LEASE
from .config import BrokerConfig
from .controller_link import ControllerLink, LinkLost, LinkRefused, Push
from .errors import BrokerError
from .registry import split_topic
from .topic_view import controller_endpoint

log = logging.getLogger(__name__)

Send = Callable[[Command], Awaitable[None]]

# A first registration that finds no leader for this long is refused with ServiceNotReady;
# once accepted, a registration follows failovers for as long as its client stays.
FIRST_REGISTRATION_TIMEOUT = 30.0
_BACKOFF_FIRST, _BACKOFF_MAX = 0.1, 2.0
# Refusals that say "ask again, perhaps elsewhere"; any other code is the final answer.
_TRANSIENT = frozenset({ErrorCode.NOT_LEADER, ErrorCode.SERVICE_NOT_READY})


class ConsumerRelays:
    """The broker-wide part: the store (for the Leases) and one HTTP client for the links."""

    def __init__(self, store: Store, config: BrokerConfig) -> None:
        self._store = store
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

    def for_connection(self, send: Send) -> ConsumerRelay:
        """The relay of one client connection; ``send`` writes a frame to the client."""
        return ConsumerRelay(self, send)

    async def leader_endpoint(self, namespace: str, name: str) -> str | None:
        """Where the topic's leader takes registrations; None while nobody leads it. Raises
        BrokerError(TopicNotFound) when there is no such topic."""
        try:
            lease = await self._store.get(LEASE.kind, namespace, controller_lease_name(name))
        except NotFound:
            lease = None
        endpoint = controller_endpoint(lease)
        if endpoint is None:
            try:
                await self._store.get(ScalableTopic.KIND, namespace, name)
            except NotFound:
                raise BrokerError(
                    ErrorCode.TOPIC_NOT_FOUND, f"no topic {namespace}/{name}"
                ) from None
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


class _Outcome(Enum):
    LOST = "lost"  # the link ended or the leader moved: register again
    DONE = "done"  # the registration ended (left, or closed by the controller)


class _Lost:
    pass


class _Leave:
    pass


_LOST, _LEAVE = _Lost(), _Leave()


class _Attempt:
    """One registration on one link: its pushes and control signals, in arrival order."""

    def __init__(self) -> None:
        self.inbox: asyncio.Queue[Push | _Lost | _Leave] = asyncio.Queue()

    def pushed(self, push: Push) -> None:
        self.inbox.put_nowait(push)

    def lost(self) -> None:
        self.inbox.put_nowait(_LOST)


@dataclass(eq=False)
class _Registration:
    command: RegisterConsumer
    namespace: str
    name: str
    task: asyncio.Task[None] | None = None
    attempt: _Attempt | None = None
    accepted: bool = False
    last: tuple[int, int] | None = None  # (term, layout epoch) of the last relayed assignment
    leaving: list[int] | None = None  # request ids of UnregisterConsumer waiting for an answer


class ConsumerRelay:
    """The relayed registrations of one client connection."""

    def __init__(self, relays: ConsumerRelays, send: Send) -> None:
        self._relays = relays
        self._send = send
        self._registrations: dict[int, _Registration] = {}
        self._links: dict[str, asyncio.Task[ControllerLink]] = {}
        self._closed = False

    async def register(self, command: RegisterConsumer) -> None:
        """Start relaying; the answer (Success or Error) comes later from the relay task."""
        if command.registration_id in self._registrations:
            raise BrokerError(
                ErrorCode.ID_IN_USE,
                f"registration id {command.registration_id} is in use on this connection",
            )
        namespace, name = split_topic(command.topic)
        if not command.subscription or not command.consumer_name:
            raise BrokerError(
                ErrorCode.INVALID_REQUEST, "a registration names its subscription and consumer"
            )
        registration = _Registration(command, namespace, name)
        self._registrations[command.registration_id] = registration
        registration.task = asyncio.get_running_loop().create_task(
            self._relay(registration), name=f"consumer relay {command.registration_id}"
        )

    async def unregister(self, command: UnregisterConsumer) -> None:
        """Leave: answered once the leader removed the registration."""
        registration = self._registrations.get(command.registration_id)
        if registration is None or not registration.accepted:
            raise BrokerError(
                ErrorCode.UNKNOWN_REGISTRATION,
                f"registration id {command.registration_id} is not open on this connection",
            )
        if registration.leaving is None:
            registration.leaving = []
        registration.leaving.append(command.request_id)
        if registration.attempt is not None:
            registration.attempt.inbox.put_nowait(_LEAVE)

    async def close(self) -> None:
        """The client is gone: stop relaying and close the links. The leaders keep the
        registrations for their grace period."""
        self._closed = True
        # The connection's handler may be cancelled while it cleans up: the links must close
        # anyway, or the controllers would keep the consumers connected.
        await self._relays.finish(self._shut_down())

    async def _shut_down(self) -> None:
        tasks = [r.task for r in self._registrations.values() if r.task is not None]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self._registrations.clear()
        links, self._links = list(self._links.values()), {}
        for opening in links:
            opening.cancel()
        for opening in links:
            with contextlib.suppress(Exception, asyncio.CancelledError):
                await (await opening).close()

    # -- one registration -----------------------------------------------------------------------

    async def _relay(self, registration: _Registration) -> None:
        loop = asyncio.get_running_loop()
        give_up_at = loop.time() + FIRST_REGISTRATION_TIMEOUT
        delay = _BACKOFF_FIRST
        reason = "no controller answered"
        try:
            while True:
                try:
                    outcome = await self._attempt(registration)
                    if outcome is _Outcome.DONE:
                        return
                    delay = _BACKOFF_FIRST  # it was registered: the leader moved just now
                    reason = "the leader went away"
                except (LinkLost, StoreError) as error:
                    reason = str(error)
                except LinkRefused as refusal:
                    if not self._transient(registration, refusal.code):
                        await self._end(registration, refusal.code, refusal.message)
                        return
                    reason = refusal.message
                except BrokerError as refusal:  # no such topic
                    await self._end(registration, refusal.code, str(refusal))
                    return
                if not registration.accepted and loop.time() >= give_up_at:
                    await self._end(
                        registration,
                        ErrorCode.SERVICE_NOT_READY,
                        f"no controller of {registration.command.topic} took the registration "
                        f"within {FIRST_REGISTRATION_TIMEOUT:.0f}s: {reason}",
                    )
                    return
                log.info(
                    "registration %d of %s: %s; retrying in %.1fs",
                    registration.command.registration_id,
                    registration.command.topic,
                    reason,
                    delay,
                )
                await asyncio.sleep(delay * random.uniform(0.8, 1.2))
                delay = min(delay * 2, _BACKOFF_MAX)
        finally:
            registration.attempt = None
            self._forget(registration)

    def _forget(self, registration: _Registration) -> None:
        if self._registrations.get(registration.command.registration_id) is registration:
            del self._registrations[registration.command.registration_id]

    def _transient(self, registration: _Registration, code: ErrorCode) -> bool:
        # Once registered, ConsumerBusy means the leader has not yet noticed our previous link
        # drop; before that, the name is taken by someone else.
        return code in _TRANSIENT or (registration.accepted and code is ErrorCode.CONSUMER_BUSY)

    async def _attempt(self, registration: _Registration) -> _Outcome:
        command = registration.command
        endpoint = await self._relays.leader_endpoint(registration.namespace, registration.name)
        if endpoint is None:
            raise LinkLost(f"no controller leads {command.topic} right now")
        link = await self._link(endpoint)
        attempt = _Attempt()
        link.listen(command.registration_id, attempt)
        try:
            await link.request(
                RegisterConsumer(
                    link.next_request_id(),
                    command.registration_id,
                    command.topic,
                    command.subscription,
                    command.consumer_name,
                )
            )
            if not registration.accepted:
                registration.accepted = True
                await self._send(Success(command.request_id))
            registration.attempt = attempt
            if registration.leaving:
                attempt.inbox.put_nowait(_LEAVE)
            return await self._follow(registration, link, attempt)
        finally:
            registration.attempt = None
            link.unlisten(command.registration_id, attempt)

    async def _follow(
        self, registration: _Registration, link: ControllerLink, attempt: _Attempt
    ) -> _Outcome:
        registration_id = registration.command.registration_id
        while True:
            item = await attempt.inbox.get()
            if isinstance(item, ConsumerAssignment):
                version = (item.term, item.layout_epoch)
                if registration.last is not None and version < registration.last:
                    log.info(
                        "registration %d: dropped a stale assignment of term %d epoch %d "
                        "(relayed term %d epoch %d already)",
                        registration_id,
                        item.term,
                        item.layout_epoch,
                        *registration.last,
                    )
                    continue
                registration.last = version
                await self._send(
                    ConsumerAssignment(registration_id, item.term, item.layout_epoch, item.segments)
                )
            elif isinstance(item, RegistrationClosed):
                if item.code in _TRANSIENT:
                    return _Outcome.LOST
                await self._end(registration, item.code, item.message)
                return _Outcome.DONE
            elif isinstance(item, _Lost):
                return _Outcome.LOST
            elif registration.leaving and await self._leave(registration, link):
                return _Outcome.DONE

    async def _leave(self, registration: _Registration, link: ControllerLink) -> bool:
        """Ask the leader to remove the registration; True once it did."""
        waiting, registration.leaving = registration.leaving or [], None
        try:
            await link.request(
                UnregisterConsumer(link.next_request_id(), registration.command.registration_id)
            )
        except LinkRefused as refusal:
            for request_id in waiting:
                await self._send(Error(request_id, refusal.code, refusal.message))
            return False
        except LinkLost:
            registration.leaving = waiting  # asked again of whoever leads next
            raise
        self._forget(registration)  # its id is free again before the client hears it left
        for request_id in waiting:
            await self._send(Success(request_id))
        return True

    async def _end(self, registration: _Registration, code: ErrorCode, message: str) -> None:
        """The registration is over: refuse it, or tell the client it was closed."""
        command = registration.command
        self._forget(registration)
        if registration.accepted:
            await self._send(RegistrationClosed(command.registration_id, code, message))
        else:
            await self._send(Error(command.request_id, code, message))
        for request_id in registration.leaving or []:
            await self._send(Error(request_id, code, message))

    async def _link(self, endpoint: str) -> ControllerLink:
        opening = self._links.get(endpoint)
        if opening is not None and opening.done():
            failed = opening.cancelled() or opening.exception() is not None
            if failed or opening.result().closed:
                opening = None
        if opening is None:
            if self._closed:
                raise LinkLost("the client connection is closed")
            opening = asyncio.get_running_loop().create_task(self._relays.open_link(endpoint))
            self._links[endpoint] = opening
        return await asyncio.shield(opening)
