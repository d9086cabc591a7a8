"""What the per-topic coordinators of a leader share (consumer sessions, exclusive producers).

Each serves one topic for one term of leadership: its writes are stamped with that term, and
one that reads a newer term raises :class:`Deposed` and stops. :class:`LedTopics` is the
directory of one kind of coordinator, for the endpoint to find; :func:`retry` and
:func:`keep_settling` are their backoff loops.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Generic, Protocol, TypeVar

from ..model.clock import Clock
from ..model.resources import ScalableTopic
from ..protocol import ErrorCode
from ..store import StoreError
from ..tasks import cancel_all

log = logging.getLogger(__name__)

DEFAULT_GRACE_PERIOD = 30.0
RETRY_FIRST, RETRY_MAX = 0.2, 10.0
TRANSIENT_ERRORS: tuple[type[Exception], ...] = (StoreError, ValueError)


class Deposed(Exception):
    """The store holds writes of a newer term: another controller leads the topic."""


class Refused(Exception):
    """A request a coordinator turns down; ``code`` goes on the wire."""

    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code


def check_term(newest: int, term: int, topic: str, shut: Callable[[ErrorCode, str], None]) -> None:
    """Raise Deposed, after ``shut`` (NotLeader), when ``newest`` (the newest term the store
    shows for ``topic``) is newer than this leader's ``term``."""
    if newest > term:
        shut(ErrorCode.NOT_LEADER, f"{topic} was written by controller term {newest}")
        raise Deposed(
            f"the store holds writes of term {newest}, newer than this leader's term "
            f"{term}: another controller leads {topic}"
        )


def newest_term(topic: ScalableTopic) -> int:
    """The highest term that wrote the topic's registrations or leads it, as stored."""
    terms = [c.term for entry in topic.status.subscriptions for c in entry.consumers]
    if topic.status.controller is not None:
        terms.append(topic.status.controller.term)
    return max(terms, default=0)


T = TypeVar("T")


async def retry(
    step: Callable[[], Awaitable[T]],
    what: str,
    transient: tuple[type[Exception], ...] = TRANSIENT_ERRORS,
) -> T:
    """Run ``step`` until it returns, with backoff; Deposed ends it. ``what`` names the work
    in the log: ``transient`` errors are logged briefly, others with their traceback."""
    delay = RETRY_FIRST
    while True:
        try:
            return await step()
        except Deposed:
            raise
        except transient as error:
            log.info("%s: %s; retrying in %.1fs", what, error, delay)
        except Exception:
            log.exception("%s failed; retrying", what)
        await asyncio.sleep(delay)
        delay = min(delay * 2, RETRY_MAX)


async def keep_settling(
    settle: Callable[[], Awaitable[bool]],
    wake: asyncio.Event,
    deadline: Callable[[], float | None],
    clock: Clock,
    what: str,
    transient: tuple[type[Exception], ...] = TRANSIENT_ERRORS,
) -> None:
    """Settle whenever ``wake`` is set or the ``deadline`` (monotonic) passes, retrying
    failures, until ``settle`` returns True."""
    while True:
        due = deadline()
        timeout = None if due is None else max(0.0, due - clock.monotonic())
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(timeout):
                await wake.wait()
        wake.clear()
        if await retry(settle, what, transient):
            return


class Coordinator(Protocol):
    async def run(self) -> None: ...


C = TypeVar("C", bound=Coordinator)


class LedTopics(Generic[C]):
    """The coordinators of one kind for the topics this controller leads, for the endpoint to
    find. ``make(namespace, name, term)`` makes one; ``what`` names the kind in the log."""

    def __init__(self, make: Callable[[str, str, int], C], what: str) -> None:
        self._make = make
        self._what = what
        self._led: dict[tuple[str, str], C] = {}

    def get(self, namespace: str, name: str) -> C | None:
        return self._led.get((namespace, name))

    @contextlib.asynccontextmanager
    async def leading(self, namespace: str, name: str, term: int) -> AsyncIterator[C]:
        """Serve the topic for one term of leadership."""
        coordinator = self._make(namespace, name, term)
        key = (namespace, name)
        self._led[key] = coordinator
        task = asyncio.get_running_loop().create_task(
            coordinator.run(), name=f"{self._what} {namespace}/{name}"
        )
        try:
            yield coordinator
        finally:
            if self._led.get(key) is coordinator:
                del self._led[key]
            await cancel_all([task], log, f"the {self._what} of {namespace}/{name}")
