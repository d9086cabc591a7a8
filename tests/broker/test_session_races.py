"""Several connections acting on one segment at the same moment, and requests a hostile client
makes of a session: each caller gets the answer its request defines, in an order that tells a
true story, and no failure is left in a task nobody awaits."""

from __future__ import annotations

import asyncio

import aiohttp
import pytest

from scalable_topics.protocol import (
    PROTOCOL_VERSION,
    Ack,
    AckType,
    BatchMessage,
    Command,
    Connect,
    Connected,
    Error,
    ErrorCode,
    InitialPosition,
    MessageId,
    Nack,
    ProducerAccessMode,
    ProducerClosed,
    ProducerOpen,
    ProducerOpened,
    RedeliverUnacknowledged,
    SegmentSubscriptionType,
    Subscribe,
    Success,
    decode_frame,
    encode_frame,
)
from support.broker_process import BrokerProcess
from support.wire_client import RequestFailed, WireClient

TOPIC = "default/orders"
SEGMENT = "/default/orders/0000-ffff-0"
CONNECTIONS = 8
TIMEOUT = 20.0


@pytest.fixture
async def produced(broker: BrokerProcess) -> list[MessageId]:
    """The segment, created without subscriptions, holding three messages."""
    status, _ = await broker.admin("PUT", SEGMENT, {"subscriptions": []})
    assert status == 201
    producer = await WireClient.connect(broker.ws_url)
    try:
        await producer.open_producer(1, TOPIC, 0)
        ids = [
            (await producer.send(1, n, BatchMessage(f"m{n}".encode(), f"k{n}"))).message_id
            for n in range(3)
        ]
    finally:
        await producer.close()
    return [i for i in ids if i is not None]


async def subscribe_all_at_once(
    url: str, kind: SegmentSubscriptionType, count: int
) -> tuple[list[WireClient], list[Command]]:
    """``count`` connections each send Subscribe to the runtime subscription "race" in the same
    turn of the loop; their answers (Success or Error), in connection order."""
    clients = [await WireClient.connect(url) for _ in range(count)]
    requests = [
        Subscribe(c.next_id(), 1, TOPIC, 0, "race", kind, f"c{n}", 0, InitialPosition.EARLIEST, 100)
        for n, c in enumerate(clients)
    ]
    started = await asyncio.gather(
        *(c.start_request(r) for c, r in zip(clients, requests, strict=True))
    )
    async with asyncio.timeout(TIMEOUT):
        answers = list(await asyncio.gather(*started))
    return clients, answers


async def collect(clients: list[WireClient], count: int) -> list[tuple[WireClient, MessageId]]:
    """Wait until ``count`` messages have arrived over all ``clients`` (consumer id 1); each
    with the client that received it."""
    arrived: list[tuple[WireClient, MessageId]] = []

    async def take(client: WireClient) -> None:
        while True:
            message = await client.messages[1].get()
            assert message is not None, "a connection closed"
            arrived.append((client, message.message_id))
            if len(arrived) >= count:
                return

    tasks = [asyncio.create_task(take(c)) for c in clients]
    try:
        async with asyncio.timeout(TIMEOUT):
            await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.wait(tasks)
    for task in tasks:
        if not task.cancelled() and task.exception() is not None:
            raise task.exception()  # type: ignore[misc]
    return arrived


async def test_concurrent_first_subscribes_share_one_shared_subscription(
    broker: BrokerProcess, produced: list[MessageId]
) -> None:
    """Eight replicas of one consumer starting together: one subscription with eight
    consumers, each message delivered to one of them, and an ack by any of them counts."""
    clients, answers = await subscribe_all_at_once(
        broker.ws_url, SegmentSubscriptionType.SHARED, CONNECTIONS
    )
    try:
        assert all(isinstance(a, Success) for a in answers), answers
        status, stats = await broker.admin("GET", SEGMENT + "/stats")
        assert status == 200 and isinstance(stats, dict)
        assert stats["subscriptions"]["race"]["consumers"] == CONNECTIONS
        arrived = await collect(clients, len(produced))
        assert sorted(i for _, i in arrived) == sorted(produced)
        # Each acknowledged by the consumer that received it: the one cursor moves past all.
        for client, message_id in arrived:
            await client.ack(1, message_id)
        status, stats = await broker.admin("GET", SEGMENT + "/stats")
        assert isinstance(stats, dict)
        assert stats["subscriptions"]["race"]["backlog"] == 0
        # Nothing more comes to anyone: a fourth message is the next any of them hears.
        producer = await WireClient.connect(broker.ws_url)
        try:
            await producer.open_producer(1, TOPIC, 0)
            fourth = (await producer.send(1, 3, BatchMessage(b"m3", "k3"))).message_id
        finally:
            await producer.close()
        assert [i for _, i in await collect(clients, 1)] == [fourth]
    finally:
        for client in clients:
            await client.close()


async def test_concurrent_first_exclusive_subscribes_admit_one(
    broker: BrokerProcess, produced: list[MessageId]
) -> None:
    clients, answers = await subscribe_all_at_once(
        broker.ws_url, SegmentSubscriptionType.EXCLUSIVE, 4
    )
    try:
        admitted = [n for n, a in enumerate(answers) if isinstance(a, Success)]
        refused = [a.code for a in answers if isinstance(a, Error)]
        assert len(admitted) == 1, answers
        assert refused == [ErrorCode.CONSUMER_BUSY] * 3
        winner = clients[admitted[0]]
        got = [m.message_id for m in await winner.receive_n(1, len(produced))]
        assert got == produced
        await winner.ack(1, got[-1], cumulative=True)
        _status, stats = await broker.admin("GET", SEGMENT + "/stats")
        assert isinstance(stats, dict)
        assert stats["subscriptions"]["race"]["backlog"] == 0
    finally:
        for client in clients:
            await client.close()


@pytest.mark.parametrize(
    "bad_id",
    [
        pytest.param(lambda first: MessageId(0, first.entry_id, 2**32), id="batch index 2^32"),
        pytest.param(lambda first: MessageId(0, first.entry_id, 1), id="batch index past 1"),
        pytest.param(lambda first: MessageId(0, 2**40, 0), id="entry past the end"),
    ],
)
async def test_an_ack_naming_a_message_that_does_not_exist_is_an_invalid_request(
    broker: BrokerProcess, produced: list[MessageId], bad_id: object
) -> None:
    client = await WireClient.connect(broker.ws_url)
    try:
        await client.subscribe(1, TOPIC, 0, "s", SegmentSubscriptionType.SHARED)
        delivered = await client.receive_n(1, len(produced))
        wrong = bad_id(delivered[0].message_id)  # type: ignore[operator]
        for kind in (AckType.INDIVIDUAL, AckType.CUMULATIVE):
            with pytest.raises(RequestFailed) as refused:
                await client.request(Ack(1, kind, (wrong,), client.next_id()))
            assert refused.value.code is ErrorCode.INVALID_REQUEST, refused.value
        # Nack and redelivery requests name messages too. An index no batch can hold is
        # refused (no request id to answer); a message not pending at the consumer is
        # ignored, as one acknowledged or redelivered meanwhile is.
        await client.send_command(Nack(1, (wrong,), 0))
        await client.send_command(RedeliverUnacknowledged(1, (wrong,)))
        await client.ack(1, delivered[0].message_id)  # answered after both were served
        refusals = []
        while not client.unmatched_errors.empty():
            refusals.append(client.unmatched_errors.get_nowait().code)
        expected = 2 if wrong.batch_index >= 2**32 else 0
        assert refusals == [ErrorCode.INVALID_REQUEST] * expected
        assert client.messages[1].empty()  # nothing was redelivered
        # The consumer still works: the real messages are acknowledged.
        await client.ack(1, *(m.message_id for m in delivered[1:]))
        _status, stats = await broker.admin("GET", SEGMENT + "/stats")
        assert isinstance(stats, dict) and stats["subscriptions"]["s"]["backlog"] == 0
    finally:
        await client.close()
    text = broker.log_path.read_text()
    assert "Task exception was never retrieved" not in text
    assert "Traceback" not in text


class FencingProducer:
    """An ExclusiveWithFencing producer opened on a connection of its own, recording every
    producer answer it hears (ProducerOpened, Error, ProducerClosed) in order."""

    def __init__(self, url: str, name: str) -> None:
        self.url, self.name = url, name
        self.heard: list[Command] = []
        self.answered = asyncio.Event()  # the first producer answer came

    async def run(self) -> list[Command]:
        """Open, and read until the producer's story ends: an Error, or a ProducerClosed."""
        async with aiohttp.ClientSession() as http, http.ws_connect(self.url + "/ws") as ws:
            await ws.send_bytes(encode_frame(Connect(1, (PROTOCOL_VERSION,), self.name)))
            reply = decode_frame((await ws.receive(timeout=TIMEOUT)).data, 1 << 30)
            assert isinstance(reply, Connected)
            mode = ProducerAccessMode.EXCLUSIVE_WITH_FENCING
            await ws.send_bytes(encode_frame(ProducerOpen(2, 7, TOPIC, 0, self.name, mode, None)))
            async with asyncio.timeout(TIMEOUT):
                while True:
                    command = decode_frame((await ws.receive()).data, 1 << 30)
                    if not isinstance(command, ProducerOpened | Error | ProducerClosed):
                        continue
                    self.heard.append(command)
                    self.answered.set()
                    if isinstance(command, Error | ProducerClosed):
                        return self.heard


async def test_concurrent_fencing_opens_answer_opened_before_closed(
    broker: BrokerProcess,
) -> None:
    """Five ExclusiveWithFencing opens at once, each fencing the one granted before it, then
    one more that fences whoever holds the segment: each of the five hears either a refusal
    alone, or ProducerOpened and then ProducerClosed (fenced), never the end first."""
    status, _ = await broker.admin("PUT", SEGMENT, {"subscriptions": []})
    assert status == 201
    for _ in range(3):
        producers = [FencingProducer(broker.ws_url, f"p{n}") for n in range(5)]
        runs = [asyncio.create_task(p.run()) for p in producers]
        try:
            async with asyncio.timeout(TIMEOUT):
                for producer in producers:
                    await producer.answered.wait()
            last = FencingProducer(broker.ws_url, "fencer")
            last_run = asyncio.create_task(last.run())
            async with asyncio.timeout(TIMEOUT):
                stories = await asyncio.gather(*runs)
                await last.answered.wait()
        finally:
            for task in [*runs, last_run]:
                task.cancel()
            await asyncio.wait([*runs, last_run])
        assert isinstance(last.heard[0], ProducerOpened)
        for story in stories:
            if isinstance(story[0], Error):
                assert len(story) == 1, story
                continue
            assert [type(c) for c in story] == [ProducerOpened, ProducerClosed], story
            closed = story[1]
            assert isinstance(closed, ProducerClosed)
            assert closed.code is ErrorCode.PRODUCER_FENCED, closed
