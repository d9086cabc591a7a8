"""The exclusive producer grants requested over one endpoint connection (one broker link).

AcquireExclusive is answered by ExclusiveGranted, or for a WaitForExclusive request that must
wait by Success and a later ExclusiveGranted push; ReleaseExclusive by Success; the coordinator
ends a grant with ExclusiveRevoked. When the connection drops, every grant on it is detached:
a holder keeps the topic for the grace period, a waiter leaves the line.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from ..protocol import (
    AcquireExclusive,
    Command,
    Error,
    ErrorCode,
    ExclusiveGranted,
    ExclusiveRevoked,
    ReleaseExclusive,
    Success,
)
from .producer_grants import GrantRefused, TopicProducerGrants

Enqueue = Callable[[Command], None]
# The topic's grants if this controller leads it; raises GrantRefused (NotLeader, ...) if not.
Locate = Callable[[str], Awaitable[TopicProducerGrants]]


class _Grant:
    """One grant of the connection: the coordinator's channel to its requester."""

    def __init__(
        self, requests: GrantRequests, command: AcquireExclusive, coordinator: TopicProducerGrants
    ) -> None:
        self.requests = requests
        self.grant_id = command.grant_id
        self.request_id = command.request_id
        self.coordinator = coordinator
        self.answered = False

    def queued(self) -> None:
        if not self.answered:
            self.answered = True
            self.requests.enqueue(Success(self.request_id))

    def granted(self, epoch: int) -> None:
        request_id = None if self.answered else self.request_id
        self.answered = True
        self.requests.enqueue(ExclusiveGranted(self.grant_id, request_id, epoch))

    def revoked(self, code: ErrorCode, message: str) -> None:
        if not self.answered:
            return  # the refused AcquireExclusive is answered with an Error instead
        self.requests.forget(self)
        self.requests.enqueue(ExclusiveRevoked(self.grant_id, code, message))


class GrantRequests:
    def __init__(self, enqueue: Enqueue, locate: Locate) -> None:
        self.enqueue = enqueue
        self._locate = locate
        self._grants: dict[int, _Grant] = {}
        self._closing = False

    async def acquire(self, command: AcquireExclusive) -> None:
        if command.grant_id in self._grants:
            self._refuse(command.request_id, ErrorCode.ID_IN_USE, self._in_use(command.grant_id))
            return
        try:
            coordinator = await self._locate(command.topic)
        except GrantRefused as refusal:
            self._refuse(command.request_id, refusal.code, str(refusal))
            return
        if command.grant_id in self._grants:  # taken while the leader was looked up
            self._refuse(command.request_id, ErrorCode.ID_IN_USE, self._in_use(command.grant_id))
            return
        grant = _Grant(self, command, coordinator)
        self._grants[command.grant_id] = grant
        try:
            await coordinator.acquire(
                command.producer_name, command.access_mode, command.producer_epoch, grant
            )
        except GrantRefused as refusal:
            self.forget(grant)
            self._refuse(command.request_id, refusal.code, str(refusal))
            return
        except BaseException:
            self.forget(grant)
            raise
        if self._closing:  # the broker went away while the grant was carried out
            self.forget(grant)
            coordinator.detach(grant)

    async def release(self, command: ReleaseExclusive) -> None:
        grant = self._grants.get(command.grant_id)
        if grant is None or not grant.answered:
            self._refuse(
                command.request_id,
                ErrorCode.UNKNOWN_GRANT,
                f"grant id {command.grant_id} is not open on this connection",
            )
            return
        try:
            await grant.coordinator.release(grant)
        except GrantRefused as refusal:
            self._refuse(command.request_id, refusal.code, str(refusal))
            return
        self.forget(grant)
        self.enqueue(Success(command.request_id))

    def detach_all(self) -> None:
        """The connection is gone: holders start their grace periods, waiters leave."""
        self._closing = True
        grants, self._grants = list(self._grants.values()), {}
        for grant in grants:
            grant.coordinator.detach(grant)

    def forget(self, grant: _Grant) -> None:
        if self._grants.get(grant.grant_id) is grant:
            del self._grants[grant.grant_id]

    def _refuse(self, request_id: int, code: ErrorCode, message: str) -> None:
        self.enqueue(Error(request_id, code, message))

    @staticmethod
    def _in_use(grant_id: int) -> str:
        return f"grant id {grant_id} is in use on this connection"
