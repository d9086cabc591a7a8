"""Leases and Events through the Kubernetes adapter on our API server, as the lease lock and
the controller's event recorder write them."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from api_targets import KubeApiTarget

from scalable_topics.controller.events import EventRecorder
from scalable_topics.model.clock import ManualClock
from scalable_topics.store import Invalid, LeaseLock, NotFound
from scalable_topics.store.kubernetes import KubernetesStore


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[KubernetesStore]:
    target = KubeApiTarget(tmp_path)
    await target.start(None, None)
    adapter = await target.adapter()
    try:
        yield adapter
    finally:
        await adapter.close()
        await target.stop()


async def test_lease_microtimes_keep_six_digits_on_the_wire(store: KubernetesStore) -> None:
    clock = ManualClock(datetime(2026, 3, 4, 5, 6, 7, tzinfo=UTC))  # microsecond 0
    lock = LeaseLock(store, "default", "leader", "me", 15, clock)
    assert await lock.try_acquire_or_renew()
    lease = await store.get("Lease", "default", "leader")
    assert lease["spec"]["acquireTime"] == "2026-03-04T05:06:07.000000Z"
    assert lease["spec"]["renewTime"] == "2026-03-04T05:06:07.000000Z"
    clock.advance(2.5)
    assert await lock.try_acquire_or_renew()
    renewed = await store.get("Lease", "default", "leader")
    assert renewed["spec"]["renewTime"] == "2026-03-04T05:06:09.500000Z"
    assert renewed["spec"]["acquireTime"] == lease["spec"]["acquireTime"]
    # Any other precision is refused, as kube-apiserver refuses it.
    with pytest.raises(Invalid):
        await store.replace(
            {**renewed, "spec": {**renewed["spec"], "renewTime": "2026-03-04T05:06:09Z"}}
        )
    assert await lock.release()
    deleted = await store.delete("Lease", "default", "leader")
    assert deleted["spec"]["holderIdentity"] == ""
    with pytest.raises(NotFound):
        await store.get("Lease", "default", "leader")


async def test_events_are_recorded_listed_and_deleted(store: KubernetesStore) -> None:
    recorder = EventRecorder(store, ManualClock(), "controller-0")
    involved = {
        "apiVersion": "scalabletopics.dev/v1",
        "kind": "ScalableTopic",
        "metadata": {"name": "orders", "namespace": "default", "uid": "u-1"},
    }
    await recorder.record_on(involved, "Warning", "SplitFailed", "no broker answered")
    [event] = (await store.list("Event", "default")).items
    assert (event["apiVersion"], event["kind"]) == ("v1", "Event")
    assert (event["reason"], event["type"]) == ("SplitFailed", "Warning")
    assert event["involvedObject"]["name"] == "orders"
    name = event["metadata"]["name"]
    assert name.startswith("orders.")
    deleted = await store.delete("Event", "default", name)
    assert {k: v for k, v in deleted.items() if k != "metadata"} == {
        k: v for k, v in event.items() if k != "metadata"
    }
    assert deleted["metadata"]["uid"] == event["metadata"]["uid"]
    assert (await store.list("Event", "default")).items == []
