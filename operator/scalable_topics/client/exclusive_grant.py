"""Topic-wide exclusive access for a producer, granted by the topic's controller through any
broker (docs/protocol.md, "Topic-wide exclusive producers").

The grant outlives connections: after a drop the holder asks again with the epoch it was
granted and keeps the topic if it is still within the controller's grace period. A revocation
(another producer fenced this one, or the topic was deleted) ends the grant for good.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
from collections.abc import Callable, Sequence

from ..protocol import (
    AcquireExclusive,
    Command,
    ErrorCode,
    ExclusiveGranted,
    ExclusiveRevoked,
    ProducerAccessMode,
    ReleaseExclusive,
    Success,
)
from ..tasks import cancel_and_wait
from .backoff import Backoff
from .connection import BrokerConnection, Channel
from .errors import ClientError, ConnectionFailed, Timeout, error_for
from .pool import ConnectionPool

log = logging.getLogger(__name__)

# Refusals after a reconnect that a little patience overcomes: the controller has not yet
# seen the old connection drop, or a new leader is taking over.
_TRANSIENT = frozenset({ErrorCode.PRODUCER_BUSY, ErrorCode.SERVICE_NOT_READY, ErrorCode.NOT_LEADER})


class ExclusiveGrant:
    def __init__(
        self,
        topic: str,
        producer_name: str,
        mode: ProducerAccessMode,
        pool: ConnectionPool,
        service_urls: Sequence[str],
        on_lost: Callable[[ClientError], None],
    ) -> None:
        self.topic = topic
        self.producer_name = producer_name
        self.mode = mode
        self.epoch: int | None = None
        self._pool = pool
        self._urls = itertools.cycle(service_urls)
        self._on_lost = on_lost
        self._connection: BrokerConnection | None = None
        self._grant_id = 0
        self._granted: asyncio.Future[int] | None = None
        self._renewing: asyncio.Task[None] | None = None
        self._ended = False

    async def acquire(self, wait_seconds: float) -> int:
        """The granted epoch. WaitForExclusive waits as long as the topic is held by another
        producer; the other modes are refused with ProducerBusy then."""
        deadline = asyncio.get_running_loop().time() + wait_seconds
        backoff = Backoff()
        while True:
            try:
                return await self._ask()
            except ClientError as error:
                remaining = deadline - asyncio.get_running_loop().time()
                if not self._transient(error) or remaining <= 0:
                    raise
                await asyncio.sleep(min(backoff.next_delay(), remaining))

    def _transient(self, error: ClientError) -> bool:
        if isinstance(error, ConnectionFailed | Timeout):
            return True
        # A fresh producer told ProducerBusy by an Exclusive request must hear it at once.
        return error.code in _TRANSIENT and not (
            error.code is ErrorCode.PRODUCER_BUSY and self.epoch is None
        )

    async def _ask(self) -> int:
        connection = await self._pool.get(next(self._urls))
        grant_id = connection.new_id(Channel.GRANT)
        granted: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        self._connection, self._grant_id, self._granted = connection, grant_id, granted
        connection.attach(Channel.GRANT, grant_id, self)
        request = AcquireExclusive(
            0, grant_id, self.topic, self.producer_name, self.mode, self.epoch
        )
        try:
            reply = await connection.request(request)
            if isinstance(reply, ExclusiveGranted):
                self._grant(reply.producer_epoch)
            else:
                assert isinstance(reply, Success)  # waiting for the holder to let go
            epoch = await granted
        except BaseException as error:
            connection.detach(Channel.GRANT, grant_id)
            self._connection = None
            if not isinstance(error, ClientError) or isinstance(error, Timeout):
                # Given up on (cancelled or timed out), it may be granted yet.
                connection.request_soon(ReleaseExclusive(0, grant_id))
            raise
        return epoch

    def _grant(self, epoch: int) -> None:
        self.epoch = epoch
        if self._granted is not None and not self._granted.done():
            self._granted.set_result(epoch)

    async def release(self) -> None:
        self._ended = True
        if self._renewing is not None:
            await cancel_and_wait(self._renewing)
        connection = self._connection
        if connection is not None and connection.is_open:
            connection.detach(Channel.GRANT, self._grant_id)
            with contextlib.suppress(ClientError):
                await connection.request(ReleaseExclusive(0, self._grant_id), wait_seconds=10)

    # -- pushes ---------------------------------------------------------------------------------

    def on_push(self, command: Command) -> None:
        if isinstance(command, ExclusiveGranted):
            self._grant(command.producer_epoch)
        elif isinstance(command, ExclusiveRevoked):
            error = error_for(command.code, command.message)
            if self._granted is not None and not self._granted.done():
                self._granted.set_exception(error)
            self._end(error)

    def on_connection_lost(self, error: ClientError) -> None:
        self._connection = None
        if self._granted is not None and not self._granted.done():
            self._granted.set_exception(error)
        elif not self._ended and self._renewing is None:
            self._renewing = asyncio.get_running_loop().create_task(self._renew())

    async def _renew(self) -> None:
        """Ask again with the granted epoch after a drop: the grant survives the grace period."""
        backoff = Backoff()
        try:
            while not self._ended:
                try:
                    await self._ask()
                    return
                except ClientError as error:
                    if not self._transient(error):
                        self._end(error)
                        return
                    log.debug("exclusive grant of %s: %s", self.topic, error)
                await asyncio.sleep(backoff.next_delay())
        finally:
            self._renewing = None

    def _end(self, error: ClientError) -> None:
        if not self._ended:
            self._ended = True
            self._on_lost(error)
