"""The broker relays stream consumer registrations to the topic's leader, found through the
topic's controller Lease: it drops stale assignments, follows the leader when it moves or
dies, and tells a leaving consumer from one whose connection merely dropped."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from fake_controller import FakeController
from relay_broker import RelayBroker, relay_broker

from scalable_topics.model.hash_range import HashRange
from scalable_topics.protocol import (
    AssignedSegment,
    ConsumerAssignment,
    Error,
    ErrorCode,
    RegisterConsumer,
    RegistrationClosed,
    Success,
    UnregisterConsumer,
)
from support.wire_client import RequestFailed, WireClient

TOPIC = "default/orders"
WAIT = 20.0


@pytest.fixture
async def setup(tmp_path: Path) -> AsyncIterator[RelayBroker]:
    async with relay_broker(tmp_path) as ready:
        yield ready


def assignment(term: int, epoch: int, *segment_ids: int) -> ConsumerAssignment:
    segments = tuple(AssignedSegment(s, HashRange(s, s), f"ws://broker-{s}") for s in segment_ids)
    return ConsumerAssignment(7, term, epoch, segments)


async def registered(setup: RelayBroker, client: WireClient, controller: FakeController) -> int:
    """Register consumer "amy" as registration 7 and let ``controller`` accept it; the
    request id the broker used upstream."""
    request = asyncio.create_task(client.register_consumer(7, TOPIC, "s", "amy"))
    relayed = await controller.next_command()
    assert isinstance(relayed, RegisterConsumer)
    assert (relayed.registration_id, relayed.topic, relayed.subscription) == (7, TOPIC, "s")
    assert relayed.consumer_name == "amy"
    await controller.send(Success(relayed.request_id))
    await request
    return relayed.request_id


async def pushed(client: WireClient) -> ConsumerAssignment | RegistrationClosed:
    async with asyncio.timeout(WAIT):
        event = await client.events.get()
    assert isinstance(event, ConsumerAssignment | RegistrationClosed)
    return event


async def test_assignments_older_than_the_last_relayed_are_dropped(setup: RelayBroker) -> None:
    client = await WireClient.connect(setup.broker_url)
    try:
        await check_stale_pushes_are_dropped(setup, client)
    finally:
        await client.close()


async def check_stale_pushes_are_dropped(setup: RelayBroker, client: WireClient) -> None:
    await registered(setup, client, setup.controller)
    for push in [
        assignment(2, 1, 0),
        assignment(1, 9, 7),  # a deposed leader's late push: older term
        assignment(2, 1, 0, 1),  # the same leader rebalancing at the same epoch
        assignment(2, 0, 5),  # older epoch of the same term
        assignment(3, 0, 2),  # a newer term wins whatever its epoch
    ]:
        await setup.controller.send(push)
    received = [await pushed(client) for _ in range(3)]
    assert [(a.term, a.layout_epoch) for a in received] == [(2, 1), (2, 1), (3, 0)]
    assert [[s.segment_id for s in a.segments] for a in received] == [[0], [0, 1], [2]]
    assert received[0].segments[0] == AssignedSegment(0, HashRange(0, 0), "ws://broker-0")
    assert client.events.empty()  # the stale ones came before the last: nothing else follows


async def test_the_registration_follows_a_leader_that_moves_or_dies(setup: RelayBroker) -> None:
    client = await WireClient.connect(setup.broker_url)
    second, third = FakeController(), FakeController()
    await second.start()
    await third.start()
    try:
        request = asyncio.create_task(client.register_consumer(7, TOPIC, "s", "amy"))
        first_try = await setup.controller.next_command()
        await setup.lead(second)  # leadership moved before the first controller answered
        await setup.controller.send(
            Error(first_try.request_id, ErrorCode.NOT_LEADER, "the leader is elsewhere")
        )
        accepted = await second.next_command()
        assert isinstance(accepted, RegisterConsumer) and accepted.registration_id == 7
        await second.send(Success(accepted.request_id))
        await request  # the client's one Success
        await second.send(assignment(4, 2, 1))
        assert (await pushed(client)).term == 4

        # The leader dies; the Lease names its successor, which is asked again.
        await setup.lead(third)
        await second.drop()
        again = await third.next_command()
        assert isinstance(again, RegisterConsumer) and again.registration_id == 7
        await third.send(Success(again.request_id))
        await third.send(assignment(5, 2, 1))
        relayed = await pushed(client)
        assert (relayed.term, [s.segment_id for s in relayed.segments]) == (5, [1])
        assert client.events.empty()  # no second Success, no RegistrationClosed

        # A leader that ends the registration for good: the client hears why.
        await third.send(RegistrationClosed(7, ErrorCode.SUBSCRIPTION_NOT_FOUND, "deleted"))
        closed = await pushed(client)
        assert isinstance(closed, RegistrationClosed)
        assert (closed.registration_id, closed.code) == (7, ErrorCode.SUBSCRIPTION_NOT_FOUND)
    finally:
        await client.close()
        await second.close()
        await third.close()


async def test_a_leave_is_relayed_and_a_dropped_connection_is_not_a_leave(
    setup: RelayBroker,
) -> None:
    client = await WireClient.connect(setup.broker_url)
    await registered(setup, client, setup.controller)
    leaving = asyncio.create_task(client.unregister_consumer(7))
    unregister = await setup.controller.next_command()
    assert isinstance(unregister, UnregisterConsumer) and unregister.registration_id == 7
    await setup.controller.send(Success(unregister.request_id))
    await leaving
    await client.close()
    await setup.controller.wait_disconnected()
    assert setup.controller.commands.empty()

    # This time the connection just drops: the link closes and no UnregisterConsumer is sent,
    # so the controller keeps the consumer's segments for its grace period.
    client = await WireClient.connect(setup.broker_url)
    await registered(setup, client, setup.controller)
    await client.close()
    await setup.controller.wait_disconnected()
    assert setup.controller.commands.empty()


async def test_refusals_are_final_or_retried_by_their_code(setup: RelayBroker) -> None:
    client = await WireClient.connect(setup.broker_url)
    try:
        request = asyncio.create_task(client.register_consumer(7, TOPIC, "nope", "amy"))
        relayed = await setup.controller.next_command()
        await setup.controller.send(
            Error(relayed.request_id, ErrorCode.SUBSCRIPTION_NOT_FOUND, "no subscription 'nope'")
        )
        with pytest.raises(RequestFailed) as refused:
            await request
        assert refused.value.code is ErrorCode.SUBSCRIPTION_NOT_FOUND

        # ServiceNotReady is asked again; the id is free again after a refusal.
        request = asyncio.create_task(client.register_consumer(7, TOPIC, "s", "amy"))
        relayed = await setup.controller.next_command()
        await setup.controller.send(Error(relayed.request_id, ErrorCode.SERVICE_NOT_READY, "wait"))
        relayed = await setup.controller.next_command()
        assert isinstance(relayed, RegisterConsumer)
        await setup.controller.send(Success(relayed.request_id))
        await request

        with pytest.raises(RequestFailed) as in_use:
            await client.register_consumer(7, TOPIC, "s", "bob")
        assert in_use.value.code is ErrorCode.ID_IN_USE
        with pytest.raises(RequestFailed) as malformed:
            await client.register_consumer(8, "orders", "s", "bob")
        assert malformed.value.code is ErrorCode.INVALID_REQUEST
    finally:
        await client.close()
