"""Watches over HTTP, as Kubernetes clients see them: resume, bookmarks, timeouts, 410."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from scalable_topics.crdgen import custom_resource_definitions
from scalable_topics.kubeapi.http import MAX_BODY_BYTES
from scalable_topics.kubeapi.server import KubeApiServer, default_registry
from scalable_topics.listening import bound_address, listening_socket
from scalable_topics.store import EmbeddedStore

TOKEN = "watch-test-token"
TOPICS = "/apis/scalabletopics.dev/v1alpha1/namespaces/default/scalabletopics"
HISTORY = 40
Object = dict[str, Any]


@pytest.fixture
async def api(tmp_path: Path) -> AsyncIterator[tuple[aiohttp.ClientSession, KubeApiServer]]:
    registry = default_registry()
    store = await EmbeddedStore.open(
        tmp_path / "s.db",
        kinds=registry.store_kinds,
        poll_interval=0.01,
        history_limit=HISTORY,
        bookmark_interval=0.05,
    )
    server = KubeApiServer(store, token=TOKEN, registry=registry)
    await server.install_crds(custom_resource_definitions().values())
    sock = listening_socket("127.0.0.1", 0)
    await server.start(sock)
    host, port = bound_address(sock)
    headers = {"Authorization": f"Bearer {TOKEN}"}
    async with aiohttp.ClientSession(f"http://{host}:{port}", headers=headers) as session:
        yield session, server
    await server.stop()
    await store.close()


def topic(name: str, labels: dict[str, str] | None = None) -> Object:
    return {
        "apiVersion": "scalabletopics.dev/v1alpha1",
        "kind": "ScalableTopic",
        "metadata": {"name": name, "labels": labels or {}},
        "spec": {"initialSegments": 1},
    }


async def create(session: aiohttp.ClientSession, name: str, **labels: str) -> Object:
    async with session.post(TOPICS, json=topic(name, labels)) as response:
        assert response.status == 201, await response.text()
        created: Object = await response.json()
        return created


async def relabel(session: aiohttp.ClientSession, name: str, **labels: str) -> Object:
    patch = {"metadata": {"labels": labels}}
    headers = {"Content-Type": "application/merge-patch+json"}
    async with session.patch(f"{TOPICS}/{name}", data=json.dumps(patch), headers=headers) as r:
        assert r.status == 200, await r.text()
        patched: Object = await r.json()
        return patched


async def events(session: aiohttp.ClientSession, count: int | None, **params: str) -> list[Object]:
    """The first ``count`` events of a watch (every event until it ends, with None)."""
    received: list[Object] = []
    async with session.get(TOPICS, params={"watch": "true", **params}) as response:
        assert response.status == 200, await response.text()
        async for line in response.content:
            received.append(json.loads(line))
            if count is not None and len(received) == count:
                break
    return received


async def test_a_watch_resumes_with_every_later_change_once(api: Any) -> None:
    session, _ = api
    start = (await create(session, "orders"))["metadata"]["resourceVersion"]
    versions = [
        (await relabel(session, "orders", step=str(step)))["metadata"]["resourceVersion"]
        for step in range(5)
    ]
    seen = await events(session, 5, resourceVersion=start)
    assert [e["type"] for e in seen] == ["MODIFIED"] * 5
    assert [e["object"]["metadata"]["resourceVersion"] for e in seen] == versions
    assert [e["object"]["metadata"]["labels"]["step"] for e in seen] == list("01234")


async def test_timeout_seconds_ends_the_stream(api: Any) -> None:
    session, _ = api
    await create(session, "orders")
    seen = await events(session, None, timeoutSeconds="1")
    assert [e["type"] for e in seen] == ["ADDED"]


async def test_bookmarks_carry_a_version_to_resume_from(api: Any) -> None:
    session, _ = api
    created = await create(session, "orders", app="a")
    async with session.get(
        TOPICS,
        params={
            "watch": "true",
            "allowWatchBookmarks": "true",
            "labelSelector": "app=a",
            "resourceVersion": created["metadata"]["resourceVersion"],
        },
    ) as response:
        await create(session, "other", app="b")  # moves the history on, outside the selection
        bookmark = json.loads(await response.content.readline())
    assert bookmark["type"] == "BOOKMARK"
    assert bookmark["object"]["kind"] == "ScalableTopic"
    mark = bookmark["object"]["metadata"]["resourceVersion"]
    assert int(mark) > int(created["metadata"]["resourceVersion"])
    changed = await relabel(session, "orders", app="a", step="1")
    resumed = await events(session, 1, resourceVersion=mark, labelSelector="app=a")
    assert (
        resumed[0]["object"]["metadata"]["resourceVersion"]
        == changed["metadata"]["resourceVersion"]
    )


async def test_a_version_no_longer_kept_is_an_error_event_with_410(api: Any) -> None:
    session, _ = api
    start = (await create(session, "orders"))["metadata"]["resourceVersion"]
    for step in range(HISTORY + 5):
        await relabel(session, "orders", step=str(step))
    seen = await events(session, None, resourceVersion=start)
    assert len(seen) == 1 and seen[0]["type"] == "ERROR"
    status = seen[0]["object"]
    assert (status["kind"], status["code"], status["reason"]) == ("Status", 410, "Expired")
    assert "too old resource version" in status["message"]


async def test_an_object_leaving_the_selection_arrives_as_deleted(api: Any) -> None:
    session, _ = api
    start = (await create(session, "orders", tier="gold"))["metadata"]["resourceVersion"]
    await relabel(session, "orders", tier="silver")
    seen = await events(session, 1, resourceVersion=start, labelSelector="tier=gold")
    assert seen[0]["type"] == "DELETED"
    assert seen[0]["object"]["metadata"]["name"] == "orders"


async def test_a_watch_list_sends_the_objects_then_marks_their_end(api: Any) -> None:
    session, _ = api
    await create(session, "a")
    await create(session, "b")
    seen = await events(
        session,
        3,
        sendInitialEvents="true",
        allowWatchBookmarks="true",
        resourceVersionMatch="NotOlderThan",
    )
    assert [(e["type"], e["object"]["metadata"].get("name")) for e in seen[:2]] == [
        ("ADDED", "a"),
        ("ADDED", "b"),
    ]
    end = seen[2]
    assert end["type"] == "BOOKMARK"
    assert end["object"]["metadata"]["annotations"] == {"k8s.io/initial-events-end": "true"}


async def test_a_watch_without_the_token_is_refused(api: Any) -> None:
    session, _ = api
    async with session.get(TOPICS, params={"watch": "true"}, headers={"Authorization": ""}) as r:
        assert r.status == 401
        assert (await r.json())["reason"] == "Unauthorized"


async def test_a_bad_label_selector_is_a_bad_request_on_list_and_watch(api: Any) -> None:
    session, _ = api
    for params in ({"labelSelector": "a=b=c"}, {"labelSelector": "a=b=c", "watch": "true"}):
        async with session.get(TOPICS, params=params) as response:
            assert response.status == 400
            status = await response.json()
            assert status["reason"] == "BadRequest" and "None" not in status["message"]


async def test_create_refuses_a_resource_version_and_builtin_deletes_answer_a_status(
    api: Any,
) -> None:
    session, _ = api
    body = topic("orders")
    body["metadata"]["resourceVersion"] = "7"
    async with session.post(TOPICS, json=body) as response:
        assert response.status == 500
        assert "resourceVersion should not be set" in (await response.json())["message"]
    lease = {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {"name": "l1"},
        "spec": {"holderIdentity": "me"},
    }
    leases = "/apis/coordination.k8s.io/v1/namespaces/default/leases"
    async with session.post(leases, json=lease) as response:
        assert response.status == 201
        uid = (await response.json())["metadata"]["uid"]
    async with session.delete(f"{leases}/l1") as response:
        assert response.status == 200
        status = await response.json()
    assert (status["kind"], status["status"]) == ("Status", "Success")
    assert status["details"] == {
        "name": "l1",
        "group": "coordination.k8s.io",
        "kind": "leases",
        "uid": uid,
    }
    await create(session, "orders")
    async with session.delete(f"{TOPICS}/orders") as response:
        assert response.status == 200
        assert (await response.json())["kind"] == "ScalableTopic"


async def test_a_body_above_the_limit_and_a_watch_above_the_limit_are_refused(
    tmp_path: Path,
) -> None:
    registry = default_registry()
    store = await EmbeddedStore.open(tmp_path / "l.db", kinds=registry.store_kinds)
    server = KubeApiServer(store, token=TOKEN, registry=registry, max_watches=1)
    await server.install_crds(custom_resource_definitions().values())
    sock = listening_socket("127.0.0.1", 0)
    await server.start(sock)
    host, port = bound_address(sock)
    headers = {"Authorization": f"Bearer {TOKEN}"}
    try:
        async with aiohttp.ClientSession(f"http://{host}:{port}", headers=headers) as session:
            huge = topic("huge")
            huge["metadata"]["annotations"] = {"a": "x" * (MAX_BODY_BYTES + 1)}
            async with session.post(TOPICS, json=huge) as response:
                assert response.status == 413
                assert (await response.json())["kind"] == "Status"
            async with session.get(TOPICS, params={"watch": "true"}) as first:
                assert first.status == 200
                async with session.get(TOPICS, params={"watch": "true"}) as second:
                    assert second.status == 429
                    assert second.headers["Retry-After"] == "1"
                    assert (await second.json())["reason"] == "TooManyRequests"
    finally:
        await server.stop()
        await store.close()
