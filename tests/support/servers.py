"""Brokers and controller endpoints in the test's event loop, each on a port held from the
moment it is chosen (see ports.py), so that the address it advertises is its own."""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

from aiohttp.test_utils import TestServer

from scalable_topics.broker.app import build_app, runner_options
from scalable_topics.broker.config import BrokerConfig
from scalable_topics.controller.manager import ControllerConfig
from scalable_topics.store import EmbeddedStore, Store
from scalable_topics.store.informers import Informers

from .ports import loopback_socket, port_of


def broker_server(
    store: Store,
    data_dir: Path,
    informers: Informers | None = None,
    *,
    port: int = 0,
    **settings: Any,
) -> TestServer:
    """A broker application on ``store`` (not started yet), advertising the port it will serve
    on (``port``, or a free one); with ``informers`` (running), it reads them instead of its
    own; ``settings`` are further BrokerConfig fields."""
    sock = loopback_socket(port)
    port = port_of(sock)
    config = BrokerConfig(data_dir=data_dir, store_url="embedded:unused.db", port=port, **settings)

    def held(host: str, port: int, family: socket.AddressFamily) -> socket.socket:
        return sock

    return _BrokerServer(
        runner_options(config),
        build_app(config, store, informers),
        host="127.0.0.1",
        port=port,
        socket_factory=held,
    )


class _BrokerServer(TestServer):
    """Served with the runner options ``stctl broker`` uses (its handshake timeout)."""

    def __init__(self, options: dict[str, Any], *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._options = options

    async def start_server(
        self, loop: asyncio.AbstractEventLoop | None = None, **kwargs: Any
    ) -> None:
        await super().start_server(loop, **{**self._options, **kwargs})


def controller_config(identity: str, **settings: Any) -> ControllerConfig:
    """A ControllerConfig whose endpoint serves on a held loopback port (and publishes it);
    ``settings`` are further ControllerConfig fields."""
    sock = loopback_socket()
    port = port_of(sock)
    return ControllerConfig(
        identity,
        f"http://127.0.0.1:{port}",
        listen=("127.0.0.1", port),
        listen_socket=sock,
        **settings,
    )


StartServer = Callable[..., Awaitable[TestServer]]


@contextlib.asynccontextmanager
async def broker_servers(root: Path) -> AsyncIterator[StartServer]:
    """Brokers on one embedded store under ``root``, each started by a call with its
    BrokerConfig ``settings`` (in ``root/broker-<n>``), all closed when the context ends."""
    servers: list[TestServer] = []
    async with await EmbeddedStore.open(root / "store.db") as store:

        async def start(**settings: Any) -> TestServer:
            server = broker_server(store, root / f"broker-{len(servers)}", **settings)
            await server.start_server()
            servers.append(server)
            return server

        try:
            yield start
        finally:
            for server in servers:
                await server.close()
