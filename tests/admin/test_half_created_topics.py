"""A topic in any partial state can be deleted, and a name no Segment could carry is refused
before anything is written: by the client's Admin, the admin API and the controller.

The state a 64-character name once left behind is built here through the store directly (every
surface refuses such a name now): the topic with the controller's finalizer and a layout, and
Segment objects the model refuses, one placed on a broker."""

from __future__ import annotations

import socket
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path

import aiohttp
import pytest

from scalable_topics.client.admin import Admin
from scalable_topics.model.layout import SegmentLayout
from scalable_topics.model.resources import (
    API_VERSION,
    FINALIZER,
    TOPIC_LABEL,
    ScalableTopic,
    Segment,
)
from scalable_topics.store import NotFound
from support.eventually import eventually
from support.inprocess_service import Service, running_service


@pytest.fixture
async def service(tmp_path: Path) -> AsyncIterator[Service]:
    async with running_service(tmp_path, brokers=2) as running:
        yield running


def closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


async def gone(service: Service, name: str) -> bool:
    try:
        await service.store.get(ScalableTopic.KIND, "default", name)
    except NotFound:
        return True
    return False


async def segment_objects(service: Service, name: str) -> list[str]:
    """Every Segment object of the topic, by label or by spec (a label cannot hold a name
    longer than 63 characters, so no selector can ask for one)."""
    listing = await service.store.list(Segment.KIND, namespace="default")
    return [
        item["metadata"]["name"]
        for item in listing.items
        if name in (item["metadata"].get("labels", {}).get(TOPIC_LABEL), item["spec"]["topic"])
    ]


async def test_the_admin_refuses_bad_names_before_sending_anything() -> None:
    """Nothing listens at the URL: a name checked after sending would fail to connect."""
    async with Admin(f"ws://127.0.0.1:{closed_port()}") as admin:
        with pytest.raises(ValueError, match=r"invalid topic: metadata\.name: topic name") as long:
            await admin.create_topic("o" * 64)
        assert "(it has 64 characters)" in str(long.value)
        with pytest.raises(ValueError, match=r"invalid topic: metadata\.namespace: namespace"):
            await admin.create_topic("Team/orders")
        with pytest.raises(ValueError, match=r"invalid topic: spec\.subscriptions\.1\.name"):
            await admin.create_topic("orders", subscriptions=["ok", "not ok"])
        with pytest.raises(ValueError, match="invalid subscription: name: subscription name"):
            await admin.create_subscription("orders", "not/ok")


async def test_the_admin_api_refuses_bad_names_before_writing(service: Service) -> None:
    port = service.brokers[0].port
    async with aiohttp.ClientSession() as http:
        for path, body, field in (
            (f"/admin/v1/topics/default/{'o' * 64}", {}, "metadata.name"),
            ("/admin/v1/topics/default/my.orders", {}, "metadata.name"),
            ("/admin/v1/topics/Default/orders", {}, "metadata.namespace"),
            (
                "/admin/v1/topics/default/orders",
                {"subscriptions": [{"name": "bad name"}]},
                "spec.subscriptions.0.name",
            ),
        ):
            async with http.put(f"http://127.0.0.1:{port}{path}", json=body) as answer:
                refusal = await answer.json()
            assert answer.status == 400
            assert refusal["code"] == "InvalidRequest"
            assert refusal["message"].startswith(f"invalid topic: {field}: ")
    assert (await service.store.list(ScalableTopic.KIND)).items == []


async def test_a_topic_stored_with_a_bad_name_fails_without_being_created(
    service: Service,
) -> None:
    """Written straight into the store (no surface takes it now): the controller writes no
    finalizer, layout or Segment, shows why, and the topic deletes at once."""
    name = "o" * 64
    await service.store.create(
        {
            "apiVersion": API_VERSION,
            "kind": ScalableTopic.KIND,
            "metadata": {"name": name, "namespace": "default"},
            "spec": {"initialSegments": 2},
        }
    )

    async def failed() -> bool:
        raw = await service.store.get(ScalableTopic.KIND, "default", name)
        return (raw.get("status") or {}).get("phase") == "Failed"

    await eventually(failed, "the topic shown as Failed")
    raw = await service.store.get(ScalableTopic.KIND, "default", name)
    assert raw["metadata"].get("finalizers", []) == []
    assert "segments" not in raw["status"]
    [ready] = [c for c in raw["status"]["conditions"] if c["type"] == "Ready"]
    assert ready["reason"] == "InvalidSpec"
    assert ready["message"].startswith(f"metadata.name: topic name '{name}' is not a DNS label")
    assert await segment_objects(service, name) == []
    async with Admin(service.url) as admin:
        assert (await admin.delete_topic(name))["name"] == name
    assert await gone(service, name)


async def write_half_created(service: Service, name: str) -> SegmentLayout:
    """The topic as the controller leaves it between writing the layout and making its
    Segments: its finalizer, a layout of two segments, phase Pending."""
    layout = SegmentLayout.initial(2, datetime.now(UTC))
    await service.store.create(
        {
            "apiVersion": API_VERSION,
            "kind": ScalableTopic.KIND,
            "metadata": {"name": name, "namespace": "default", "finalizers": [FINALIZER]},
            "spec": {"initialSegments": 2},
        }
    )
    await service.store.patch_status(
        ScalableTopic.KIND, "default", name, {"status": {**layout.to_status(), "phase": "Pending"}}
    )
    return layout


async def test_a_64_character_topic_left_half_created_can_be_deleted(service: Service) -> None:
    """What a 64-character name once left: the layout written, its Segments refused (their
    label cannot hold the name), the topic stuck. ``stctl topics delete`` (the Admin) ends it."""
    name = "o" * 64
    await write_half_created(service, name)
    async with Admin(service.url) as admin:
        [listed] = await admin.list_topics("default")
        assert (listed["name"], listed["activeSegments"]) == (name, 2)
        summary = await admin.delete_topic(name)
        assert (summary["name"], summary["deleting"]) == (name, True)
    await eventually(lambda: gone(service, name), "the topic deleted")


async def test_a_topic_whose_segments_the_model_refuses_can_be_deleted(service: Service) -> None:
    """A name with a '.' (a DNS subdomain: the API server took it before the CRD's rule):
    Segment objects whose spec the model refuses, one placed on a broker that has no storage
    for it. Describe shows them, and deleting removes every object, then the topic."""
    name = "my.orders"
    layout = await write_half_created(service, name)
    placed_on = service.url.split(",")[1]
    for info in layout.segments.values():
        object_name = f"{name}-{info.descriptor}"
        await service.store.create(
            {
                "apiVersion": API_VERSION,
                "kind": Segment.KIND,
                "metadata": {
                    "name": object_name,
                    "namespace": "default",
                    "labels": {TOPIC_LABEL: name},
                },
                "spec": {
                    "topic": name,
                    "segmentId": info.segment_id,
                    "hashRange": {"start": info.hash_range.start, "end": info.hash_range.end},
                },
            }
        )
        if info.segment_id == 0:
            await service.store.patch_status(
                Segment.KIND,
                "default",
                object_name,
                {"status": {"state": "Pending", "broker": placed_on}},
            )
    async with Admin(service.url) as admin:
        described = await admin.describe_topic(name)
        assert [(s["id"], s["broker"]) for s in described["segments"]] == [
            (0, placed_on),
            (1, None),
        ]
        assert (await admin.delete_topic(name))["deleting"] is True
    await eventually(lambda: gone(service, name), "the topic deleted")
    assert await segment_objects(service, name) == []
