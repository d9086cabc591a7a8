"""Values at and beyond what the protocol and storage can hold are refused at the boundary,
naming the field, and leave the segment working (issue: the data plane under bad input)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import aiohttp
import pytest

from scalable_topics.broker.segment_meta import META_FILE, load_meta
from scalable_topics.model.resources import ProducerAccessMode
from scalable_topics.protocol import BatchMessage, ErrorCode, SegmentSubscriptionType
from scalable_topics.protocol.limits import MAX_PRODUCER_EPOCH, MAX_REQUESTED_PRODUCER_EPOCH
from support.broker_process import BrokerProcess
from support.wire_client import RequestFailed, WireClient

TOPIC = "default/orders"
SEGMENT = "/default/orders/0000-ffff-0"
FENCING = ProducerAccessMode.EXCLUSIVE_WITH_FENCING


async def make_segment(broker: BrokerProcess) -> None:
    status, payload = await broker.admin("PUT", SEGMENT, {"subscriptions": ["sub"]})
    assert status == 201, payload


async def test_an_epoch_beyond_the_largest_is_refused_and_the_segment_keeps_working(
    broker: BrokerProcess,
) -> None:
    """An ExclusiveWithFencing open at 2**64-1 followed by a takeover used to leave a stored
    epoch of 2**64, which no frame can carry: every later producer of the segment failed. And
    an open at 2**63-1 followed by a takeover left 2**63, past any epoch the controller can
    fence with: the topic's exclusive grants failed for good (the wire fuzzer found it)."""
    await make_segment(broker)
    attacker = await WireClient.connect(broker.ws_url)
    try:
        for request_id, epoch in enumerate(
            (2**64 - 1, MAX_PRODUCER_EPOCH, MAX_REQUESTED_PRODUCER_EPOCH + 1), start=1
        ):
            with pytest.raises(RequestFailed) as refused:
                await attacker.open_producer(
                    request_id, TOPIC, 0, name="a", mode=FENCING, epoch=epoch
                )
            assert refused.value.code is ErrorCode.INVALID_REQUEST
            assert "producer_epoch" in str(refused.value)
        largest = await attacker.open_producer(
            9, TOPIC, 0, name="a", mode=FENCING, epoch=MAX_REQUESTED_PRODUCER_EPOCH
        )
        assert largest.producer_epoch == MAX_REQUESTED_PRODUCER_EPOCH
    finally:
        await attacker.close()
    user = await WireClient.connect(broker.ws_url)
    try:
        opened = await user.open_producer(1, TOPIC, 0, name="b", mode=FENCING)  # a takeover
        assert opened.producer_epoch == MAX_REQUESTED_PRODUCER_EPOCH + 1
        await user.send(1, 0, BatchMessage(b"still writable"))
    finally:
        await user.close()
    status, stats = await broker.admin("POST", SEGMENT + "/fence", {"epoch": 2**62 + 2})
    assert status == 200, stats  # the controller can still fence past it


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/fence", {"epoch": 2**64}),
        ("/fence", {"epoch": MAX_PRODUCER_EPOCH + 1}),
        ("/fence", {"epoch": -1}),
        ("/fence", None),
        ("/release", {"epoch": 2**64}),
    ],
)
async def test_the_segment_admin_api_refuses_epochs_it_cannot_keep(
    broker: BrokerProcess, path: str, body: object
) -> None:
    await make_segment(broker)
    status, payload = await broker.admin("POST", SEGMENT + path, body)
    assert status == 400, payload
    assert isinstance(payload, dict) and payload["code"] == "InvalidRequest"
    assert "epoch" in payload["message"]
    status, stats = await broker.admin("GET", SEGMENT + "/stats")
    assert isinstance(stats, dict) and stats["producerEpoch"] == 0


@pytest.mark.parametrize("name", ["", "-starts-badly", "has space", "x" * 129])
async def test_a_bad_subscription_name_is_an_invalid_request(
    broker: BrokerProcess, name: str
) -> None:
    await make_segment(broker)
    client = await WireClient.connect(broker.ws_url)
    try:
        with pytest.raises(RequestFailed) as refused:
            await client.subscribe(1, TOPIC, 0, name, SegmentSubscriptionType.EXCLUSIVE)
        assert refused.value.code is ErrorCode.INVALID_REQUEST
        assert "subscription" in str(refused.value)
        await client.subscribe(2, TOPIC, 0, "sub", SegmentSubscriptionType.EXCLUSIVE)
    finally:
        await client.close()


async def test_a_non_ascii_token_is_refused_like_any_wrong_token(tmp_path: Path) -> None:
    broker = BrokerProcess(
        tmp_path, f"embedded://{tmp_path / 'store.db'}", None, "--auth-token", "s3cret"
    )
    await broker.start()
    try:
        with pytest.raises(RequestFailed) as refused:
            await WireClient.connect(broker.ws_url, token="sécret")
        assert refused.value.code is ErrorCode.AUTHENTICATION_FAILED
        async with aiohttp.ClientSession() as http:
            headers = {"Authorization": "Bearer sécret".encode().decode("latin-1")}
            async with http.get(broker.url + "/admin/v1/segments", headers=headers) as response:
                assert response.status == 401, await response.text()
        client = await WireClient.connect(broker.ws_url, token="s3cret")
        await client.close()
    finally:
        broker.stop()


async def test_concurrent_fencing_opens_are_all_answered_and_the_newest_epoch_is_kept(
    broker: BrokerProcess,
) -> None:
    """Racing metadata writes once collided on one temporary file: a takeover went
    unanswered, and an older epoch could be the one left on disk."""
    await make_segment(broker)
    clients = [await WireClient.connect(broker.ws_url) for _ in range(12)]
    try:
        opened = await asyncio.gather(
            *(
                client.open_producer(1, TOPIC, 0, name=f"p{index}", mode=FENCING)
                for index, client in enumerate(clients)
            )
        )
    finally:
        for client in clients:
            await client.close()
    epochs = sorted(reply.producer_epoch for reply in opened)
    assert epochs == list(range(1, len(clients) + 1))
    status, stats = await broker.admin("GET", SEGMENT + "/stats")
    assert status == 200 and isinstance(stats, dict)
    assert stats["producerEpoch"] == len(clients)
    [stored] = broker.data_dir.rglob(META_FILE)  # what a restart reads back
    assert load_meta(stored.parent).producer_epoch == len(clients)
    assert not list(broker.data_dir.rglob("*.tmp"))
