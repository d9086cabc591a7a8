"""Garbage collection by ownerReference, namespace deletion and CRD cleanup."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from scalable_topics.kubeapi.admission import Admitted, FieldValidation
from scalable_topics.kubeapi.collector import ORPHAN, TERMINATING, Collector, sweep_may_change
from scalable_topics.kubeapi.operations import Operations
from scalable_topics.kubeapi.registry import Registry
from scalable_topics.kubeapi.resources import ResourceType
from scalable_topics.model.clock import ManualClock
from scalable_topics.store import EmbeddedStore, EventType, NotFound
from scalable_topics.store.informer import Change
from support.eventually import eventually

NAMESPACE = ResourceType(
    "", "v1", "Namespace", "namespaces", "namespace", namespaced=False, status_subresource=True
)
OWNER = ResourceType("test.dev", "v1", "Owner", "owners", "owner", namespaced=True)
PART = ResourceType("test.dev", "v1", "Part", "parts", "part", namespaced=True)
EVENT = ResourceType("", "v1", "Event", "events", "event", namespaced=True)
STRICT = FieldValidation.STRICT
Object = dict[str, Any]


def admit_all(
    resource: ResourceType, new: Object, old: Object | None, fv: FieldValidation
) -> Admitted:
    return Admitted(new, ())


@pytest.fixture
async def ops(tmp_path: Path) -> AsyncIterator[Operations]:
    registry = Registry([NAMESPACE, OWNER, PART])
    store = await EmbeddedStore.open(
        tmp_path / "s.db", kinds=registry.store_kinds, poll_interval=0.01
    )
    collector = Collector(store, registry, interval=0.01)
    collector.start()
    operations = Operations(store, registry, admit_all)
    await store.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "default"}})
    yield operations
    await collector.stop()
    await store.close()


async def owner_with_parts(ops: Operations, count: int = 2) -> tuple[Object, list[str]]:
    owner = (
        await ops.create(
            OWNER,
            "default",
            {"apiVersion": "test.dev/v1", "kind": "Owner", "metadata": {"name": "o"}},
            STRICT,
        )
    ).object
    ref = {
        "apiVersion": "test.dev/v1",
        "kind": "Owner",
        "name": "o",
        "uid": owner["metadata"]["uid"],
    }
    names = [f"p{i}" for i in range(count)]
    for name in names:
        body = {
            "apiVersion": "test.dev/v1",
            "kind": "Part",
            "metadata": {"name": name, "ownerReferences": [ref]},
        }
        await ops.create(PART, "default", body, STRICT)
    return owner, names


async def exists(ops: Operations, kind: str, name: str, namespace: str = "default") -> bool:
    try:
        await ops.store.get(kind, namespace, name)
    except NotFound:
        return False
    return True


async def test_deleting_an_owner_collects_its_dependents(ops: Operations) -> None:
    await owner_with_parts(ops)
    await ops.delete(OWNER, "default", "o")

    async def parts_gone() -> bool:
        return not (await ops.store.list("Part")).items

    await eventually(parts_gone, "the parts to be collected")


async def test_a_dependent_with_another_live_owner_only_loses_the_reference(
    ops: Operations,
) -> None:
    _, names = await owner_with_parts(ops, 1)
    other = (
        await ops.create(
            OWNER,
            "default",
            {"apiVersion": "test.dev/v1", "kind": "Owner", "metadata": {"name": "q"}},
            STRICT,
        )
    ).object
    part = await ops.store.get("Part", "default", names[0])
    refs = [
        *part["metadata"]["ownerReferences"],
        {
            "apiVersion": "test.dev/v1",
            "kind": "Owner",
            "name": "q",
            "uid": other["metadata"]["uid"],
        },
    ]
    await ops.store.patch("Part", "default", names[0], {"metadata": {"ownerReferences": refs}})
    await ops.delete(OWNER, "default", "o")

    async def one_reference_left() -> bool:
        found = await ops.store.get("Part", "default", names[0])
        return [r["name"] for r in found["metadata"]["ownerReferences"]] == ["q"]

    await eventually(one_reference_left, "the dangling reference to be dropped")


async def test_orphan_propagation_keeps_dependents_without_the_reference(ops: Operations) -> None:
    _, names = await owner_with_parts(ops)
    await ops.delete(OWNER, "default", "o", propagation="Orphan")

    async def owner_gone() -> bool:
        return not await exists(ops, "Owner", "o")

    await eventually(owner_gone, "the owner to go")
    for name in names:
        part = await ops.store.get("Part", "default", name)
        assert "ownerReferences" not in part["metadata"]


async def test_foreground_propagation_deletes_dependents_first(ops: Operations) -> None:
    _, names = await owner_with_parts(ops)
    await ops.store.patch("Part", "default", names[0], {"metadata": {"finalizers": ["x.dev/hold"]}})
    marked = await ops.delete(OWNER, "default", "o", propagation="Foreground")
    assert not marked.removed and "foregroundDeletion" in marked.object["metadata"]["finalizers"]

    async def held_part_marked() -> bool:
        part = await ops.store.get("Part", "default", names[0])
        return "deletionTimestamp" in part["metadata"] and not await exists(ops, "Part", names[1])

    await eventually(held_part_marked, "the parts to be deleted")
    assert await exists(ops, "Owner", "o")  # a dependent is still there
    await ops.store.patch("Part", "default", names[0], {"metadata": {"finalizers": None}})

    async def owner_gone() -> bool:
        return not await exists(ops, "Owner", "o")

    await eventually(owner_gone, "the owner to go once its dependents are gone")


async def test_a_terminating_namespace_is_emptied_then_removed(ops: Operations) -> None:
    await ops.store.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team"}})
    body = {
        "apiVersion": "test.dev/v1",
        "kind": "Owner",
        "metadata": {"name": "o", "finalizers": ["x.dev/hold"]},
    }
    await ops.create(OWNER, "team", body, STRICT)
    deleted = await ops.delete(NAMESPACE, None, "team")
    assert not deleted.removed and deleted.object["status"]["phase"] == "Terminating"

    async def owner_marked() -> bool:
        found = await ops.store.get("Owner", "team", "o")
        return "deletionTimestamp" in found["metadata"]

    await eventually(owner_marked, "the namespace's objects to be deleted")
    assert await exists(ops, "Namespace", "team", "")
    await ops.store.patch("Owner", "team", "o", {"metadata": {"finalizers": None}})

    async def namespace_gone() -> bool:
        return not await exists(ops, "Namespace", "team", "")

    await eventually(namespace_gone, "the empty namespace to go")


async def test_events_expire_an_hour_after_they_were_last_seen(tmp_path: Path) -> None:
    registry = Registry([NAMESPACE, EVENT])
    clock = ManualClock(datetime(2026, 1, 1, 12, 0, tzinfo=UTC))
    async with await EmbeddedStore.open(tmp_path / "e.db", kinds=registry.store_kinds) as store:
        collector = Collector(store, registry, clock=clock)
        for name, last_seen in (
            ("old", "2026-01-01T10:59:59Z"),
            ("recent", "2026-01-01T11:30:00Z"),
        ):
            await store.create(
                {
                    "apiVersion": "v1",
                    "kind": "Event",
                    "metadata": {"name": name, "namespace": "default"},
                    "lastTimestamp": last_seen,
                }
            )
        await collector.expire_events()
        assert [e["metadata"]["name"] for e in (await store.list("Event")).items] == ["recent"]
        assert collector.events_expired == 1


def changed(old: Object | None, new: Object | None) -> Change:
    kind = (
        EventType.ADDED if old is None else EventType.DELETED if new is None else EventType.MODIFIED
    )
    return Change(kind, ("default", "o"), old, new)


def test_only_changes_a_sweep_reads_wake_the_collector() -> None:
    lease = {
        "kind": "Lease",
        "metadata": {"name": "o", "uid": "u1", "resourceVersion": "1"},
        "spec": {"holderIdentity": "a", "renewTime": "2024-01-01T00:00:00.000000Z"},
    }
    renewed = {
        **lease,
        "metadata": {**lease["metadata"], "resourceVersion": "2"},
        "spec": {**lease["spec"], "renewTime": "2024-01-01T00:00:02.000000Z"},
    }
    # A renewal (spec and resourceVersion only): nothing a sweep reads.
    assert not sweep_may_change(changed(lease, renewed))
    assert sweep_may_change(changed(None, lease))
    assert sweep_may_change(changed(lease, None))
    ref = {"apiVersion": "test.dev/v1", "kind": "Owner", "name": "x", "uid": "u0"}
    for field, value in [
        ("ownerReferences", [ref]),
        ("deletionTimestamp", "2024-01-01T00:00:03Z"),
        ("finalizers", [ORPHAN]),
        ("uid", "u2"),  # deleted and created again between two events
    ]:
        moved = {**renewed, "metadata": {**renewed["metadata"], field: value}}
        assert sweep_may_change(changed(lease, moved)), field
    namespace = {"kind": "Namespace", "metadata": {"name": "n"}, "status": {"phase": "Active"}}
    terminating = {**namespace, "status": {"phase": TERMINATING}}
    assert sweep_may_change(changed(namespace, terminating))
