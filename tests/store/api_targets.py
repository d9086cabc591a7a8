"""The contract suite's targets behind a Kubernetes API: our own API server (scalable_topics.kubeapi
over a fresh embedded store) and a real cluster, both reached through the Kubernetes adapter.

On an API server an object's namespace must exist. The suite names namespaces freely ("default",
"ns-a", ...), so every store a target hands out is wrapped in :class:`TestNamespaces`, which
creates each namespace before the first write into it. On a real cluster it also gives every
test namespaces of its own (``<prefix><name>``), hides everything outside them from lists and
watches, and deletes them when the test ends.
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
from collections.abc import Awaitable, Mapping
from pathlib import Path
from types import MappingProxyType, TracebackType
from typing import Any, Self

import yaml
from store_testkit import PROBE, PROBE_CRD, TEST_KINDS, Backend

from scalable_topics.listening import listening_socket
from scalable_topics.model.clock import Clock
from scalable_topics.store import (
    AlreadyExists,
    Conflict,
    EmbeddedStore,
    EventType,
    KindInfo,
    NotFound,
    Object,
    ObjectList,
    Store,
    StoreError,
    WatchEvent,
)
from scalable_topics.store.kubernetes import ClusterSource, KubernetesStore
from scalable_topics.store.selectors import is_dns_label
from support.kubeconfig import write_kubeconfig

NAMESPACE_INFO = KindInfo("Namespace", "v1", "namespaces", False, namespaced=False)
CRD_INFO = KindInfo(
    "CustomResourceDefinition",
    "apiextensions.k8s.io/v1",
    "customresourcedefinitions",
    status_subresource=True,
    namespaced=False,
)
# What the adapter serves in these targets: the suite's kinds, and what the harness writes.
ADAPTER_KINDS: Mapping[str, KindInfo] = MappingProxyType(
    {**TEST_KINDS, NAMESPACE_INFO.kind: NAMESPACE_INFO, CRD_INFO.kind: CRD_INFO}
)
KUBEAPI_TOKEN = "contract-suite-token"
# The real cluster's CRD and namespaces take a moment; a failing wait is bounded.
READY_SECONDS = 60.0


# -- namespaces --------------------------------------------------------------------------------


class NamespacePool:
    """The namespaces of one test on one API server, created on first write."""

    def __init__(self, prefix: str = "") -> None:
        self.prefix = prefix
        self.created: list[str] = []
        self._ready: set[str] = set()
        self._lock = asyncio.Lock()

    def inner(self, namespace: str | None) -> str | None:
        return self.prefix + namespace if namespace else namespace

    def outer(self, namespace: str) -> str:
        return namespace[len(self.prefix) :] if namespace else namespace

    def ours(self, obj: Object) -> bool:
        namespace = obj.get("metadata", {}).get("namespace") or ""
        return not namespace or namespace.startswith(self.prefix)

    async def ensure(self, store: Store, namespace: Any) -> None:
        """Create ``namespace`` (as the test names it) unless it exists; a name that is no
        namespace name is left for the store to refuse."""
        real = self.inner(namespace) if isinstance(namespace, str) else None
        if not real or real in self._ready or not is_dns_label(real):
            return
        async with self._lock:
            if real in self._ready:
                return
            try:
                await store.create(
                    {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": real}}
                )
                self.created.append(real)
            except AlreadyExists:
                pass
            self._ready.add(real)

    async def delete_created(self, store: Store) -> None:
        """Delete the namespaces this pool created, after lifting the finalizers the tests
        left on their objects (a namespace waits for its objects, and they for their
        finalizers, which no controller here removes)."""
        for name in self.created:
            for obj in (await store.list(PROBE, name)).items:
                if obj["metadata"].get("finalizers"):
                    with contextlib.suppress(NotFound):
                        lifted = {"metadata": {"finalizers": None}}
                        await store.patch(PROBE, name, obj["metadata"]["name"], lifted)
            with contextlib.suppress(NotFound):
                await store.delete(NAMESPACE_INFO.kind, "", name)
        self.created.clear()


class TestNamespaces:
    """A store whose namespaces are a NamespacePool's (see the module docstring)."""

    __test__ = False  # not a test class, whatever its name

    def __init__(self, inner: Store, pool: NamespacePool) -> None:
        self.inner = inner
        self.pool = pool

    # requests in, answers out

    def _in(self, obj: Object) -> Object:
        meta = obj.get("metadata") if isinstance(obj, dict) else None
        if not isinstance(meta, dict) or not isinstance(meta.get("namespace"), str):
            return obj
        return {**obj, "metadata": {**meta, "namespace": self.pool.inner(meta["namespace"])}}

    def _out(self, obj: Object) -> Object:
        meta = obj.get("metadata")
        if isinstance(meta, dict) and meta.get("namespace"):
            meta["namespace"] = self.pool.outer(meta["namespace"])
        return obj

    def _error(self, error: StoreError) -> StoreError:
        if isinstance(error, NotFound):
            return NotFound(error.kind, self.pool.outer(error.namespace), error.name)
        if isinstance(error, AlreadyExists):
            return AlreadyExists(error.kind, self.pool.outer(error.namespace), error.name)
        if isinstance(error, Conflict):
            return Conflict(
                error.kind,
                self.pool.outer(error.namespace),
                error.name,
                error.expected,
                error.actual,
            )
        return error

    async def _do(self, request: Awaitable[Object]) -> Object:
        try:
            return self._out(await request)
        except StoreError as error:
            translated = self._error(error)
            if translated is error:
                raise
            raise translated from None

    def _ns(self, namespace: str) -> str:
        return self.pool.inner(namespace) or ""

    # the port

    async def get(self, kind: str, namespace: str, name: str) -> Object:
        return await self._do(self.inner.get(kind, self._ns(namespace), name))

    async def list(
        self, kind: str, namespace: str | None = None, label_selector: str | None = None
    ) -> ObjectList:
        listed = await self.inner.list(kind, self.pool.inner(namespace), label_selector)
        items = [self._out(item) for item in listed.items if self.pool.ours(item)]
        return ObjectList(items=items, resource_version=listed.resource_version)

    async def create(self, obj: Object) -> Object:
        await self.pool.ensure(self.inner, _namespace_of(obj))
        return await self._do(self.inner.create(self._in(obj)))

    async def replace(self, obj: Object) -> Object:
        return await self._do(self.inner.replace(self._in(obj)))

    async def replace_status(self, obj: Object) -> Object:
        return await self._do(self.inner.replace_status(self._in(obj)))

    async def patch(
        self,
        kind: str,
        namespace: str,
        name: str,
        patch: Object,
        resource_version: str | None = None,
    ) -> Object:
        return await self._do(
            self.inner.patch(kind, self._ns(namespace), name, patch, resource_version)
        )

    async def patch_status(
        self,
        kind: str,
        namespace: str,
        name: str,
        patch: Object,
        resource_version: str | None = None,
    ) -> Object:
        return await self._do(
            self.inner.patch_status(kind, self._ns(namespace), name, patch, resource_version)
        )

    async def delete(
        self, kind: str, namespace: str, name: str, resource_version: str | None = None
    ) -> Object:
        return await self._do(self.inner.delete(kind, self._ns(namespace), name, resource_version))

    def watch(
        self,
        kind: str,
        namespace: str | None = None,
        resource_version: str | None = None,
        label_selector: str | None = None,
        allow_bookmarks: bool = False,
    ) -> _Watch:
        inner = self.inner.watch(
            kind, self.pool.inner(namespace), resource_version, label_selector, allow_bookmarks
        )
        return _Watch(self, inner)

    async def close(self) -> None:
        await self.inner.close()


def _namespace_of(obj: Any) -> Any:
    meta = obj.get("metadata") if isinstance(obj, dict) else None
    return meta.get("namespace") if isinstance(meta, dict) else None


class _Watch:
    def __init__(self, store: TestNamespaces, inner: Any) -> None:
        self._store = store
        self._inner = inner

    async def __aenter__(self) -> Self:
        await self._inner.__aenter__()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self._inner.__aexit__(exc_type, exc, tb)

    def __aiter__(self) -> Self:
        return self

    async def __anext__(self) -> WatchEvent:
        while True:
            event: WatchEvent = await anext(self._inner)
            if event.type is EventType.BOOKMARK:
                return event
            if self._store.pool.ours(event.object):
                return WatchEvent(event.type, self._store._out(event.object))

    async def aclose(self) -> None:
        await self._inner.aclose()


# -- the CRD -------------------------------------------------------------------------------------


def probe_crd() -> Object:
    crd: Object = yaml.safe_load(PROBE_CRD.read_text())
    return crd


async def apply_probe_crd(store: Store) -> None:
    """Create the StoreProbe CRD unless it exists, and wait until StoreProbes are served."""
    with contextlib.suppress(AlreadyExists):
        await store.create(probe_crd())
    async with asyncio.timeout(READY_SECONDS):
        while True:
            try:
                await store.list(PROBE, "default")
                return
            except NotFound:
                pass
            except StoreError as exc:
                if "does not serve" not in str(exc):
                    raise
            await asyncio.sleep(0.05)


# -- our API server ----------------------------------------------------------------------------


class KubeApiTarget:
    """Our API server over a fresh embedded store, started on the first store a test asks
    for, so that the test's clock and history limit are the store's."""

    def __init__(self, folder: Path, **store_options: Any) -> None:
        """``store_options``: EmbeddedStore options of the server's store (bookmark_interval,
        history_limit)."""
        self.folder = folder
        self.store_options = store_options
        self.kubeconfig = folder / "kubeconfig"
        self.pool = NamespacePool()
        self.server: Any = None
        self.store: EmbeddedStore | None = None
        self._lock = asyncio.Lock()

    async def start(self, clock: Clock | None, history_limit: int | None) -> None:
        from scalable_topics.kubeapi.server import KubeApiServer, default_registry

        registry = default_registry()
        options: dict[str, Any] = {"clock": clock, "poll_interval": 0.01, **self.store_options}
        if history_limit is not None:
            options["history_limit"] = history_limit
        self.store = await EmbeddedStore.open(
            self.folder / "kubeapi.db", kinds=registry.store_kinds, **options
        )
        sock = listening_socket("127.0.0.1", 0)
        host, port = sock.getsockname()[:2]
        self.server = KubeApiServer(self.store, token=KUBEAPI_TOKEN, registry=registry)
        await self.server.start(sock)
        write_kubeconfig(self.kubeconfig, f"http://{host}:{port}", KUBEAPI_TOKEN)
        admin = await self.adapter()
        try:
            await apply_probe_crd(admin)
        finally:
            await admin.close()

    async def adapter(self, **options: Any) -> KubernetesStore:
        return await KubernetesStore.open(
            ClusterSource(path=str(self.kubeconfig)), kinds=ADAPTER_KINDS, **options
        )

    async def open(self, clock: Clock | None, history_limit: int | None) -> Store:
        async with self._lock:
            if self.server is None:
                await self.start(clock, history_limit)
        return TestNamespaces(await self.adapter(), self.pool)

    async def stop(self) -> None:
        if self.server is not None:
            await self.server.stop()
            self.server = None
        if self.store is not None:
            await self.store.close()
            self.store = None


def kubeapi_backend(folder: Path) -> Backend:
    target = KubeApiTarget(folder)
    backend = Backend(
        "kubeapi", f"kubernetes://{target.kubeconfig}", target.open, compacts_on_request=True
    )
    backend.cleanup = target.stop
    return backend


# -- a real cluster ----------------------------------------------------------------------------


def cluster_backend(kubeconfig: str, context: str | None) -> Backend:
    """The cluster ``kubeconfig`` names: this test's namespaces, deleted when it ends."""
    pool = NamespacePool(prefix=f"stc-{secrets.token_hex(4)}-")
    source = ClusterSource(path=kubeconfig, context=context)
    applied = False

    async def opener(clock: Clock | None, history_limit: int | None) -> Store:
        nonlocal applied
        store = await KubernetesStore.open(source, kinds=ADAPTER_KINDS)
        if not applied:
            await apply_probe_crd(store)
            applied = True
        return TestNamespaces(store, pool)

    async def cleanup() -> None:
        async with KubernetesStore(source, kinds=ADAPTER_KINDS) as admin:
            await pool.delete_created(admin)

    url = f"kubernetes://{kubeconfig}" + (f"?context={context}" if context else "")
    backend = Backend(
        "cluster",
        url,
        opener,
        compacts_on_request=False,
        controls_clock=False,
        private_history=False,
    )
    backend.cleanup = cleanup
    return backend
