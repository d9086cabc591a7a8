"""Starting the API server the way ``stctl kube-api`` and ``stctl standalone`` both do: its own
store client, the system namespaces, this release's CRDs installed, a token and a kubeconfig."""

from __future__ import annotations

import socket
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from ..listening import bound_address, format_address
from ..model.clock import Clock
from ..store import Store, open_store
from . import tls
from .kubeconfig import load_or_create_token, write_kubeconfig
from .server import KubeApiServer, default_registry


@dataclass(frozen=True, slots=True)
class KubeApiSettings:
    store_url: str
    token_file: Path  # its directory also keeps the TLS identity (kube-api*.crt, .key)
    kubeconfig: Path | None  # where to write a kubeconfig for this server, if anywhere
    install_crds: bool = True
    namespaces: tuple[str, ...] = ()  # created at start besides the system ones


@dataclass
class RunningKubeApi:
    server: KubeApiServer
    store: Store
    url: str

    async def stop(self) -> None:
        try:
            await self.server.stop()
        finally:
            await self.store.close()


async def start_kube_api(
    settings: KubeApiSettings, sock: socket.socket, *, clock: Clock | None = None
) -> RunningKubeApi:
    """Serve the Kubernetes API on ``sock`` (closed by the server when it stops). ``clock`` is
    the store's (the system's by default): what stamps creation and deletion times."""
    registry = default_registry()
    store = open_store(settings.store_url, clock=clock, kinds=registry.store_kinds)
    try:
        token = load_or_create_token(settings.token_file)
        identity = tls.load_or_create(settings.token_file.parent)
        server = KubeApiServer(store, token=token, registry=registry)
        await server.ensure_namespaces(settings.namespaces)
        if settings.install_crds:
            await server.install_crds(_release_crds())
        host, port = bound_address(sock)
        if host in ("0.0.0.0", "::"):
            host = "127.0.0.1"
        url = f"https://{format_address(host, port)}"
        await server.start(sock, identity.server_context())
    except BaseException:
        await store.close()
        raise
    if settings.kubeconfig is not None:
        write_kubeconfig(settings.kubeconfig, url, token, identity.authority_pem)
    return RunningKubeApi(server, store, url)


def _release_crds() -> Iterable[dict[str, object]]:
    from ..crdgen import custom_resource_definitions

    return custom_resource_definitions().values()
