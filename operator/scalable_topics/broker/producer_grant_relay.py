"""Topic-wide exclusive producers acquire their grant through any broker, which relays it.

A client's AcquireExclusive goes to the topic's leader (found through the endpoint annotation
of the topic's controller Lease) over the client connection's link to that controller, which
it shares with consumer registrations (``controller_links.py``). The leader answers once the
grant is persisted and every Active segment is fenced (ExclusiveGranted), or, for a
WaitForExclusive request that must wait, with Success and a later ExclusiveGranted push; the
relay passes both on under the client's grant id. ExclusiveRevoked (taken over with fencing,
topic deleted) ends the grant.

When the leader goes away (the link drops, or it answers or revokes with NotLeader) the relay
asks whoever leads next, with backoff, for as long as the client stays: a holder asks with the
epoch it was granted, which the new leader honours within the grace period, so nothing changes
for the client; a waiter takes its place in the new leader's line. When the client's connection
ends, its links close and the leader starts the holder's grace period; ReleaseExclusive is the
way to give the topic up at once (or to stop waiting).
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field

from ..model.exclusive_grants import EXCLUSIVE_MODES
from ..model.resources import producer_name_problem
from ..protocol import (
    AcquireExclusive,
    Error,
    ErrorCode,
    ExclusiveGranted,
    ExclusiveRevoked,
    ReleaseExclusive,
    Success,
)
from .controller_link import ControllerLink, GrantPush, LinkLost, LinkRefused
from .controller_links import (
    TRANSIENT,
    Attempt,
    ConnectionRelay,
    Outcome,
    Relayed,
    Signal,
    follow_leader,
)
from .errors import BrokerError
from .registry import split_topic

log = logging.getLogger(__name__)

# A first request that finds no leader for this long is refused with ServiceNotReady; once
# answered, a grant (or a wait) follows failovers for as long as its client stays.
FIRST_GRANT_TIMEOUT = 30.0


@dataclass(eq=False, kw_only=True)
class _Grant(Relayed[GrantPush]):
    command: AcquireExclusive
    answered: bool = False  # the client was told: granted, or waiting (Success)
    epoch: int | None = None  # the epoch granted, once granted
    releasing: list[int] | None = None  # request ids of ReleaseExclusive waiting for an answer
    wakeup: asyncio.Event = field(default_factory=asyncio.Event)


class ProducerGrantRelay(ConnectionRelay[_Grant]):
    """The relayed exclusive producer grants of one client connection; the leaders keep a
    holder's grant for their grace period when the connection ends."""

    async def acquire(self, command: AcquireExclusive) -> None:
        """Start relaying; the answer comes later from the relay task."""
        if command.grant_id in self._relayed:
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
        problem = producer_name_problem(command.producer_name)
        if problem is not None:
            raise BrokerError(ErrorCode.INVALID_REQUEST, f"producer_name: {problem}")
        grant = _Grant(relay_id=command.grant_id, namespace=namespace, name=name, command=command)
        self._spawn(grant, self._relay(grant), f"producer grant relay {command.grant_id}")

    async def release(self, command: ReleaseExclusive) -> None:
        """Give the topic up, or stop waiting: answered once the leader has let it go."""
        grant = self._relayed.get(command.grant_id)
        if grant is None:
            raise BrokerError(
                ErrorCode.UNKNOWN_GRANT,
                f"grant id {command.grant_id} is not open on this connection",
            )
        if grant.releasing is None:
            grant.releasing = []
        grant.releasing.append(command.request_id)
        if grant.attempt is not None:
            grant.attempt.inbox.put_nowait(Signal.END)
        grant.wakeup.set()

    # -- one grant ------------------------------------------------------------------------------

    async def _relay(self, grant: _Grant) -> None:
        command = grant.command
        try:
            await follow_leader(
                attempt=lambda: self._attempt(grant),
                transient=lambda code: self._transient(grant, code),
                end=lambda code, message: self._end(grant, code, message),
                answered=lambda: grant.answered,
                what=f"grant {command.grant_id} of {command.topic}",
                unanswered=f"no controller of {command.topic} took the request",
                first_timeout=FIRST_GRANT_TIMEOUT,
                # Nothing was granted that a leader could keep: giving up needs nobody.
                nothing_to_keep=lambda: bool(grant.releasing) and grant.epoch is None,
                wakeup=grant.wakeup,
            )
        finally:
            grant.attempt = None
            self._forget(grant)

    def _transient(self, grant: _Grant, code: ErrorCode) -> bool:
        # A holder asking again gets ProducerBusy until the leader has noticed that its
        # previous link dropped; for anyone else it is the answer.
        return code in TRANSIENT or (grant.epoch is not None and code is ErrorCode.PRODUCER_BUSY)

    async def _attempt(self, grant: _Grant) -> Outcome:
        command = grant.command
        link = await self._links.leader(grant.namespace, grant.name)
        attempt: Attempt[GrantPush] = Attempt()
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
                raise LinkLost(f"{link.endpoint} answered AcquireExclusive with {reply}")
            grant.attempt = attempt
            if grant.releasing:
                attempt.inbox.put_nowait(Signal.END)
            return await self._follow(grant, link, attempt)
        finally:
            grant.attempt = None
            link.unlisten_grant(command.grant_id, attempt)

    async def _follow(
        self, grant: _Grant, link: ControllerLink, attempt: Attempt[GrantPush]
    ) -> Outcome:
        while True:
            item = await attempt.inbox.get()
            if isinstance(item, ExclusiveGranted):
                await self._granted(grant, item.producer_epoch)
            elif isinstance(item, ExclusiveRevoked):
                if item.code in TRANSIENT:
                    return Outcome.LOST
                await self._end(grant, item.code, item.message)
                return Outcome.DONE
            elif item is Signal.LOST:
                return Outcome.LOST
            elif grant.releasing and await self._release(grant, link):
                return Outcome.DONE

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
            if refusal.code in TRANSIENT:
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
