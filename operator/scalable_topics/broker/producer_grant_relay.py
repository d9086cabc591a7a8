"""Topic-wide exclusive producers acquire their grant through any broker, which relays it.

A client's AcquireExclusive goes to the topic's leader (found through the endpoint annotation
of the topic's controller Lease) over one link per controller endpoint and client connection,
exactly as consumer registrations do. The leader answers once the grant is persisted and every
Active segment is fenced (ExclusiveGranted), or, for a WaitForExclusive request that must wait,
with Success and a later ExclusiveGranted push; the relay passes both on under the client's
grant id. ExclusiveRevoked (taken over with fencing, topic deleted) ends the grant.

When the leader goes away (the link drops, or it answers or revokes with NotLeader) the relay
asks whoever leads next, with backoff, for as long as the client stays: a holder asks with the
epoch it was granted, which the new leader honours within the grace period, so nothing changes
for the client; a waiter takes its place in the new leader's line. When the client's connection
ends, its links close and the leader starts the holder's grace period; ReleaseExclusive is the
way to give the topic up at once (or to stop waiting).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
from dataclasses import dataclass, field
from enum import Enum

from ..model.exclusive_grants import EXCLUSIVE_MODES
from ..protocol import (
    AcquireExclusive,
    Error,
    ErrorCode,
    ExclusiveGranted,
    ExclusiveRevoked,
    ReleaseExclusive,
    Success,
)
from ..store import StoreError
from .consumer_relay import ConsumerRelays, Send
from .controller_link import ControllerLink, GrantPush, LinkLost, LinkRefused
from .errors import BrokerError
from .registry import split_topic

log = logging.getLogger(__name__)

# A first request that finds no leader for this long is refused with ServiceNotReady; once
# answered, a grant (or a wait) follows failovers for as long as its client stays.
FIRST_GRANT_TIMEOUT = 30.0
_BACKOFF_FIRST, _BACKOFF_MAX = 0.1, 2.0
_TRANSIENT = frozenset({ErrorCode.NOT_LEADER, ErrorCode.SERVICE_NOT_READY})


class _Outcome(Enum):
    LOST = "lost"  # the link ended or the leader moved: ask again
    DONE = "done"  # the grant ended (released, or revoked by the controller)


class _Lost:
    pass


class _Release:
    pass


_LOST, _RELEASE = _Lost(), _Release()


class _Attempt:
    """One request on one link: its pushes and control signals, in arrival order."""

    def __init__(self) -> None:
        self.inbox: asyncio.Queue[GrantPush | _Lost | _Release] = asyncio.Queue()

    def pushed(self, push: GrantPush) -> None:
        self.inbox.put_nowait(push)

    def lost(self) -> None:
        self.inbox.put_nowait(_LOST)


@dataclass(eq=False)
class _Grant:
    command: AcquireExclusive
    namespace: str
    name: str
    task: asyncio.Task[None] | None = None
    attempt: _Attempt | None = None
    answered: bool = False  # the client was told: granted, or waiting (Success)
    epoch: int | None = None  # the epoch granted, once granted
    releasing: list[int] | None = None  # request ids of ReleaseExclusive waiting for an answer
    wakeup: asyncio.Event = field(default_factory=asyncio.Event)


class ProducerGrantRelay:
    """The relayed exclusive producer grants of one client connection. ``relays`` is the
    broker-wide part it shares with consumer registrations (Lease lookup, HTTP client)."""

    def __init__(self, relays: ConsumerRelays, send: Send) -> None:
        self._relays = relays
        self._send = send
        self._grants: dict[int, _Grant] = {}
        self._links: dict[str, asyncio.Task[ControllerLink]] = {}
        self._closed = False

    async def acquire(self, command: AcquireExclusive) -> None:
        """Start relaying; the answer comes later from the relay task."""
        if command.grant_id in self._grants:
            raise BrokerError(
                ErrorCode.ID_IN_USE, f"grant id {command.grant_id} is in use on this connection"
            )
        namespace, name = split_topic(command.topic)
        if command.access_mode not in EXCLUSIVE_MODES:
            raise BrokerError(
                ErrorCode.INVALID_REQUEST,
                f"{command.access_mode} producers need no grant: they open on each segment",
            )
        if not command.producer_name:
            raise BrokerError(ErrorCode.INVALID_REQUEST, "an exclusive producer must have a name")
        grant = _Grant(command, namespace, name)
        self._grants[command.grant_id] = grant
        grant.task = asyncio.get_running_loop().create_task(
            self._relay(grant), name=f"producer grant relay {command.grant_id}"
        )

    async def release(self, command: ReleaseExclusive) -> None:
        """Give the topic up, or stop waiting: answered once the leader has let it go."""
        grant = self._grants.get(command.grant_id)
        if grant is None:
            raise BrokerError(
                ErrorCode.UNKNOWN_GRANT,
                f"grant id {command.grant_id} is not open on this connection",
            )
        if grant.releasing is None:
            grant.releasing = []
        grant.releasing.append(command.request_id)
        if grant.attempt is not None:
            grant.attempt.inbox.put_nowait(_RELEASE)
        grant.wakeup.set()

    async def close(self) -> None:
        """The client is gone: stop relaying and close the links. The leaders keep a holder's
        grant for their grace period."""
        self._closed = True
        await self._relays.finish(self._shut_down())

    async def _shut_down(self) -> None:
        tasks = [g.task for g in self._grants.values() if g.task is not None]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self._grants.clear()
        links, self._links = list(self._links.values()), {}
        for opening in links:
            opening.cancel()
        for opening in links:
            with contextlib.suppress(Exception, asyncio.CancelledError):
                await (await opening).close()

    # -- one grant ------------------------------------------------------------------------------

    async def _relay(self, grant: _Grant) -> None:
        loop = asyncio.get_running_loop()
        give_up_at = loop.time() + FIRST_GRANT_TIMEOUT
        delay = _BACKOFF_FIRST
        reason = "no controller answered"
        try:
            while True:
                try:
                    if await self._attempt(grant) is _Outcome.DONE:
                        return
                    delay = _BACKOFF_FIRST  # it was answered: the leader moved just now
                    reason = "the leader went away"
                except (LinkLost, StoreError) as error:
                    reason = str(error)
                except LinkRefused as refusal:
                    if not self._transient(grant, refusal.code):
                        await self._end(grant, refusal.code, refusal.message)
                        return
                    reason = refusal.message
                except BrokerError as refusal:  # no such topic
                    await self._end(grant, refusal.code, str(refusal))
                    return
                if grant.releasing and grant.epoch is None:
                    # Nothing was granted that a leader could keep: giving up needs nobody.
                    await self._end(grant, ErrorCode.SERVICE_NOT_READY, reason)
                    return
                if not grant.answered and loop.time() >= give_up_at:
                    await self._end(
                        grant,
                        ErrorCode.SERVICE_NOT_READY,
                        f"no controller of {grant.command.topic} took the request within "
                        f"{FIRST_GRANT_TIMEOUT:.0f}s: {reason}",
                    )
                    return
                log.info(
                    "grant %d of %s: %s; retrying in %.1fs",
                    grant.command.grant_id,
                    grant.command.topic,
                    reason,
                    delay,
                )
                grant.wakeup.clear()
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(delay * random.uniform(0.8, 1.2)):
                        await grant.wakeup.wait()
                delay = min(delay * 2, _BACKOFF_MAX)
        finally:
            grant.attempt = None
            self._forget(grant)

    def _transient(self, grant: _Grant, code: ErrorCode) -> bool:
        # A holder asking again gets ProducerBusy until the leader has noticed that its
        # previous link dropped; for anyone else it is the answer.
        return code in _TRANSIENT or (grant.epoch is not None and code is ErrorCode.PRODUCER_BUSY)

    async def _attempt(self, grant: _Grant) -> _Outcome:
        command = grant.command
        endpoint = await self._relays.leader_endpoint(grant.namespace, grant.name)
        if endpoint is None:
            raise LinkLost(f"no controller leads {command.topic} right now")
        link = await self._link(endpoint)
        attempt = _Attempt()
        link.listen_grant(command.grant_id, attempt)
        try:
            reply = await link.request(
                AcquireExclusive(
                    link.next_request_id(),
                    command.grant_id,
                    command.topic,
                    command.producer_name,
                    command.access_mode,
                    grant.epoch if grant.epoch is not None else command.producer_epoch,
                )
            )
            if isinstance(reply, ExclusiveGranted):
                await self._granted(grant, reply.producer_epoch)
            elif isinstance(reply, Success):
                await self._queued(grant)
            else:
                await link.close()
                raise LinkLost(f"{endpoint} answered AcquireExclusive with {reply}")
            grant.attempt = attempt
            if grant.releasing:
                attempt.inbox.put_nowait(_RELEASE)
            return await self._follow(grant, link, attempt)
        finally:
            grant.attempt = None
            link.unlisten_grant(command.grant_id, attempt)

    async def _follow(self, grant: _Grant, link: ControllerLink, attempt: _Attempt) -> _Outcome:
        while True:
            item = await attempt.inbox.get()
            if isinstance(item, ExclusiveGranted):
                await self._granted(grant, item.producer_epoch)
            elif isinstance(item, ExclusiveRevoked):
                if item.code in _TRANSIENT:
                    return _Outcome.LOST
                await self._end(grant, item.code, item.message)
                return _Outcome.DONE
            elif isinstance(item, _Lost):
                return _Outcome.LOST
            elif grant.releasing and await self._release(grant, link):
                return _Outcome.DONE

    async def _granted(self, grant: _Grant, epoch: int) -> None:
        previous, grant.epoch = grant.epoch, epoch
        if grant.releasing:
            return  # the client gave up: it is told the release, not the grant
        if not grant.answered:
            grant.answered = True
            await self._send(
                ExclusiveGranted(grant.command.grant_id, grant.command.request_id, epoch)
            )
        elif previous != epoch:  # granted after waiting
            await self._send(ExclusiveGranted(grant.command.grant_id, None, epoch))

    async def _queued(self, grant: _Grant) -> None:
        if not grant.answered and not grant.releasing:
            grant.answered = True
            await self._send(Success(grant.command.request_id))

    async def _release(self, grant: _Grant, link: ControllerLink) -> bool:
        """Ask the leader to let the grant go; True once it did."""
        waiting, grant.releasing = grant.releasing or [], None
        try:
            await link.request(ReleaseExclusive(link.next_request_id(), grant.command.grant_id))
        except LinkRefused as refusal:
            if refusal.code in _TRANSIENT:
                grant.releasing = waiting  # asked again of whoever leads next
                raise
            if refusal.code is not ErrorCode.UNKNOWN_GRANT:  # unknown: it is gone already
                for request_id in waiting:
                    await self._send(Error(request_id, refusal.code, refusal.message))
                return False
        except LinkLost:
            grant.releasing = waiting
            raise
        self._forget(grant)  # its id is free again before the client hears it was released
        for request_id in waiting:
            await self._send(Success(request_id))
        return True

    async def _end(self, grant: _Grant, code: ErrorCode, message: str) -> None:
        """The grant is over: refuse it, tell the client it was revoked, or (if the client
        was giving it up) answer the release."""
        command = grant.command
        self._forget(grant)
        if grant.releasing:
            for request_id in grant.releasing:
                await self._send(Success(request_id))
        elif grant.answered:
            await self._send(ExclusiveRevoked(command.grant_id, code, message))
        else:
            await self._send(Error(command.request_id, code, message))

    def _forget(self, grant: _Grant) -> None:
        if self._grants.get(grant.command.grant_id) is grant:
            del self._grants[grant.command.grant_id]

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
