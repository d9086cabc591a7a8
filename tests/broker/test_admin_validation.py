"""The segment admin API takes only what every other surface takes: the same names, values of
the right type, bounded lengths; and a malformed HTTP request costs a 400, not a traceback
(issue: admin input accepted that should be refused)."""

from __future__ import annotations

import asyncio

import aiohttp
import pytest

from scalable_topics.model.resources import MAX_SUBSCRIPTIONS_PER_TOPIC
from scalable_topics.protocol import ErrorCode, SegmentSubscriptionType
from support.broker_process import BrokerProcess
from support.wire_client import RequestFailed, WireClient

TOPIC = "default/orders"
SEGMENT = "/default/orders/0000-ffff-0"


async def make_segment(broker: BrokerProcess, subscriptions: list[str]) -> None:
    status, payload = await broker.admin("PUT", SEGMENT, {"subscriptions": subscriptions})
    assert status == 201, payload


async def refused(
    broker: BrokerProcess, method: str, path: str, body: object, status: int = 400
) -> str:
    answer, payload = await broker.admin(method, path, body)
    assert answer == status, payload
    assert isinstance(payload, dict) and payload["code"] == "InvalidRequest", payload
    return str(payload["message"])


@pytest.mark.parametrize(
    ("quoted", "problem"),
    [
        ("..%2F..%2F..%2F..%2Fescape-sub", "must start with a letter or digit"),
        ("a%2Fb", "hold only letters, digits, '.', '_' and '-'"),
        ("%00", "must start with a letter or digit"),
        ("x" * 129, "at most 128 characters, not 129"),
    ],
)
async def test_a_subscription_name_no_other_surface_takes_is_refused(
    broker: BrokerProcess, quoted: str, problem: str
) -> None:
    await make_segment(broker, ["sub"])
    message = await refused(broker, "PUT", f"{SEGMENT}/subscriptions/{quoted}", {})
    assert message.startswith("invalid request: subscription: ")
    assert problem in message
    assert await broker.admin("GET", SEGMENT + "/subscriptions") == (200, ["sub"])


@pytest.mark.parametrize("name", ["../../../../escape-sub", "a/b", "\u0000", ""])
async def test_a_segment_is_not_made_with_a_bad_subscription_name(
    broker: BrokerProcess, name: str
) -> None:
    message = await refused(broker, "PUT", SEGMENT, {"subscriptions": ["sub", name, "ok"]})
    assert message.startswith("invalid request body: subscriptions.1: ")
    assert "subscription name" in message
    assert await broker.admin("GET", "") == (200, [])  # no segment
    assert not list(broker.data_dir.rglob("*escape-sub*"))


async def test_an_over_long_holder_is_refused_and_nothing_changes(broker: BrokerProcess) -> None:
    await make_segment(broker, ["sub"])
    message = await refused(broker, "POST", SEGMENT + "/fence", {"epoch": 1, "holder": "h" * 1025})
    assert message == (
        "invalid request body: holder: a producer name has at most 1024 characters, not 1025"
    )
    message = await refused(
        broker, "POST", SEGMENT + "/fence", {"epoch": 1, "holder": "h" * 500_000}, status=413
    )
    assert message == "invalid request body: at most 4096 bytes, not 500026"
    message = await refused(broker, "POST", SEGMENT + "/fence", {"epoch": 1, "holder": ""})
    assert message == "invalid request body: holder: a producer name must not be empty"
    status, stats = await broker.admin("GET", SEGMENT + "/stats")
    assert status == 200 and isinstance(stats, dict)
    assert stats["producerEpoch"] == 0
    # A new segment reserved for such a holder is not made either.
    other = "/default/orders/0000-ffff-1"
    message = await refused(broker, "PUT", other, {"producerHolder": "h" * 1025})
    assert message.startswith("invalid request body: producerHolder: ")
    assert await broker.admin("GET", other + "/stats") == (
        404,
        {
            "code": "SegmentNotFound",
            "message": "segment 1 of topic default/orders is not on this broker",
        },
    )


@pytest.mark.parametrize(
    ("path", "field", "problem"),
    [
        (f"/{'n' * 253}/orders/0000-ffff-0", "namespace", "(it has 253 characters)"),
        (f"/default/{'t' * 64}/0000-ffff-0", "topic name", "(it has 64 characters)"),
        ("/my.ns/orders/0000-ffff-0", "namespace", "is not a DNS label"),
        ("/default/Orders/0000-ffff-0", "topic name", "is not a DNS label"),
    ],
)
async def test_a_segment_of_a_name_no_other_surface_takes_is_not_made(
    broker: BrokerProcess, path: str, field: str, problem: str
) -> None:
    message = await refused(broker, "PUT", path, {})
    assert message.startswith(f"invalid request: {field.split()[0]}: {field} ")
    assert problem in message
    assert await broker.admin("GET", "") == (200, [])


@pytest.mark.parametrize(
    ("method", "path", "body", "field"),
    [
        ("POST", "/fence", {"epoch": "1"}, "epoch"),
        ("POST", "/fence", {"epoch": True}, "epoch"),
        ("POST", "/fence", {"epoch": 1, "ifFree": "yes"}, "ifFree"),
        ("POST", "/release", {"epoch": 1.0}, "epoch"),
        ("PUT", "", {"parents": ["0"]}, "parents.0"),
        ("PUT", "", {"producerEpoch": "3"}, "producerEpoch"),
        ("PUT", "", {"retention": {"maxAgeSeconds": "60"}}, "retention.maxAgeSeconds"),
        ("PUT", "/subscriptions/fresh", {"initialPosition": 0}, "initialPosition"),
    ],
)
async def test_a_value_of_another_type_is_refused_not_coerced(
    broker: BrokerProcess, method: str, path: str, body: object, field: str
) -> None:
    await make_segment(broker, ["sub"])
    message = await refused(broker, method, SEGMENT + path, body)
    assert message.startswith(f"invalid request body: {field}: Input should be ")
    status, stats = await broker.admin("GET", SEGMENT + "/stats")
    assert status == 200 and isinstance(stats, dict)
    assert (stats["producerEpoch"], sorted(stats["subscriptions"])) == (0, ["sub"])


async def test_consumers_cannot_create_subscriptions_past_the_limit(
    broker: BrokerProcess,
) -> None:
    """Pulsar's maxSubscriptionsPerTopic: a segment holding the limit takes no new one from a
    consumer; the ones it holds are still subscribed to."""
    names = [f"s{index}" for index in range(MAX_SUBSCRIPTIONS_PER_TOPIC)]
    await make_segment(broker, names)
    client = await WireClient.connect(broker.ws_url)
    try:
        with pytest.raises(RequestFailed) as refusal:
            await client.subscribe(1, TOPIC, 0, "one-more", SegmentSubscriptionType.EXCLUSIVE)
        assert refusal.value.code is ErrorCode.INVALID_REQUEST
        assert (
            "subscription 'one-more' cannot be created: segment default/orders/0 holds 1000 "
            "subscriptions, the most consumers may create (1000, maxSubscriptionsPerTopic)"
        ) in str(refusal.value)
        await client.subscribe(2, TOPIC, 0, "s999", SegmentSubscriptionType.EXCLUSIVE)
    finally:
        await client.close()
    status, listed = await broker.admin("GET", SEGMENT + "/subscriptions")
    assert status == 200 and isinstance(listed, list)
    assert len(listed) == MAX_SUBSCRIPTIONS_PER_TOPIC and "one-more" not in listed


async def test_a_producer_name_no_holder_may_have_is_refused_on_the_wire(
    broker: BrokerProcess,
) -> None:
    """A producer's name becomes the holder the controller fences segments with: the wire
    refuses the names the segment admin API would."""
    await make_segment(broker, [])
    client = await WireClient.connect(broker.ws_url)
    try:
        with pytest.raises(RequestFailed) as refusal:
            await client.open_producer(1, TOPIC, 0, name="p" * 1025)
        assert refusal.value.code is ErrorCode.INVALID_REQUEST
        assert "producer_name: a producer name has at most 1024 characters, not 1025" in str(
            refusal.value
        )
        with pytest.raises(RequestFailed) as refusal:
            await client.acquire_exclusive(1, TOPIC, "p" * 1025)
        assert refusal.value.code is ErrorCode.INVALID_REQUEST
        assert "producer_name: a producer name has at most 1024" in str(refusal.value)
        opened = await client.open_producer(2, TOPIC, 0, name="p" * 1024)
        assert opened.producer_name == "p" * 1024
    finally:
        await client.close()


MALFORMED = [
    b"GARBAGE\r\n\r\n",
    b"GET / HTTP/1.1 extra\r\n\r\n",
    b"GET /healthz HTTP/9.9\r\n\r\n",
    b"GET /" + b"a" * 9000 + b" HTTP/1.1\r\n\r\n",
    b"GET /\x00 HTTP/1.1\r\n\r\n",
    b"GET /healthz HTTP/1.1\r\nBad Header: y\r\n\r\n",
]


async def test_a_malformed_request_costs_a_400_and_no_traceback(broker: BrokerProcess) -> None:
    for request in MALFORMED:
        reader, writer = await asyncio.open_connection("127.0.0.1", broker.port)
        try:
            writer.write(request)
            await writer.drain()
            status_line = await reader.readline()
            assert status_line.startswith(b"HTTP/1.0 400 "), (request[:40], status_line)
            await reader.read()  # the broker closes the connection
        finally:
            writer.close()
            await writer.wait_closed()
    async with aiohttp.ClientSession() as http, http.get(broker.url + "/healthz") as answer:
        assert answer.status == 200
    broker.stop()  # its log is whole once it has exited
    log = broker.log_path.read_text()
    assert log.count('"UNKNOWN / HTTP/1.0" 400') == len(MALFORMED)  # each was answered
    assert "Traceback" not in log
    assert " ERROR " not in log
