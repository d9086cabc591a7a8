"""The whole system on one machine: what ``stctl standalone`` runs.

One embedded store file, one controller and the first broker in this process on one event loop
(sharing one store instance), and brokers 1..N-1 as supervised child processes on the next
ports (with port 0, every broker and the controller on a free port of its own). Everything
lives under the data directory, so running it again there resumes the same topics and data:

    DIR/store.db                the embedded store
    DIR/store.db-wake/          a named pipe per store instance watching it, which every
                                writer signals after a commit (store/embedded_wake.py)
    DIR/broker-<i>/             each broker's segment logs and cursors
    DIR/broker-<i>.address      the HOST:PORT a child broker listens on
    DIR/load-history/           the brokers' load history (Parquet), read by the load job
    DIR/logs/                   standalone.log (this process, with the load job's output) and
                                broker-<i>.log (children)
    DIR/kubeconfig              points kubectl at the Kubernetes API this process serves
    DIR/kube-api.token          the bearer token that kubeconfig carries (mode 0600)
    DIR/cluster.token, DIR/token.key, DIR/token.pub, DIR/admin.token
                                the credentials (standalone_credentials.py)
    DIR/stctl-config            the client configuration: the service URL and admin.token
                                (STCTL_CONFIG=DIR/stctl-config stctl ...; mode 0600)
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import logging
import os
import socket
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
from aiohttp import web

from ..broker.app import build_app, runner_options
from ..broker.config import BrokerConfig
from ..client.client_config import write_client_config
from ..controller.leader import ElectionTiming
from ..controller.manager import ControllerConfig, ControllerManager
from ..kubeapi.running import KubeApiSettings, RunningKubeApi, start_kube_api
from ..listening import bound_address, listening_socket
from ..store import BudgetSettings, Store, open_store
from ..store.cluster_autoscale import ClusterAutoScale
from ..store.informers import Informers
from ..tasks import cancel_all
from .broker_children import ChildBroker, SupervisedBroker
from .load_job_child import LoadJobChild, SupervisedLoadJob, load_job_problem
from .standalone_credentials import StandaloneCredentials

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
    port: int  # the first broker's; 0: every broker on a free port
    brokers: int
    controller_port: int  # 0: a free port
    # Each process's store client: this one (controller and broker-0) and each child broker.
    store_budget: BudgetSettings | None = None  # None: the embedded store's default
    kube_api_port: int | None = None  # None: no Kubernetes API; 0: a free port
    # Every broker's connection timeouts given by flags (BrokerConfig fields); others default.
    timeouts: Mapping[str, float] = field(default_factory=dict)
    # Every broker's client limits set on the command line (broker_limits.py).
    broker_limits: Mapping[str, int] = field(default_factory=dict)
    # What every broker and the controller require; None: anyone may do anything.
    credentials: StandaloneCredentials | None = None
    authenticate_metrics: bool = False
    # The load job child (load_job_child.py): seconds between runs (0: none) and its windows.
    load_job_interval: float = 60.0
    load_job_windows: str = "2m,5m,10m,20m"
    # Every broker's --load-history-flush: how stale the load job's view is at most.
    load_history_flush: float = 60.0

    @property
    def kubeconfig(self) -> Path:
        return self.data_dir / "kubeconfig"

    @property
    def client_config(self) -> Path:
        return self.data_dir / "stctl-config"

    @property
    def store_url(self) -> str:
        return f"embedded://{self.data_dir / 'store.db'}"

    @property
    def log_dir(self) -> Path:
        return self.data_dir / "logs"

    @property
    def load_history(self) -> Path:
        return self.data_dir / "load-history"

    def broker_port(self, index: int) -> int:
        return self.port + index if self.port else 0

    def broker_url(self, port: int) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"ws://{host}:{port}"

    def broker_id(self, index: int) -> str:
        return f"broker-{index}"


def port_ranges(ports: Sequence[int]) -> str:
    """``6650-6652`` for consecutive ports, else ``6650, 7012``."""
    first, last = ports[0], ports[-1]
    if list(ports) == list(range(first, last + 1)):
        return f"{first}-{last}"
    return ", ".join(str(port) for port in ports)


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


def _child_credentials(settings: StandaloneSettings) -> list[str]:
    """The flags that give a child broker the system's credentials (files, never the token
    itself on a command line)."""
    credentials = settings.credentials
    if credentials is None:
        return []
    flags = [
        "--auth-token-file",
        str(credentials.cluster_token_file),
        "--token-public-key",
        str(credentials.public_key_file),
    ]
    return [*flags, "--authenticate-metrics"] if settings.authenticate_metrics else flags


def _auth_settings(settings: StandaloneSettings) -> dict[str, Any]:
    """The BrokerConfig (and ControllerConfig) fields of the system's credentials."""
    credentials = settings.credentials
    if credentials is None:
        return {}
    return {
        "token_public_key": credentials.public_key_file,
        "authenticate_metrics": settings.authenticate_metrics,
    }


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
                    port=settings.broker_port(index),
                    log_path=settings.log_dir / f"{settings.broker_id(index)}.log",
                    address_file=settings.data_dir / f"{settings.broker_id(index)}.address",
                    store_budget=settings.store_budget,
                    timeouts=settings.timeouts,
                    limits=settings.broker_limits,
                    credentials=_child_credentials(settings),
                    load_history=str(settings.load_history),
                    load_history_flush=settings.load_history_flush,
                )
            )
            for index in range(1, settings.brokers)
        ]
        self._store: Store | None = None
        self._informers: Informers | None = None
        self._runner: web.AppRunner | None = None
        self._controller: asyncio.Task[None] | None = None
        self._broker_port = settings.port  # broker-0's, known once bound
        self.controller_port = settings.controller_port  # known once bound
        self._sockets: list[socket.socket] = []  # closed by the servers, or at the end of stop()
        self._kube_api: RunningKubeApi | None = None
        self.load_job: SupervisedLoadJob | None = None
        # Why there is no load job although one was asked for (said once, at start).
        self.load_job_problem: str | None = None

    @property
    def kube_api_url(self) -> str | None:
        return None if self._kube_api is None else self._kube_api.url

    @property
    def broker_ports(self) -> list[int]:
        """Every broker's port; 0 for a child that has not reported its free port yet."""
        return [self._broker_port, *(child.port for child in self.children)]

    @property
    def service_url(self) -> str:
        return self.settings.broker_url(self._broker_port)

    async def start(self) -> None:
        """Start every piece and return once every broker answers its health check."""
        settings = self.settings
        for index in range(settings.brokers):
            if settings.broker_port(index):
                _check_free(settings.host, settings.broker_port(index), settings.broker_id(index))
        if settings.controller_port:
            _check_free("127.0.0.1", settings.controller_port, "the controller")
        if settings.kube_api_port:
            _check_free("127.0.0.1", settings.kube_api_port, "the Kubernetes API")
        store = self._store = open_store(settings.store_url, budget=settings.store_budget)
        # One informer per kind for the whole process: the controller and broker-0 share them.
        informers = self._informers = Informers(store, SYSTEM_NAMESPACE)
        informers.start()
        cluster_autoscale = ClusterAutoScale(informers.configmaps, SYSTEM_NAMESPACE)
        await self._start_controller(store, informers, cluster_autoscale)
        await self._start_broker(store, informers, cluster_autoscale)
        for child in self.children:
            child.start()
        if settings.kube_api_port is not None:
            await self._start_kube_api(settings.kube_api_port)
        await self._wait_until_healthy()
        self._write_client_config()
        self._start_load_job()

    def _start_load_job(self) -> None:
        settings = self.settings
        if settings.load_job_interval <= 0:
            return
        self.load_job_problem = load_job_problem()
        if self.load_job_problem is not None:
            log.warning(
                "no load job: %s; the controller's own evaluation keeps autoscale working",
                self.load_job_problem,
            )
            return
        self.load_job = SupervisedLoadJob(
            LoadJobChild(
                store_url=settings.store_url,
                history=settings.load_history,
                every=settings.load_job_interval,
                windows=settings.load_job_windows,
                system_namespace=SYSTEM_NAMESPACE,
            )
        )
        self.load_job.start()

    @property
    def client_config(self) -> Path:
        return self.settings.client_config

    def _write_client_config(self) -> None:
        """The file stctl and Client.from_config read: this system's URL (known once broker-0
        listens) and the admin token, relative to it (a new admin.token at each start)."""
        credentials = self.settings.credentials
        token = None if credentials is None else credentials.admin_token_file.name
        try:
            write_client_config(
                self.client_config,
                context="standalone",
                service_url=self.service_url,
                token_file=token,
            )
        except (OSError, ValueError) as error:
            raise StandaloneError(f"cannot write {self.client_config}: {error}") from None

    async def _start_kube_api(self, port: int) -> None:
        settings = self.settings
        sock = self._listen("127.0.0.1", port)
        self._kube_api = await start_kube_api(
            KubeApiSettings(
                store_url=settings.store_url,
                token_file=settings.data_dir / "kube-api.token",
                kubeconfig=settings.kubeconfig,
                namespaces=(SYSTEM_NAMESPACE,),
            ),
            sock,
        )

    async def _start_controller(
        self, store: Store, informers: Informers, cluster_autoscale: ClusterAutoScale
    ) -> None:
        settings = self.settings
        sock = self._listen("127.0.0.1", self.settings.controller_port)
        port = self.controller_port = bound_address(sock)[1]
        config = ControllerConfig(
            identity=f"standalone-{os.getpid()}",
            endpoint=f"http://127.0.0.1:{port}",
            system_namespace=SYSTEM_NAMESPACE,
            timing=STANDALONE_TIMING,
            listen=("127.0.0.1", port),
            listen_socket=sock,
            admin_token=None
            if settings.credentials is None
            else settings.credentials.cluster_token,
            **_auth_settings(settings),
        )
        self._controller = asyncio.get_running_loop().create_task(
            ControllerManager(
                store, config, informers=informers, cluster_autoscale=cluster_autoscale
            ).run(),
            name="controller",
        )

    async def _start_broker(
        self, store: Store, informers: Informers, cluster_autoscale: ClusterAutoScale
    ) -> None:
        settings = self.settings
        sock = self._listen(settings.host, settings.port)
        self._broker_port = bound_address(sock)[1]
        config = BrokerConfig(
            data_dir=settings.data_dir / settings.broker_id(0),
            store_url=settings.store_url,
            host=settings.host,
            port=self._broker_port,
            broker_id=settings.broker_id(0),
            system_namespace=SYSTEM_NAMESPACE,
            load_history=str(settings.load_history),
            load_history_flush=settings.load_history_flush,
            auth_token=None if settings.credentials is None else settings.credentials.cluster_token,
            **settings.timeouts,
            **settings.broker_limits,
            **_auth_settings(settings),
        )
        config.data_dir.mkdir(parents=True, exist_ok=True)
        self._runner = web.AppRunner(
            build_app(config, store, informers, cluster_autoscale), **runner_options(config)
        )
        await self._runner.setup()
        await web.SockSite(self._runner, sock).start()

    def _listen(self, host: str, port: int) -> socket.socket:
        try:
            sock = listening_socket(host, port)
        except OSError as error:
            raise StandaloneError(
                f"cannot listen on {host}:{port}: {error.strerror or error}"
            ) from None
        self._sockets.append(sock)
        return sock

    async def _wait_until_healthy(self) -> None:
        pending = {self.settings.broker_id(i) for i in range(self.settings.brokers)}
        try:
            async with aiohttp.ClientSession() as http, asyncio.timeout(_READY_SECONDS):
                while pending:
                    self.check_controller()
                    for index, port in enumerate(self.broker_ports):
                        broker_id = self.settings.broker_id(index)
                        if broker_id not in pending or not port:
                            continue
                        url = self.settings.broker_url(port).replace("ws://", "http://", 1)
                        with contextlib.suppress(aiohttp.ClientError):
                            async with http.get(url + "/healthz") as response:
                                if response.status == 200:
                                    pending.remove(broker_id)
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
        if self._kube_api is not None:
            await self._kube_api.stop()
        if self.load_job is not None:
            await self.load_job.stop()
        await asyncio.gather(*(child.stop() for child in self.children))
        if self._controller is not None:
            await cancel_all([self._controller], log, "the controller")
        if self._runner is not None:
            await self._runner.cleanup()
        if self._informers is not None:
            await self._informers.stop()
        if self._store is not None:
            await self._store.close()
        for sock in self._sockets:
            sock.close()
