"""Starting the API server the way ``stctl kube-api`` and ``stctl standalone`` both do: its own
store client, the system namespaces, this release's CRDs installed, its users (one token, or a
token file), a kubeconfig, and an audit log if asked for."""

from __future__ import annotations

import socket
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from ..listening import bound_address, format_address
from ..model.clock import Clock
from ..store import Store, open_store
from . import tls
from .audit import AuditLog
from .kubeconfig import load_or_create_token, write_kubeconfig
from .server import KubeApiServer, default_registry
from .token_auth_file import load_token_auth_file
from .users import TokenUsers


@dataclass(frozen=True, slots=True)
class KubeApiSettings:
    """Exactly one of ``token_file`` and ``token_auth_file`` says who may call; the directory
    of the one given also keeps the TLS identity (kube-api*.crt, .key)."""

    store_url: str
    token_file: Path | None  # one token, of the user admin; created (mode 0600) when missing
    kubeconfig: Path | None  # where to write a kubeconfig for this server, if anywhere
    install_crds: bool = True
    namespaces: tuple[str, ...] = ()  # created at start besides the system ones
    token_auth_file: Path | None = None  # users by token, kube-apiserver's --token-auth-file
    audit_log: Path | None = None  # where to append a line per request answered, if anywhere

    def __post_init__(self) -> None:
        if (self.token_file is None) == (self.token_auth_file is None):
            raise ValueError("exactly one of token_file and token_auth_file is needed")

    @property
    def state_directory(self) -> Path:
        given = self.token_file or self.token_auth_file
        assert given is not None
        return given.parent


@dataclass
class RunningKubeApi:
    server: KubeApiServer
    store: Store
    url: str
    audit: AuditLog | None = None

    async def stop(self) -> None:
        try:
            await self.server.stop()
        finally:
            try:
                await self.store.close()
            finally:
                if self.audit is not None:
                    self.audit.close()


async def start_kube_api(
    settings: KubeApiSettings, sock: socket.socket, *, clock: Clock | None = None
) -> RunningKubeApi:
    """Serve the Kubernetes API on ``sock`` (closed by the server when it stops). ``clock`` is
    the store's (the system's by default): what stamps creation and deletion times. A token
    file that cannot be used raises ``TokenFileError`` (a ValueError) before anything starts."""
    users = _users(settings)
    registry = default_registry()
    store = open_store(settings.store_url, clock=clock, kinds=registry.store_kinds)
    audit: AuditLog | None = None
    try:
        identity = tls.load_or_create(settings.state_directory)
        audit = AuditLog.open(settings.audit_log) if settings.audit_log is not None else None
        server = KubeApiServer(store, users=users, registry=registry, audit=audit)
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
        if audit is not None:
            audit.close()
        raise
    if settings.kubeconfig is not None:
        write_kubeconfig(settings.kubeconfig, url, users.first_token, identity.authority_pem)
    return RunningKubeApi(server, store, url, audit)


def _users(settings: KubeApiSettings) -> TokenUsers:
    """The users of the token file given; a kubeconfig carries the first one's token."""
    if settings.token_auth_file is not None:
        return load_token_auth_file(settings.token_auth_file)
    assert settings.token_file is not None
    return TokenUsers.single(load_or_create_token(settings.token_file))


def _release_crds() -> Iterable[dict[str, object]]:
    from ..crdgen import custom_resource_definitions

    return custom_resource_definitions().values()
