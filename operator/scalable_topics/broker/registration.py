"""A broker announces itself with a heartbeat Lease: its URL and load, renewed every few
seconds, released on a clean shutdown. The controller places new segments on live brokers
from these leases (model/placement.py)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable

from ..model.clock import SystemClock
from ..model.placement import (
    BROKER_CAPACITY_ANNOTATION,
    BROKER_MSG_RATE_ANNOTATION,
    BROKER_SEGMENTS_ANNOTATION,
    BROKER_URL_ANNOTATION,
    broker_lease_name,
)
from ..store import LeaseLock, Object, Store, StoreError
from ..store.informers import Informers
from ..tasks import cancel_and_wait
from .config import BrokerConfig

log = logging.getLogger(__name__)

LEASE_MULTIPLE = 3  # a broker is given up after missing about three heartbeats


class Registration:
    def __init__(
        self,
        store: Store,
        config: BrokerConfig,
        load: Callable[[], tuple[int, float]],
        capacity: int | None = None,
        informers: Informers | None = None,
    ) -> None:
        """``capacity`` (segments it can host) is announced for placement; with
        ``informers``, the Lease is read from their cache (a beat then costs one write)."""
        self._config = config
        self._load = load
        duration = max(1, round(config.heartbeat_seconds * LEASE_MULTIPLE))
        self._lock = LeaseLock(
            store,
            config.system_namespace,
            broker_lease_name(config.identity),
            config.identity,
            duration,
            SystemClock(asyncio.get_running_loop().time),
            {
                BROKER_URL_ANNOTATION: config.url,
                **({} if capacity is None else {BROKER_CAPACITY_ANNOTATION: str(capacity)}),
            },
            read=None if informers is None else self._cached(informers),
        )
        self._informers = informers
        self._task: asyncio.Task[None] | None = None

    def _cached(self, informers: Informers) -> Callable[[], Object | None]:
        namespace, name = self._config.system_namespace, broker_lease_name(self._config.identity)
        return lambda: informers.leases.get(namespace, name)

    async def start(self) -> None:
        if self._informers is not None:
            await self._informers.leases.wait_synced()
        await self._beat()
        self._task = asyncio.get_running_loop().create_task(self._run(), name="broker heartbeat")

    async def stop(self) -> None:
        if self._task is not None:
            await cancel_and_wait(self._task)
        with contextlib.suppress(StoreError):
            await self._lock.release()

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(self._config.heartbeat_seconds)
            await self._beat()

    async def _beat(self) -> None:
        segments, msg_rate_in = self._load()
        self._lock.annotate(
            {
                BROKER_SEGMENTS_ANNOTATION: str(segments),
                BROKER_MSG_RATE_ANNOTATION: f"{msg_rate_in:.1f}",
            }
        )
        try:
            if not await self._lock.try_acquire_or_renew():
                log.warning(
                    "broker lease %s is held by another broker with the same identity",
                    self._config.identity,
                )
        except StoreError as error:  # retried at the next beat: one line, no traceback
            log.warning("broker heartbeat could not reach the store: %s", error)
