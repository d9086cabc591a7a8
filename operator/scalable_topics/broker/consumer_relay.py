"""Stream and checkpoint consumers register through any broker, which relays to the controller.

A client's RegisterConsumer is relayed to the topic's leader, found through the endpoint
annotation of the topic's controller Lease, over the client connection's link to that
controller (``controller_links.py``). The client's Success comes once the leader has persisted
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

import logging
from dataclasses import dataclass

from ..protocol import (
    ConsumerAssignment,
    Error,
    ErrorCode,
    RegisterConsumer,
    RegistrationClosed,
    Success,
    UnregisterConsumer,
)
from .controller_link import ControllerLink, LinkLost, LinkRefused, Push
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

# A first registration that finds no leader for this long is refused with ServiceNotReady;
# once accepted, a registration follows failovers for as long as its client stays.
FIRST_REGISTRATION_TIMEOUT = 30.0


@dataclass(eq=False, kw_only=True)
class _Registration(Relayed[Push]):
    command: RegisterConsumer
    accepted: bool = False
    last: tuple[int, int] | None = None  # (term, layout epoch) of the last relayed assignment
    leaving: list[int] | None = None  # request ids of UnregisterConsumer waiting for an answer


class ConsumerRelay(ConnectionRelay[_Registration]):
    """The relayed registrations of one client connection; the leaders keep them for their
    grace period when the connection ends."""

    async def register(self, command: RegisterConsumer) -> None:
        """Start relaying; the answer (Success or Error) comes later from the relay task."""
        if command.registration_id in self._relayed:
            raise BrokerError(
                ErrorCode.ID_IN_USE,
                f"registration id {command.registration_id} is in use on this connection",
            )
        namespace, name = split_topic(command.topic)
        if not command.subscription or not command.consumer_name:
            raise BrokerError(
                ErrorCode.INVALID_REQUEST, "a registration names its subscription and consumer"
            )
        registration = _Registration(
            relay_id=command.registration_id, namespace=namespace, name=name, command=command
        )
        self._spawn(
            registration, self._relay(registration), f"consumer relay {command.registration_id}"
        )

    async def unregister(self, command: UnregisterConsumer) -> None:
        """Leave: answered once the leader removed the registration."""
        registration = self._relayed.get(command.registration_id)
        if registration is None or not registration.accepted:
            raise BrokerError(
                ErrorCode.UNKNOWN_REGISTRATION,
                f"registration id {command.registration_id} is not open on this connection",
            )
        if registration.leaving is None:
            registration.leaving = []
        registration.leaving.append(command.request_id)
        if registration.attempt is not None:
            registration.attempt.inbox.put_nowait(Signal.END)

    # -- one registration -----------------------------------------------------------------------

    async def _relay(self, registration: _Registration) -> None:
        command = registration.command
        try:
            await follow_leader(
                attempt=lambda: self._attempt(registration),
                transient=lambda code: self._transient(registration, code),
                end=lambda code, message: self._end(registration, code, message),
                answered=lambda: registration.accepted,
                what=f"registration {command.registration_id} of {command.topic}",
                unanswered=f"no controller of {command.topic} took the registration",
                first_timeout=FIRST_REGISTRATION_TIMEOUT,
            )
        finally:
            registration.attempt = None
            self._forget(registration)

    def _transient(self, registration: _Registration, code: ErrorCode) -> bool:
        # Once registered, ConsumerBusy means the leader has not yet noticed our previous link
        # drop; before that, the name is taken by someone else.
        return code in TRANSIENT or (registration.accepted and code is ErrorCode.CONSUMER_BUSY)

    async def _attempt(self, registration: _Registration) -> Outcome:
        command = registration.command
        link = await self._links.leader(registration.namespace, registration.name)
        attempt: Attempt[Push] = Attempt()
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
                attempt.inbox.put_nowait(Signal.END)
            return await self._follow(registration, link, attempt)
        finally:
            registration.attempt = None
            link.unlisten(command.registration_id, attempt)

    async def _follow(
        self, registration: _Registration, link: ControllerLink, attempt: Attempt[Push]
    ) -> Outcome:
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
                if item.code in TRANSIENT:
                    return Outcome.LOST
                await self._end(registration, item.code, item.message)
                return Outcome.DONE
            elif item is Signal.LOST:
                return Outcome.LOST
            elif registration.leaving and await self._leave(registration, link):
                return Outcome.DONE

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
