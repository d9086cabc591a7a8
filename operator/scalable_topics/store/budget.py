"""A client-side request budget for the store port: client-go's token bucket, with Lease
requests served before bulk ones.

Why. An API server protects itself from a client that asks too much (priority and fairness
queues it, then answers 429), and client-go therefore paces every client itself: a token
bucket of ``qps`` tokens a second holding at most ``burst``, one token per request. A process
that starts thousands of topics at once would otherwise send everything at once, and its Lease
renewals would queue behind that burst at the server, past their deadline.

Tokens. The bucket starts full and refills continuously; every request spends one token:
get, list, create, replace, replace_status, patch, patch_status, delete, and opening a watch
(its events are free: a watch is one long request). A request that finds no token waits.

Priority. Waiting requests on Leases (leader election and broker heartbeats) are served before
any waiting bulk request; within a priority, first come first served. So however much topic
work is queued, a renewal waits at most for the next token (``1 / qps``) behind the Lease
requests already waiting, never behind the bulk queue.

Counters. BudgetedStore counts requests by verb and kind; RequestBudget counts the requests
that had to wait, the seconds they waited and how many wait now, by priority: a benchmark reads
them from the wrapper, a broker exports them on ``/metrics``.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import math
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from enum import IntEnum
from types import TracebackType
from typing import Any, Self

from .errors import StoreClosed
from .kinds import LEASE
from .port import Object, ObjectList, Store, Watch, WatchEvent

# A refill computed for the very instant a token is due can fall short by a rounding error.
_EPSILON = 1e-9


@dataclass(frozen=True, slots=True)
class BudgetSettings:
    """``qps`` requests a second on average, ``burst`` at once; ``qps`` 0 is no limit."""

    qps: float
    burst: int

    def __post_init__(self) -> None:
        if not math.isfinite(self.qps) or self.qps < 0:
            raise ValueError(f"qps must be a number >= 0 (0: unlimited), not {self.qps}")
        if self.qps == 0 and self.burst != 0:
            raise ValueError(f"a burst ({self.burst}) needs a rate: qps 0 means unlimited")
        if self.qps > 0 and self.burst < 1:
            raise ValueError(f"burst must be at least 1 when qps limits the rate, not {self.burst}")

    @property
    def limited(self) -> bool:
        return self.qps > 0

    def describe(self) -> str:
        return f"{self.qps:g} requests/s, burst {self.burst}" if self.limited else "unlimited"


UNLIMITED = BudgetSettings(0.0, 0)


class Priority(IntEnum):
    LEASE = 0  # leader election and broker heartbeats: their deadlines must hold
    BULK = 1  # everything else


def priority_of(kind: str) -> Priority:
    return Priority.LEASE if kind == LEASE.kind else Priority.BULK


class TokenBucket:
    """``burst`` tokens at most, refilled at ``qps`` a second, full at ``now``. Pure: the
    caller says what time it is."""

    def __init__(self, qps: float, burst: int, now: float) -> None:
        if not qps > 0 or burst < 1:
            raise ValueError(f"a token bucket needs qps > 0 and burst >= 1, not {qps}, {burst}")
        self.qps, self.burst = qps, burst
        self._tokens = float(burst)
        self._updated = now

    def tokens(self, now: float) -> float:
        if now > self._updated:
            self._tokens = min(self.burst, self._tokens + (now - self._updated) * self.qps)
            self._updated = now
        return self._tokens

    def take(self, now: float) -> bool:
        """Spend a token if there is one at ``now``."""
        if self.tokens(now) < 1 - _EPSILON:
            return False
        self._tokens -= 1
        return True

    def give_back(self) -> None:
        """Return a token taken for a request that was not sent after all."""
        self._tokens = min(self.burst, self._tokens + 1)

    def ready_at(self, now: float) -> float:
        """When the next token is there (``now`` if it is)."""
        missing = 1 - self.tokens(now)
        return now if missing <= _EPSILON else now + missing / self.qps


@dataclass(order=True)
class _Waiter:
    priority: Priority
    sequence: int
    future: asyncio.Future[None] = field(compare=False)


class RequestBudget:
    """Hands out one token per request, waiters in priority order, on the running loop's time
    (so that fake loop time drives it in tests)."""

    def __init__(self, settings: BudgetSettings) -> None:
        self.settings = settings
        self.waited: Counter[Priority] = Counter()  # requests that had to wait
        self.wait_seconds: dict[Priority, float] = dict.fromkeys(Priority, 0.0)
        self._bucket: TokenBucket | None = None  # made full at the first request
        self._waiting: list[_Waiter] = []  # a heap: priority, then arrival
        self._sequence = itertools.count()
        self._timer: asyncio.TimerHandle | None = None
        self._closed = False

    def waiting(self, priority: Priority) -> int:
        """Requests waiting for a token now."""
        return sum(1 for w in self._waiting if w.priority is priority and not w.future.done())

    async def acquire(self, priority: Priority) -> None:
        """Return when the request may be sent; raise StoreClosed once the budget is closed."""
        if self._closed:
            raise StoreClosed("the store is closed")
        if not self.settings.limited:
            return
        loop = asyncio.get_running_loop()
        now = loop.time()
        if self._bucket is None:
            self._bucket = TokenBucket(self.settings.qps, self.settings.burst, now)
        if not self._waiting and self._bucket.take(now):
            return
        waiter = _Waiter(priority, next(self._sequence), loop.create_future())
        heapq.heappush(self._waiting, waiter)
        self._schedule(loop, now)
        try:
            await waiter.future
        except asyncio.CancelledError:
            self._withdraw(loop, waiter)
            raise
        finally:
            self.waited[priority] += 1
            self.wait_seconds[priority] += loop.time() - now

    def close(self) -> None:
        """Fail every waiting request with StoreClosed, and every later one."""
        self._closed = True
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        waiting, self._waiting = self._waiting, []
        for waiter in waiting:
            if not waiter.future.done():
                waiter.future.set_exception(StoreClosed("the store was closed"))

    def _schedule(self, loop: asyncio.AbstractEventLoop, now: float) -> None:
        if self._timer is None and self._waiting and self._bucket is not None:
            at = self._bucket.ready_at(now)
            self._timer = loop.call_at(at, self._serve, loop, at)

    def _serve(self, loop: asyncio.AbstractEventLoop, at: float) -> None:
        # The loop runs a timer up to its clock resolution early: it is due, so it is ``at``.
        self._timer = None
        now = max(loop.time(), at)
        bucket = self._bucket
        assert bucket is not None
        while self._waiting:
            head = self._waiting[0]
            if head.future.done():  # cancelled; its task withdraws it when it runs
                heapq.heappop(self._waiting)
                continue
            if not bucket.take(now):
                break
            heapq.heappop(self._waiting)
            head.future.set_result(None)
        self._schedule(loop, now)

    def _withdraw(self, loop: asyncio.AbstractEventLoop, waiter: _Waiter) -> None:
        """A waiter was cancelled: forget it, and if it had been handed a token (cancelled
        between the grant and its turn to run), pass that token on."""
        future = waiter.future
        if future.done() and not future.cancelled() and future.exception() is None:
            assert self._bucket is not None
            self._bucket.give_back()
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None
            self._schedule(loop, loop.time())
        elif waiter in self._waiting:
            self._waiting.remove(waiter)
            heapq.heapify(self._waiting)


class BudgetedStore:
    """A store whose every request spends a token of ``budget`` first (see the module
    docstring); it owns ``inner`` and closes it."""

    def __init__(self, inner: Store, budget: BudgetSettings | RequestBudget) -> None:
        self.inner = inner
        self.budget = budget if isinstance(budget, RequestBudget) else RequestBudget(budget)
        self.requests: Counter[tuple[str, str]] = Counter()  # (verb, kind) -> requests sent

    async def _spend(self, verb: str, kind: str) -> None:
        await self.budget.acquire(priority_of(kind))
        self.requests[(verb, kind)] += 1

    async def get(self, kind: str, namespace: str, name: str) -> Object:
        await self._spend("get", kind)
        return await self.inner.get(kind, namespace, name)

    async def list(
        self, kind: str, namespace: str | None = None, label_selector: str | None = None
    ) -> ObjectList:
        await self._spend("list", kind)
        return await self.inner.list(kind, namespace, label_selector)

    async def create(self, obj: Object) -> Object:
        await self._spend("create", _kind_of(obj))
        return await self.inner.create(obj)

    async def replace(self, obj: Object) -> Object:
        await self._spend("replace", _kind_of(obj))
        return await self.inner.replace(obj)

    async def replace_status(self, obj: Object) -> Object:
        await self._spend("replace_status", _kind_of(obj))
        return await self.inner.replace_status(obj)

    async def patch(
        self,
        kind: str,
        namespace: str,
        name: str,
        patch: Object,
        resource_version: str | None = None,
    ) -> Object:
        await self._spend("patch", kind)
        return await self.inner.patch(kind, namespace, name, patch, resource_version)

    async def patch_status(
        self,
        kind: str,
        namespace: str,
        name: str,
        patch: Object,
        resource_version: str | None = None,
    ) -> Object:
        await self._spend("patch_status", kind)
        return await self.inner.patch_status(kind, namespace, name, patch, resource_version)

    async def delete(
        self, kind: str, namespace: str, name: str, resource_version: str | None = None
    ) -> Object:
        await self._spend("delete", kind)
        return await self.inner.delete(kind, namespace, name, resource_version)

    def watch(
        self,
        kind: str,
        namespace: str | None = None,
        resource_version: str | None = None,
        label_selector: str | None = None,
        allow_bookmarks: bool = False,
    ) -> BudgetedWatch:
        inner = self.inner.watch(kind, namespace, resource_version, label_selector, allow_bookmarks)
        return BudgetedWatch(inner, lambda: self._spend("watch", kind))

    async def close(self) -> None:
        self.budget.close()
        await self.inner.close()


def _kind_of(obj: Any) -> str:
    # A malformed object is the adapter's to refuse; it still costs a request.
    kind = obj.get("kind") if isinstance(obj, dict) else None
    return kind if isinstance(kind, str) else ""


class BudgetedWatch:
    """A watch that spends one token when it opens (on ``async with`` or the first read)."""

    def __init__(self, inner: Watch, spend: Callable[[], Awaitable[None]]) -> None:
        self._inner = inner
        self._spend = spend
        self._opened = self._closed = False
        self._events: AsyncIterator[WatchEvent] | None = None

    async def _open(self) -> None:
        if not self._opened and not self._closed:
            await self._spend()
            self._opened = True

    async def __aenter__(self) -> Self:
        await self._open()
        await self._inner.__aenter__()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._closed = True
        await self._inner.__aexit__(exc_type, exc, tb)

    def __aiter__(self) -> Self:
        return self

    async def __anext__(self) -> WatchEvent:
        await self._open()
        if self._events is None:
            self._events = aiter(self._inner)
        return await anext(self._events)

    async def aclose(self) -> None:
        self._closed = True
        await self._inner.aclose()
