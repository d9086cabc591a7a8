"""A stream or checkpoint consumer's registration with the topic's controller, through any
broker, and the assignments that follow it.

The registration outlives connections: when the connection drops, the follower registers
again under the same consumer name (the controller keeps the consumer's segments for its grace
period). ``ConsumerBusy`` (the controller has not noticed the old connection drop yet) and
``ServiceNotReady`` (no leader yet) are retried with backoff. Assignments older than the last
one by (term, layout epoch) are stale and ignored; an equal one is a rebalance and replaces it.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections.abc import Callable, Sequence

from ..protocol import (
    Command,
    ConsumerAssignment,
    ErrorCode,
    RegisterConsumer,
    RegistrationClosed,
    UnregisterConsumer,
)
from ..tasks import cancel_and_wait
from .backoff import Backoff
from .connection import BrokerConnection, Channel
from .errors import ClientClosed, ClientError, ConnectionFailed, Timeout, error_for
from .pool import ConnectionPool

log = logging.getLogger(__name__)

# Refusals worth another attempt (the rest end the consumer).
_RETRIED = frozenset(
    {
        ErrorCode.CONSUMER_BUSY,
        ErrorCode.SERVICE_NOT_READY,
        ErrorCode.INTERNAL_ERROR,
        ErrorCode.NOT_LEADER,
    }
)

AssignmentListener = Callable[[ConsumerAssignment], None]
EndListener = Callable[[ClientError], None]


class _Registration:
    def __init__(
        self, follower: AssignmentFollower, connection: BrokerConnection, registration_id: int
    ) -> None:
        self.follower = follower
        self.connection = connection
        self.registration_id = registration_id
        self.over = asyncio.Event()

    def on_push(self, command: Command) -> None:
        self.follower._on_push(self, command)

    def on_connection_lost(self, error: ClientError) -> None:
        self.over.set()


class AssignmentFollower:
    def __init__(
        self,
        pool: ConnectionPool,
        service_urls: Sequence[str],
        *,
        topic: str,
        subscription: str,
        consumer_name: str,
        on_assignment: AssignmentListener,
        on_end: EndListener,
        operation_timeout: float,
    ) -> None:
        self._pool = pool
        self._urls = itertools.cycle(service_urls)
        self._topic = topic
        self._subscription = subscription
        self._consumer_name = consumer_name
        self._on_assignment = on_assignment
        self._on_end = on_end
        self._operation_timeout = operation_timeout
        self._latest: tuple[int, int] | None = None
        self._registration: _Registration | None = None
        self._registered = asyncio.Event()
        self._failure: ClientError | None = None
        self._task: asyncio.Task[None] | None = None
        self._closed = False

    async def start(self) -> None:
        """Register; returns once the controller recorded the registration. Raises the
        refusal, or Timeout when it kept being refused for the client's operation timeout."""
        self._task = asyncio.get_running_loop().create_task(
            self._run(), name=f"register {self._consumer_name} on {self._topic}"
        )
        ended = asyncio.get_running_loop().create_task(self._registered.wait())
        try:
            async with asyncio.timeout(self._operation_timeout):
                await asyncio.wait({self._task, ended}, return_when=asyncio.FIRST_COMPLETED)
        except TimeoutError:
            raise Timeout(
                f"{self._consumer_name} could not register on {self._topic}/"
                f"{self._subscription} within {self._operation_timeout:g} s: is another "
                "consumer of that name connected, and is the topic's controller running?"
            ) from None
        finally:
            ended.cancel()
        if self._failure is not None:
            raise self._failure

    async def _run(self) -> None:
        backoff = Backoff(maximum=2.0)
        while not self._closed:
            try:
                registration = await self._register()
            except ClientClosed:
                return
            except ClientError as error:
                if error.code is not None and error.code not in _RETRIED:
                    self._end(error)
                    return
                log.debug("registering %s failed: %s", self._consumer_name, error)
                await asyncio.sleep(backoff.next_delay())
                continue
            backoff.reset()
            await registration.over.wait()
            registration.connection.detach(Channel.REGISTRATION, registration.registration_id)
            self._registration = None
            if not self._closed and self._failure is None:
                await asyncio.sleep(backoff.next_delay())
            if self._failure is not None:
                return

    async def _register(self) -> _Registration:
        connection = await self._pool.get(next(self._urls))
        registration = _Registration(self, connection, connection.new_id(Channel.REGISTRATION))
        connection.attach(Channel.REGISTRATION, registration.registration_id, registration)
        self._registration = registration
        try:
            await connection.request(
                RegisterConsumer(
                    0,
                    registration.registration_id,
                    self._topic,
                    self._subscription,
                    self._consumer_name,
                ),
                wait_seconds=self._operation_timeout,
                # Taken after all, it would keep the consumer name busy.
                undo=UnregisterConsumer(0, registration.registration_id),
            )
        except BaseException:
            connection.detach(Channel.REGISTRATION, registration.registration_id)
            self._registration = None
            raise
        self._registered.set()
        return registration

    def _on_push(self, registration: _Registration, command: Command) -> None:
        if registration is not self._registration:
            return
        if isinstance(command, ConsumerAssignment):
            version = (command.term, command.layout_epoch)
            if self._latest is not None and version < self._latest:
                return
            self._latest = version
            self._on_assignment(command)
        elif isinstance(command, RegistrationClosed):
            if command.code in _RETRIED:
                registration.over.set()
            else:
                self._end(error_for(command.code, command.message))
                registration.over.set()

    def _end(self, error: ClientError) -> None:
        if self._failure is None:
            self._failure = error
            self._on_end(error)

    async def close(self) -> None:
        """Leave: the registration is removed and the consumer's segments go to the others."""
        if self._closed:
            return
        self._closed = True
        if self._task is not None:
            await cancel_and_wait(self._task)
        registration = self._registration
        self._registration = None
        if registration is None or not registration.connection.is_open:
            return
        try:
            await registration.connection.request(
                UnregisterConsumer(0, registration.registration_id),
                wait_seconds=self._operation_timeout,
            )
        except (ConnectionFailed, Timeout) as error:
            # The grace period removes it instead.
            log.info("unregistering %s failed: %s", self._consumer_name, error)
        finally:
            registration.connection.detach(Channel.REGISTRATION, registration.registration_id)
