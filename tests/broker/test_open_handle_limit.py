"""--max-open-per-connection (broker/connection_limits.py): one connection holds at most that
many producers (waiting ones included), consumers, watches, relayed registrations and relayed
grants; a request past it is refused with TooManyOpen, and nothing else on the connection, or
on any other, is affected. Closing anything frees its place."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest
from relay_broker import RelayBroker, relay_broker

from scalable_topics.protocol import (
    AcquireExclusive,
    BatchMessage,
    Command,
    ConsumerClose,
    Error,
    ErrorCode,
    InitialPosition,
    ProducerAccessMode,
    ProducerOpen,
    ProducerOpened,
    RegisterConsumer,
    SegmentSubscriptionType,
    Subscribe,
    Success,
    WatchClose,
    WatchTopic,
)
from support.wire_client import RequestFailed, WireClient

TOPIC = "default/orders"
LIMIT = 6
SHARED = ProducerAccessMode.SHARED
EXCLUSIVE = SegmentSubscriptionType.EXCLUSIVE
EARLIEST = InitialPosition.EARLIEST
GRANT_MODE = ProducerAccessMode.EXCLUSIVE
WAIT_FOR_EXCLUSIVE = ProducerAccessMode.WAIT_FOR_EXCLUSIVE


@pytest.fixture
async def relay(tmp_path: Path) -> AsyncIterator[RelayBroker]:
    async with relay_broker(tmp_path, max_open_per_connection=LIMIT) as ready:
        async with (
            aiohttp.ClientSession() as http,
            http.put(
                f"{ready.broker_url}/admin/v1/segments/default/orders/0000-ffff-0",
                json={"subscriptions": ["sub"]},
            ) as response,
        ):
            assert response.status == 201, await response.text()
        yield ready


@pytest.fixture
async def client(relay: RelayBroker) -> AsyncIterator[WireClient]:
    connected = await WireClient.connect(relay.broker_url)
    try:
        yield connected
    finally:
        await connected.close()


def openings(client: WireClient, ident: int) -> list[Command]:
    """One request opening each kind of handle, under ``ident``."""
    return [
        ProducerOpen(client.next_id(), ident, TOPIC, 0, f"p{ident}", SHARED, None),
        Subscribe(
            client.next_id(), ident, TOPIC, 0, "sub", EXCLUSIVE, f"c{ident}", 0, EARLIEST, 10
        ),
        WatchTopic(client.next_id(), ident, TOPIC),
        RegisterConsumer(client.next_id(), ident, TOPIC, "stream", f"r{ident}"),
        AcquireExclusive(client.next_id(), ident, TOPIC, f"g{ident}", GRANT_MODE, None),
    ]


async def refusal(client: WireClient, command: Command) -> RequestFailed:
    with pytest.raises(RequestFailed) as refused:
        await client.request(command)
    return refused.value


async def metrics(relay: RelayBroker) -> dict[str, float]:
    async with aiohttp.ClientSession() as http, http.get(f"{relay.broker_url}/metrics") as got:
        text = await got.text()
    samples = (line.split(" ") for line in text.splitlines() if line.startswith("st_broker_"))
    return {name: float(value) for name, value in samples}


async def test_every_kind_counts_and_past_the_limit_each_is_refused_alone(
    relay: RelayBroker, client: WireClient
) -> None:
    # One of each, and a producer waiting for exclusive access: the watch waits for the
    # topic's first layout, the registration and the grant for the controller; waiting, each
    # holds its place.
    await client.open_producer(1, TOPIC, 0, name="p1", mode=ProducerAccessMode.EXCLUSIVE)
    waiting = ProducerOpen(client.next_id(), 2, TOPIC, 0, "p2", WAIT_FOR_EXCLUSIVE, None)
    admitted = await client.start_request(waiting)
    await client.subscribe(1, TOPIC, 0, "sub", EXCLUSIVE)
    for pending in openings(client, 1)[2:]:
        await client.send_command(pending)
    assert isinstance(await relay.controller.next_command(), RegisterConsumer)
    assert isinstance(await relay.controller.next_command(), AcquireExclusive)

    for command in openings(client, 3):
        refused = await refusal(client, command)
        assert refused.code is ErrorCode.TOO_MANY_OPEN
        assert str(refused) == (
            f"TooManyOpen: {type(command).__name__} refused: this connection holds 6 producers, "
            "consumers, watches, consumer registrations and exclusive grants open, the "
            "broker's --max-open-per-connection (6); close some first"
        )
    assert relay.controller.commands.empty()  # nothing refused was relayed
    assert (await metrics(relay))["st_broker_opens_refused_total"] == 5
    assert (await metrics(relay))["st_broker_open_handles_connection_max"] == LIMIT

    # What the connection holds carries on: a message goes through.
    await client.send(1, 0, BatchMessage(b"still here"))
    assert (await client.receive(1)).payload == b"still here"
    # Another connection has its own room.
    other = await WireClient.connect(relay.broker_url)
    try:
        await other.subscribe(1, TOPIC, 0, "elsewhere", EXCLUSIVE)
    finally:
        await other.close()
    # Closing one makes room for one: the waiting producer takes producer 1's access and
    # still counts once.
    await client.close_producer(1)
    assert isinstance(await admitted, ProducerOpened)
    await client.subscribe(2, TOPIC, 0, "sub2", EXCLUSIVE)
    assert (await refusal(client, openings(client, 4)[2])).code is ErrorCode.TOO_MANY_OPEN


async def test_what_closes_frees_its_place_however_often(
    relay: RelayBroker, client: WireClient
) -> None:
    # Three times the limit of opens, each closed before the next two: nothing leaks.
    for ident in range(3 * LIMIT):
        await client.open_producer(ident, TOPIC, 0, name="p")
        await client.subscribe(ident, TOPIC, 0, "sub", EXCLUSIVE)
        await client.send_command(WatchTopic(client.next_id(), ident, TOPIC))
        assert isinstance(await client.request(WatchClose(client.next_id(), ident)), Success)
        await client.close_producer(ident)
        assert isinstance(await client.request(ConsumerClose(client.next_id(), ident)), Success)
    # The registrations and grants the controller ends free their places too.
    for ident in range(3 * LIMIT):
        request = RegisterConsumer(client.next_id(), ident, TOPIC, "stream", "r")
        await client.send_command(request)
        upstream = await relay.controller.next_command()
        await relay.controller.send(
            Error(upstream.request_id, ErrorCode.SUBSCRIPTION_NOT_FOUND, "no such subscription")
        )
        assert (await client.unmatched_errors.get()).request_id == request.request_id
    assert (await metrics(relay))["st_broker_open_handles"] == 0
    # The whole limit is there to take.
    for ident in range(LIMIT):
        await client.open_producer(ident, TOPIC, 0, name=f"p{ident}")
    assert (await refusal(client, openings(client, 99)[1])).code is ErrorCode.TOO_MANY_OPEN
    assert (await metrics(relay))["st_broker_opens_refused_total"] == 1
