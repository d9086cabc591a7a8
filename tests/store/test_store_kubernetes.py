"""The Kubernetes adapter's own parts: store URLs, where its configuration comes from, how API
errors become the port's, and what goes on the wire (against a server the test plays). The
port's contract on a real API server is test_store_contract.py's, on the "kubeapi" target."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer
from kubernetes_asyncio.client.exceptions import ApiException

from scalable_topics.store import (
    DEFAULT_KINDS,
    AlreadyExists,
    BudgetedStore,
    BudgetSettings,
    Conflict,
    EventType,
    Expired,
    Invalid,
    KindInfo,
    NotFound,
    StoreClosed,
    StoreError,
    default_budget,
    open_store,
)
from scalable_topics.store.kubernetes import (
    ClusterSource,
    KubernetesStore,
    error_from_status,
    load_configuration,
    parse_url,
    status_of,
)
from support.kubeconfig import write_kubeconfig
from support.ports import loopback_socket, port_of

TOKEN = "s3cret-token"
PROBE = KindInfo("StoreProbe", "test.scalabletopics.dev/v1", "storeprobes", status_subresource=True)
KINDS = {**DEFAULT_KINDS, PROBE.kind: PROBE}
LEASES = "/apis/coordination.k8s.io/v1/namespaces/default/leases"
PROBES = "/apis/test.scalabletopics.dev/v1/namespaces/default/storeprobes"

# -- store URLs ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("url", "source"),
    [
        ("kubernetes:", ClusterSource()),
        ("kubernetes:in-cluster", ClusterSource(in_cluster=True)),
        ("kubernetes:///etc/k8s/admin.conf", ClusterSource(path="/etc/k8s/admin.conf")),
        ("kubernetes:conf/kubeconfig", ClusterSource(path="conf/kubeconfig")),
        ("kubernetes:?context=staging", ClusterSource(context="staging")),
        ("kubernetes:///k/config?context=a%20b", ClusterSource(path="/k/config", context="a b")),
        ("kubernetes:my%20dir/config", ClusterSource(path="my dir/config")),
    ],
)
def test_store_urls_name_where_the_configuration_comes_from(
    url: str, source: ClusterSource
) -> None:
    assert parse_url(url) == source


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("kubernetes://api.example:6443", "names a host"),
        ("kubernetes:in-cluster?context=x", "no contexts"),
        ("kubernetes:?namespace=x", "unknown option namespace"),
        ("kubernetes:?context=", "exactly one"),
        ("kubernetes:?context=a&context=b", "exactly one"),
        ("kubernetes:x#frag", "names a host"),
    ],
)
def test_malformed_kubernetes_urls_are_refused(url: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_url(url)
    with pytest.raises(ValueError, match=message):
        open_store(url)


async def test_open_store_serves_kubernetes_urls_behind_their_default_budget() -> None:
    store = open_store("kubernetes:///nowhere/kubeconfig?context=c", kinds=KINDS)
    try:
        assert isinstance(store, BudgetedStore)
        assert isinstance(store.inner, KubernetesStore)
        assert store.inner.source == ClusterSource(path="/nowhere/kubeconfig", context="c")
        assert store.budget.settings == BudgetSettings(qps=50, burst=100)
        assert default_budget("kubernetes:") == BudgetSettings(qps=50, burst=100)
        with pytest.raises(StoreError, match="no kubeconfig at /nowhere/kubeconfig"):
            await store.get(PROBE.kind, "default", "x")
    finally:
        await store.close()


def test_importing_the_store_does_not_import_kubernetes_asyncio(tmp_path: Path) -> None:
    script = (
        "import sys, asyncio\n"
        "import scalable_topics.store as store\n"
        "from scalable_topics.store import open_store\n"
        "assert 'kubernetes_asyncio' not in sys.modules, 'imported by the package'\n"
        f"s = open_store('embedded://{tmp_path / 'x.db'}')\n"
        "asyncio.run(s.close())\n"
        "assert 'kubernetes_asyncio' not in sys.modules, 'imported by an embedded store'\n"
        "open_store('kubernetes:')\n"
        "assert 'kubernetes_asyncio' in sys.modules\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr


# -- configuration ------------------------------------------------------------------------------


async def test_a_kubeconfig_context_picks_the_server(tmp_path: Path) -> None:
    path = write_kubeconfig(
        tmp_path / "config",
        "http://127.0.0.1:1001",
        TOKEN,
        context="one",
        extra_contexts={"two": "http://127.0.0.1:1002"},
    )
    current = await load_configuration(ClusterSource(path=str(path)))
    assert current.host == "http://127.0.0.1:1001"
    assert current.api_key["BearerToken"] == f"Bearer {TOKEN}"
    other = await load_configuration(ClusterSource(path=str(path), context="two"))
    assert other.host == "http://127.0.0.1:1002"
    with pytest.raises(StoreError, match="three"):
        await load_configuration(ClusterSource(path=str(path), context="three"))
    assert path.read_text() == (tmp_path / "config").read_text()


async def test_the_default_kubeconfig_is_kubeconfig_then_home(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "home"
    (home / ".kube").mkdir(parents=True)
    write_kubeconfig(home / ".kube" / "config", "http://127.0.0.1:2001", TOKEN)
    named = write_kubeconfig(tmp_path / "named", "http://127.0.0.1:2002", TOKEN)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("KUBECONFIG", raising=False)
    assert (await load_configuration(parse_url("kubernetes:"))).host == "http://127.0.0.1:2001"
    monkeypatch.setenv("KUBECONFIG", str(named))  # read when the store opens, not at import
    assert (await load_configuration(parse_url("kubernetes:"))).host == "http://127.0.0.1:2002"
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "missing"))
    with pytest.raises(StoreError, match=r"no kubeconfig at .*missing"):
        await load_configuration(parse_url("kubernetes:"))


async def test_a_relative_kubeconfig_is_relative_to_the_working_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_kubeconfig(tmp_path / "conf", "http://127.0.0.1:3001", TOKEN)
    monkeypatch.chdir(tmp_path)
    assert (await load_configuration(parse_url("kubernetes:conf"))).host == "http://127.0.0.1:3001"


async def test_in_cluster_uses_the_service_account(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from kubernetes_asyncio.config import incluster_config

    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    with pytest.raises(StoreError, match="in-cluster service account"):
        await load_configuration(parse_url("kubernetes:in-cluster"))

    (tmp_path / "token").write_text("pod-token")
    (tmp_path / "ca.crt").write_text("not read until a TLS connection is made")
    monkeypatch.setattr(incluster_config, "SERVICE_TOKEN_FILENAME", str(tmp_path / "token"))
    monkeypatch.setattr(incluster_config, "SERVICE_CERT_FILENAME", str(tmp_path / "ca.crt"))
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "10.0.0.1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", "443")
    configuration = await load_configuration(parse_url("kubernetes:in-cluster"))
    assert configuration.host == "https://10.0.0.1:443"
    assert configuration.api_key["BearerToken"] == "Bearer pod-token"


# -- errors -------------------------------------------------------------------------------------


def api_error(code: int, reason: str, message: str, **details: Any) -> ApiException:
    exc = ApiException(status=code, reason="Whatever")
    status = {
        "kind": "Status",
        "apiVersion": "v1",
        "status": "Failure",
        "reason": reason,
        "message": message,
        "code": code,
    }
    if details:
        status["details"] = details
    exc.body = json.dumps(status)
    return exc


def mapped(exc: ApiException, **options: Any) -> StoreError:
    return error_from_status(status_of(exc), "StoreProbe", "ns", "p", **options)


def test_api_errors_become_the_ports() -> None:
    assert isinstance(mapped(api_error(404, "NotFound", 'storeprobes "p" not found')), NotFound)
    missing_type = mapped(
        api_error(404, "NotFound", "the server could not find the requested resource")
    )
    assert type(missing_type) is StoreError
    assert "does not serve StoreProbe" in str(missing_type)
    assert isinstance(mapped(api_error(409, "AlreadyExists", "exists")), AlreadyExists)
    # A create in a namespace that does not exist: the namespace is missing, not the object.
    missing_namespace = mapped(
        api_error(404, "NotFound", 'namespaces "ns" not found', name="ns", kind="namespaces")
    )
    assert type(missing_namespace) is StoreError
    assert "namespace 'ns' does not exist" in str(missing_namespace)

    conflict = mapped(
        api_error(409, "Conflict", "the object has been modified; please apply your changes"),
        expected="4",
    )
    assert isinstance(conflict, Conflict)
    assert (conflict.expected, conflict.actual) == ("4", "")
    precondition = mapped(
        api_error(
            409,
            "Conflict",
            "Precondition failed: ResourceVersion in precondition: 4, "
            "ResourceVersion in object meta: 9",
        ),
        expected="4",
    )
    assert isinstance(precondition, Conflict)
    assert (precondition.expected, precondition.actual) == ("4", "9")

    expired = mapped(api_error(410, "Expired", "too old resource version: 3 (17)"))
    assert isinstance(expired, Expired)
    assert (expired.resource_version, expired.oldest) == ("3", "17")
    # kubernetes_asyncio's Watch raises an ERROR event as ApiException(410, "Reason: message").
    from_watch = mapped(
        ApiException(status=410, reason="Expired: too old resource version: 3 (17)"),
        watched_from="3",
    )
    assert isinstance(from_watch, Expired)
    assert (from_watch.resource_version, from_watch.oldest) == ("3", "17")

    invalid = mapped(
        api_error(
            422,
            "Invalid",
            'StoreProbe.test.scalabletopics.dev "p" is invalid',
            causes=[{"field": "metadata.labels", "message": "Invalid value: 'a b'"}],
        )
    )
    assert isinstance(invalid, Invalid)
    assert "metadata.labels: Invalid value: 'a b'" in str(invalid)
    bad = mapped(api_error(400, "BadRequest", "resourceVersion should not be set"))
    assert isinstance(bad, Invalid)
    assert "resourceVersion should not be set" in str(bad)

    forbidden = mapped(api_error(403, "Forbidden", 'storeprobes "p" is forbidden: no'))
    assert type(forbidden) is StoreError
    assert "403 Forbidden" in str(forbidden)
    assert "is forbidden: no" in str(forbidden)
    not_json = ApiException(status=502, reason="Bad Gateway")
    not_json.body = "upstream died"
    assert "upstream died" in str(mapped(not_json))


# -- on the wire, against a server the test plays -------------------------------------------


@dataclass
class Seen:
    method: str
    path: str
    query: dict[str, str]
    headers: dict[str, str]
    text: str

    @property
    def body(self) -> Any:
        return json.loads(self.text) if self.text else None


Answer = Callable[[Seen, web.Request], Awaitable[web.StreamResponse]]


class FakeApi:
    """An API server that records each request and answers with ``answer``."""

    def __init__(self) -> None:
        self.seen: list[Seen] = []
        self.answer: Answer = self._not_found
        self.release = asyncio.Event()  # ends every held-open watch

    async def handle(self, request: web.Request) -> web.StreamResponse:
        seen = Seen(
            request.method,
            request.path,
            dict(request.query),
            dict(request.headers),
            await request.text(),
        )
        self.seen.append(seen)
        return await self.answer(seen, request)

    @staticmethod
    async def _not_found(seen: Seen, request: web.Request) -> web.StreamResponse:
        return status_response(404, "NotFound", "nothing here")


def status_response(code: int, reason: str, message: str) -> web.Response:
    return web.json_response(
        {"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": reason,
         "message": message, "code": code},
        status=code,
    )  # fmt: skip


def lease(version: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {"name": "l", "namespace": "default", "uid": "u-1", "resourceVersion": version},
        "spec": spec,
    }


def probe(name: str, version: str) -> dict[str, Any]:
    return {
        "apiVersion": PROBE.api_version,
        "kind": PROBE.kind,
        "metadata": {"name": name, "namespace": "default", "resourceVersion": version},
        "spec": {},
    }


async def stream(request: web.Request, events: list[dict[str, Any]]) -> web.StreamResponse:
    response = web.StreamResponse()
    response.content_type = "application/json"
    await response.prepare(request)
    for event in events:
        await response.write(json.dumps(event).encode() + b"\n")
    return response


@dataclass
class Fake:
    api: FakeApi
    store: KubernetesStore
    url: str


@pytest.fixture
async def fake(tmp_path: Path) -> AsyncIterator[Fake]:
    api = FakeApi()
    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", api.handle)
    sock = loopback_socket(0)
    port = port_of(sock)
    server = TestServer(app, host="127.0.0.1", port=port, socket_factory=lambda *_: sock)
    await server.start_server()
    url = f"http://127.0.0.1:{port}"
    kubeconfig = write_kubeconfig(tmp_path / "kubeconfig", url, TOKEN)
    store = await KubernetesStore.open(
        ClusterSource(path=str(kubeconfig)), kinds=KINDS, watch_timeout_seconds=5
    )
    try:
        yield Fake(api, store, url)
    finally:
        await store.close()
        api.release.set()
        await server.close()


async def test_requests_carry_the_token_and_leave_microtimes_alone(fake: Fake) -> None:
    renew = "2024-05-06T07:08:09.000000Z"  # microsecond 0: a datetime would lose the digits

    async def answer(seen: Seen, request: web.Request) -> web.StreamResponse:
        created = {**seen.body, "metadata": {**seen.body["metadata"], "resourceVersion": "1"}}
        return web.json_response(created, status=201)

    fake.api.answer = answer
    obj = lease("", holderIdentity="me", renewTime=renew, acquireTime=renew)
    del obj["metadata"]["resourceVersion"]
    created = await fake.store.create(obj)
    [seen] = fake.api.seen
    assert (seen.method, seen.path) == ("POST", LEASES)
    assert seen.headers["Authorization"] == f"Bearer {TOKEN}"
    assert seen.headers["User-Agent"] == "scalable-topics-store"
    assert seen.headers["Content-Type"] == "application/json"
    assert f'"renewTime": "{renew}"' in seen.text
    assert f'"acquireTime": "{renew}"' in seen.text
    assert created["spec"]["renewTime"] == renew


async def test_patches_are_merge_patches_with_the_precondition_inside(fake: Fake) -> None:
    async def answer(seen: Seen, request: web.Request) -> web.StreamResponse:
        return web.json_response(probe("p", "8"))

    fake.api.answer = answer
    patch = {"spec": {"x": None}}
    await fake.store.patch(PROBE.kind, "default", "p", patch, resource_version="7")
    await fake.store.patch_status(PROBE.kind, "default", "p", {"status": {"a": 1}})
    first, second = fake.api.seen
    assert (first.method, first.path) == ("PATCH", f"{PROBES}/p")
    assert first.headers["Content-Type"] == "application/merge-patch+json"
    assert first.body == {"spec": {"x": None}, "metadata": {"resourceVersion": "7"}}
    assert patch == {"spec": {"x": None}}  # the caller's patch is left alone
    assert (second.path, second.body) == (f"{PROBES}/p/status", {"status": {"a": 1}})
    assert second.headers["Content-Type"] == "application/merge-patch+json"


async def test_a_conflict_reads_the_version_the_store_has(fake: Fake) -> None:
    async def answer(seen: Seen, request: web.Request) -> web.StreamResponse:
        if seen.method == "PUT":
            return status_response(409, "Conflict", "the object has been modified")
        return web.json_response(probe("p", "9"))

    fake.api.answer = answer
    with pytest.raises(Conflict) as caught:
        await fake.store.replace(probe("p", "4"))
    assert (caught.value.expected, caught.value.actual) == ("4", "9")
    assert [(s.method, s.path) for s in fake.api.seen] == [
        ("PUT", f"{PROBES}/p"),
        ("GET", f"{PROBES}/p"),
    ]


async def test_deleting_a_builtin_kind_reads_what_it_deletes(fake: Fake) -> None:
    versions = iter(["5", "6"])

    async def answer(seen: Seen, request: web.Request) -> web.StreamResponse:
        if seen.method == "GET":
            return web.json_response(lease(next(versions)))
        if seen.body["preconditions"]["resourceVersion"] == "5":  # it moved on meanwhile
            return status_response(409, "Conflict", "Precondition failed: UID in precondition")
        return web.json_response({"kind": "Status", "apiVersion": "v1", "status": "Success"})

    fake.api.answer = answer
    deleted = await fake.store.delete("Lease", "default", "l")
    assert deleted == lease("6")
    assert [(s.method, s.body) for s in fake.api.seen] == [
        ("GET", None),
        ("DELETE", {"apiVersion": "v1", "kind": "DeleteOptions",
                    "preconditions": {"resourceVersion": "5", "uid": "u-1"}}),
        ("GET", None),
        ("DELETE", {"apiVersion": "v1", "kind": "DeleteOptions",
                    "preconditions": {"resourceVersion": "6", "uid": "u-1"}}),
    ]  # fmt: skip


async def test_deleting_a_custom_resource_answers_the_object(fake: Fake) -> None:
    async def answer(seen: Seen, request: web.Request) -> web.StreamResponse:
        return web.json_response(probe("p", "12"))

    fake.api.answer = answer
    assert await fake.store.delete(PROBE.kind, "default", "p", resource_version="11") == probe(
        "p", "12"
    )
    [seen] = fake.api.seen
    assert (seen.method, seen.path) == ("DELETE", f"{PROBES}/p")
    assert seen.body["preconditions"] == {"resourceVersion": "11"}


async def test_lists_follow_continue_tokens_and_keep_kinds(fake: Fake) -> None:
    async def answer(seen: Seen, request: web.Request) -> web.StreamResponse:
        bare = {k: v for k, v in lease("3").items() if k not in ("kind", "apiVersion")}
        if "continue" not in seen.query:
            meta = {"resourceVersion": "40", "continue": "next-page"}
            return web.json_response({"kind": "LeaseList", "metadata": meta, "items": [bare]})
        return web.json_response(
            {"kind": "LeaseList", "metadata": {"resourceVersion": "41"}, "items": [lease("4")]}
        )

    fake.api.answer = answer
    listed = await fake.store.list("Lease", label_selector="a=b")
    assert listed.resource_version == "40"  # the snapshot of the first page
    assert listed.items == [lease("3"), lease("4")]
    first, second = fake.api.seen
    assert first.path == "/apis/coordination.k8s.io/v1/leases"  # every namespace
    assert first.query == {"limit": "500", "labelSelector": "a=b"}
    assert second.query == {"limit": "500", "labelSelector": "a=b", "continue": "next-page"}


async def test_a_watch_goes_on_past_the_streams_the_server_ends(fake: Fake) -> None:
    async def answer(seen: Seen, request: web.Request) -> web.StreamResponse:
        if seen.query["resourceVersion"] == "10":  # this stream ends after one event
            return await stream(request, [{"type": "ADDED", "object": probe("a", "11")}])
        response = await stream(
            request,
            [
                {"type": "BOOKMARK", "object": {"kind": PROBE.kind, "apiVersion": "x/v1",
                                                "metadata": {"resourceVersion": "15"}}},
                {"type": "MODIFIED", "object": probe("a", "16")},
            ],
        )  # fmt: skip
        await fake.api.release.wait()
        return response

    fake.api.answer = answer
    async with fake.store.watch(PROBE.kind, resource_version="10", allow_bookmarks=True) as w:
        events = [await anext(w) for _ in range(3)]
    assert [(e.type, e.resource_version) for e in events] == [
        (EventType.ADDED, "11"),
        (EventType.BOOKMARK, "15"),
        (EventType.MODIFIED, "16"),
    ]
    assert events[1].object == {
        "kind": PROBE.kind,
        "apiVersion": "x/v1",
        "metadata": {"resourceVersion": "15"},
    }
    first, second = fake.api.seen
    assert first.query == {
        "watch": "true",
        "resourceVersion": "10",
        "allowWatchBookmarks": "true",
        "timeoutSeconds": "5",
    }
    assert second.query["resourceVersion"] == "11"
    assert fake.store.open_watches == 0


@pytest.mark.parametrize("how", ["error event", "status"])
async def test_a_watch_from_a_compacted_version_is_expired(fake: Fake, how: str) -> None:
    gone = {"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "Expired",
            "message": "too old resource version: 10 (20)", "code": 410}  # fmt: skip

    async def answer(seen: Seen, request: web.Request) -> web.StreamResponse:
        if how == "status":
            return web.json_response(gone, status=410)
        return await stream(request, [{"type": "ERROR", "object": gone}])

    fake.api.answer = answer
    with pytest.raises(Expired) as caught:
        async with fake.store.watch(PROBE.kind, resource_version="10") as w:
            await anext(w)
    assert (caught.value.resource_version, caught.value.oldest) == ("10", "20")
    assert len(fake.api.seen) == 1  # no second try with the same version


async def test_a_watch_without_a_version_lists_first(fake: Fake) -> None:
    async def answer(seen: Seen, request: web.Request) -> web.StreamResponse:
        if "watch" not in seen.query:
            items = [probe("a", "3"), probe("b", "2")]
            return web.json_response({"metadata": {"resourceVersion": "7"}, "items": items})
        response = await stream(request, [{"type": "DELETED", "object": probe("a", "8")}])
        await fake.api.release.wait()
        return response

    fake.api.answer = answer
    async with fake.store.watch(PROBE.kind, namespace="default", label_selector="x") as w:
        events = [await anext(w) for _ in range(3)]
    assert [(e.type.value, e.resource_version) for e in events] == [
        ("ADDED", "3"),
        ("ADDED", "2"),
        ("DELETED", "8"),
    ]
    watch = fake.api.seen[1]
    assert watch.path == PROBES
    assert (watch.query["resourceVersion"], watch.query["labelSelector"]) == ("7", "x")


async def test_closing_the_store_ends_its_watches(fake: Fake) -> None:
    async def answer(seen: Seen, request: web.Request) -> web.StreamResponse:
        response = await stream(request, [{"type": "ADDED", "object": probe("a", "2")}])
        await fake.api.release.wait()
        return response

    fake.api.answer = answer
    watch = fake.store.watch(PROBE.kind, resource_version="1")
    await watch.__aenter__()
    assert fake.store.open_watches == 1
    await fake.store.close()
    assert (await anext(watch)).resource_version == "2"  # delivered before the close
    with pytest.raises(StoreClosed):
        await anext(watch)
    assert fake.store.open_watches == 0
    with pytest.raises(StoreClosed):
        await fake.store.get(PROBE.kind, "default", "a")
    with pytest.raises(StoreClosed):
        fake.store.watch(PROBE.kind)


async def test_an_unreachable_server_is_a_store_error_naming_it(tmp_path: Path) -> None:
    sock = loopback_socket(0)
    port = port_of(sock)
    sock.close()  # nothing listens there now
    kubeconfig = write_kubeconfig(tmp_path / "kubeconfig", f"http://127.0.0.1:{port}", TOKEN)
    async with KubernetesStore(ClusterSource(path=str(kubeconfig)), kinds=KINDS) as store:
        with pytest.raises(StoreError, match=f"127.0.0.1:{port}"):
            await store.get(PROBE.kind, "default", "p")
        with pytest.raises(StoreError, match=f"127.0.0.1:{port}"):
            async with store.watch(PROBE.kind, resource_version="1") as watch:
                await anext(watch)


async def test_what_goes_into_a_url_is_checked_first(fake: Fake) -> None:
    with pytest.raises(Invalid, match="DNS subdomain"):
        await fake.store.get(PROBE.kind, "default", "../../secrets")
    with pytest.raises(Invalid, match="DNS label"):
        await fake.store.get(PROBE.kind, "a/b", "p")
    with pytest.raises(Invalid, match=r"metadata\.namespace is required"):
        await fake.store.get(PROBE.kind, "", "p")
    with pytest.raises(Invalid, match="resourceVersion"):
        await fake.store.replace({**probe("p", "1"), "metadata": {"name": "p", "namespace": "d"}})
    with pytest.raises(Invalid, match=r"metadata\.name"):
        await fake.store.patch(PROBE.kind, "default", "p", {"metadata": {"name": "q"}})
    with pytest.raises(Invalid, match="status subresource"):
        await fake.store.patch_status("Lease", "default", "p", {"status": {}})
    assert fake.api.seen == []
