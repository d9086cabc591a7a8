"""The whole system on one machine: what ``stctl standalone`` runs.

One embedded store file, one controller and the first broker in this process on one event loop
(sharing one store instance), and brokers 1..N-1 as supervised child processes on the next
ports. Everything lives under the data directory, so running it again there resumes the same
topics and data:

    DIR/store.db        the embedded store
    DIR/broker-<i>/     each broker's segment logs and cursors
    DIR/logs/           standalone.log (this process) and broker-<i>.log (children)
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import logging
import os
import socket
from dataclasses import dataclass
from pathlib import Path

import aiohttp
from aiohttp import web

from ..broker.app import build_app
from ..broker.config import BrokerConfig
from ..controller.leader import ElectionTiming
from ..controller.manager import ControllerConfig, ControllerManager
from ..store import Store, open_store
from ..store.informers import Informers
from ..tasks import cancel_all
from .broker_children import ChildBroker, SupervisedBroker

log = logging.getLogger(__name__)

# One machine: a lease can be short, and a restarted standalone leads its topics again soon.
STANDALONE_TIMING = ElectionTiming(lease_duration=5.0, renew_deadline=4.0, retry_period=0.5)
SYSTEM_NAMESPACE = "scalable-topics"
_READY_SECONDS = 60.0
_HEALTH_POLL_SECONDS = 0.1


class StandaloneError(Exception):
    """The system cannot start; the message says why and what to do."""


@dataclass(frozen=True, slots=True)
class StandaloneSettings:
    data_dir: Path  # absolute
    host: str
    port: int
    brokers: int
    controller_port: int

    @property
    def store_url(self) -> str:
        return f"embedded://{self.data_dir / 'store.db'}"

    @property
    def service_url(self) -> str:
        return self.broker_url(0)

    @property
    def log_dir(self) -> Path:
        return self.data_dir / "logs"

    def broker_url(self, index: int) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"ws://{host}:{self.port + index}"

    def broker_id(self, index: int) -> str:
        return f"broker-{index}"


def _check_free(host: str, port: int, what: str) -> None:
    """Raise StandaloneError when something listens on ``host:port`` already. SO_REUSEADDR,
    as the servers use it, so a port left in TIME_WAIT by our previous run counts as free."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError as error:
            reason = "it is in use" if error.errno == errno.EADDRINUSE else error.strerror
            raise StandaloneError(
                f"cannot listen on {host}:{port} for {what}: {reason}; choose another --port "
                "(brokers use consecutive ports) or --controller-port"
            ) from None


class StandaloneSystem:
    def __init__(self, settings: StandaloneSettings) -> None:
        self.settings = settings
        self.children = [
            SupervisedBroker(
                ChildBroker(
                    broker_id=settings.broker_id(index),
                    data_dir=settings.data_dir / settings.broker_id(index),
                    store_url=settings.store_url,
                    host=settings.host,
                    port=settings.port + index,
                    log_path=settings.log_dir / f"{settings.broker_id(index)}.log",
                )
            )
            for index in range(1, settings.brokers)
        ]
        self._store: Store | None = None
        self._informers: Informers | None = None
        self._runner: web.AppRunner | None = None
        self._controller: asyncio.Task[None] | None = None

    async def start(self) -> None:
        """Start every piece and return once every broker answers its health check."""
        settings = self.settings
        for index in range(settings.brokers):
            _check_free(settings.host, settings.port + index, settings.broker_id(index))
        _check_free("127.0.0.1", settings.controller_port, "the controller")
        self._store = open_store(settings.store_url)
        # One informer per kind for the whole process: the controller and broker-0 share them.
        self._informers = Informers(self._store, SYSTEM_NAMESPACE)
        self._informers.start()
        await self._start_controller(self._store, self._informers)
        await self._start_broker(self._store, self._informers)
        for child in self.children:
            child.start()
        await self._wait_until_healthy()

    async def _start_controller(self, store: Store, informers: Informers) -> None:
        port = self.settings.controller_port
        config = ControllerConfig(
            identity=f"standalone-{os.getpid()}",
            endpoint=f"http://127.0.0.1:{port}",
            system_namespace=SYSTEM_NAMESPACE,
            timing=STANDALONE_TIMING,
            listen=("127.0.0.1", port),
        )
        self._controller = asyncio.get_running_loop().create_task(
            ControllerManager(store, config, informers=informers).run(), name="controller"
        )

    async def _start_broker(self, store: Store, informers: Informers) -> None:
        settings = self.settings
        config = BrokerConfig(
            data_dir=settings.data_dir / settings.broker_id(0),
            store_url=settings.store_url,
            host=settings.host,
            port=settings.port,
            broker_id=settings.broker_id(0),
            system_namespace=SYSTEM_NAMESPACE,
        )
        config.data_dir.mkdir(parents=True, exist_ok=True)
        self._runner = web.AppRunner(build_app(config, store, informers))
        await self._runner.setup()
        try:
            await web.TCPSite(self._runner, settings.host, settings.port).start()
        except OSError as error:
            raise StandaloneError(
                f"cannot listen on {settings.host}:{settings.port}: {error.strerror}"
            ) from None

    async def _wait_until_healthy(self) -> None:
        pending = {
            self.settings.broker_id(i): self.settings.broker_url(i).replace("ws://", "http://", 1)
            for i in range(self.settings.brokers)
        }
        try:
            async with aiohttp.ClientSession() as http, asyncio.timeout(_READY_SECONDS):
                while pending:
                    self.check_controller()
                    for broker_id, url in list(pending.items()):
                        with contextlib.suppress(aiohttp.ClientError):
                            async with http.get(url + "/healthz") as response:
                                if response.status == 200:
                                    del pending[broker_id]
                    if pending:
                        await asyncio.sleep(_HEALTH_POLL_SECONDS)
        except TimeoutError:
            names = ", ".join(sorted(pending))
            raise StandaloneError(
                f"{names} did not answer within {_READY_SECONDS:g} s; see the logs in "
                f"{self.settings.log_dir}"
            ) from None

    def check_controller(self) -> None:
        """Raise StandaloneError when the in-process controller has stopped."""
        task = self._controller
        if task is None or not task.done() or task.cancelled():
            return
        error = task.exception()
        raise StandaloneError(f"the controller stopped: {error or 'without an error'}")

    async def wait_for_controller(self) -> None:
        """Return when the controller stops (it should not, until :meth:`stop`)."""
        if self._controller is not None:
            await asyncio.wait({self._controller})
        self.check_controller()

    async def stop(self) -> None:
        """Children first, then the controller (it releases its leases), then broker-0, and
        the store last, since all of them write to it."""
        await asyncio.gather(*(child.stop() for child in self.children))
        if self._controller is not None:
            await cancel_all([self._controller], log, "the controller")
        if self._runner is not None:
            await self._runner.cleanup()
        if self._informers is not None:
            await self._informers.stop()
        if self._store is not None:
            await self._store.close()
