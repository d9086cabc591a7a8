"""The broker relays exclusive producer grants to the topic's leader, found through the topic's
controller Lease: answers and pushes reach the client under its grant id; a holder asks the
next leader with its epoch and the client hears nothing of it; releases, refusals, and a client
that goes away."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from fake_controller import FakeController
from relay_broker import RelayBroker, relay_broker

from scalable_topics.model.resources import (
    ProducerAccessMode,
)
from scalable_topics.protocol import (
    AcquireExclusive,
    Error,
    ErrorCode,
    ExclusiveGranted,
    ExclusiveRevoked,
    RegisterConsumer,
    ReleaseExclusive,
    Success,
)
from support.wire_client import RequestFailed, WireClient

TOPIC = "default/orders"
Mode = ProducerAccessMode


@pytest.fixture
async def relay(tmp_path: Path) -> AsyncIterator[RelayBroker]:
    async with relay_broker(tmp_path) as ready:
        yield ready


@pytest.fixture
async def client(relay: RelayBroker) -> AsyncIterator[WireClient]:
    connected = await WireClient.connect(relay.broker_url)
    try:
        yield connected
    finally:
        await connected.close()


async def relayed(controller: FakeController) -> Any:
    command = await controller.next_command()
    assert isinstance(command, AcquireExclusive | ReleaseExclusive)
    return command


async def test_a_wait_is_answered_then_the_grant_pushed_then_released(
    relay: RelayBroker, client: WireClient
) -> None:
    request = asyncio.create_task(
        client.acquire_exclusive(5, TOPIC, "amy", Mode.WAIT_FOR_EXCLUSIVE)
    )
    upstream = await relayed(relay.controller)
    assert (upstream.grant_id, upstream.topic, upstream.producer_name) == (5, TOPIC, "amy")
    assert (upstream.access_mode, upstream.producer_epoch) == (Mode.WAIT_FOR_EXCLUSIVE, None)
    await relay.controller.send(Success(upstream.request_id))
    assert isinstance(await request, Success)

    await relay.controller.send(ExclusiveGranted(5, None, 4))
    pushed = await client.next_event(ExclusiveGranted)
    assert (pushed.grant_id, pushed.request_id, pushed.producer_epoch) == (5, None, 4)

    release = asyncio.create_task(client.release_exclusive(5))
    upstream_release = await relayed(relay.controller)
    assert isinstance(upstream_release, ReleaseExclusive) and upstream_release.grant_id == 5
    await relay.controller.send(Success(upstream_release.request_id))
    await release


async def test_a_holder_asks_the_next_leader_with_its_epoch_and_hears_nothing_of_it(
    relay: RelayBroker, client: WireClient
) -> None:
    request = asyncio.create_task(client.acquire_exclusive(5, TOPIC, "amy"))
    upstream = await relayed(relay.controller)
    await relay.controller.send(ExclusiveGranted(5, upstream.request_id, 3))
    answer = await request
    assert isinstance(answer, ExclusiveGranted) and answer.producer_epoch == 3

    second = FakeController()
    await second.start()
    try:
        await relay.lead(second)
        await relay.controller.drop()  # the leader died
        again = await relayed(second)
        assert (again.producer_name, again.access_mode, again.producer_epoch) == (
            "amy",
            Mode.EXCLUSIVE,
            3,
        )
        # The new leader has not noticed the old link drop yet: busy, asked again.
        await second.send(Error(again.request_id, ErrorCode.PRODUCER_BUSY, "still connected"))
        retried = await relayed(second)
        assert retried.producer_epoch == 3
        await second.send(ExclusiveGranted(5, retried.request_id, 3))
        # Then another producer takes the topic over with fencing: that the client hears.
        await second.send(ExclusiveRevoked(5, ErrorCode.PRODUCER_FENCED, "bob took over"))
        revoked = await client.next_event(ExclusiveRevoked)
        assert (revoked.grant_id, revoked.code) == (5, ErrorCode.PRODUCER_FENCED)
        assert client.events.empty()  # nothing was pushed for the failover itself
    finally:
        await client.close()  # first: its link would hold the server's shutdown
        await second.close()


async def test_refusals_reach_the_client_with_their_code(
    relay: RelayBroker, client: WireClient
) -> None:
    for mode, name in ((Mode.SHARED, "amy"), (Mode.EXCLUSIVE, "")):
        with pytest.raises(RequestFailed) as invalid:
            await client.acquire_exclusive(1, TOPIC, name, mode)
        assert invalid.value.code is ErrorCode.INVALID_REQUEST
    with pytest.raises(RequestFailed) as unknown:
        await client.release_exclusive(1)
    assert unknown.value.code is ErrorCode.UNKNOWN_GRANT

    request = asyncio.create_task(client.acquire_exclusive(1, TOPIC, "amy"))
    upstream = await relayed(relay.controller)
    with pytest.raises(RequestFailed) as in_use:
        await client.acquire_exclusive(1, TOPIC, "bob")
    assert in_use.value.code is ErrorCode.ID_IN_USE
    await relay.controller.send(Error(upstream.request_id, ErrorCode.PRODUCER_BUSY, "bob holds"))
    with pytest.raises(RequestFailed) as busy:
        await request
    assert busy.value.code is ErrorCode.PRODUCER_BUSY  # a first request's answer: not retried


async def test_giving_up_a_wait_releases_it_and_the_grant_never_comes(
    relay: RelayBroker, client: WireClient
) -> None:
    request = asyncio.create_task(
        client.acquire_exclusive(2, TOPIC, "amy", Mode.WAIT_FOR_EXCLUSIVE)
    )
    upstream = await relayed(relay.controller)
    await relay.controller.send(Success(upstream.request_id))
    await request
    release = asyncio.create_task(client.release_exclusive(2))
    upstream_release = await relayed(relay.controller)
    assert isinstance(upstream_release, ReleaseExclusive)
    await relay.controller.send(Success(upstream_release.request_id))
    await release
    # The id is free again at once.
    reuse = asyncio.create_task(client.acquire_exclusive(2, TOPIC, "amy"))
    upstream = await relayed(relay.controller)
    await relay.controller.send(ExclusiveGranted(2, upstream.request_id, 1))
    assert isinstance(await reuse, ExclusiveGranted)


async def test_a_client_that_goes_away_closes_the_link_and_releases_nothing(
    relay: RelayBroker,
) -> None:
    client = await WireClient.connect(relay.broker_url)
    request = asyncio.create_task(client.acquire_exclusive(1, TOPIC, "amy"))
    upstream = await relayed(relay.controller)
    await relay.controller.send(ExclusiveGranted(1, upstream.request_id, 1))
    await request
    await client.close()
    await relay.controller.wait_disconnected()  # the leader starts the holder's grace period
    assert relay.controller.commands.empty()  # no ReleaseExclusive: the grant outlives the link


async def test_consumers_and_grants_of_one_connection_share_its_link(
    relay: RelayBroker, client: WireClient
) -> None:
    registering = asyncio.create_task(client.register_consumer(7, TOPIC, "s", "amy"))
    registration = await relay.controller.next_command()
    assert isinstance(registration, RegisterConsumer)
    await relay.controller.send(Success(registration.request_id))
    await registering
    acquiring = asyncio.create_task(client.acquire_exclusive(1, TOPIC, "amy"))
    upstream = await relayed(relay.controller)
    await relay.controller.send(ExclusiveGranted(1, upstream.request_id, 1))
    await acquiring
    assert relay.controller.connections == 1
