"""The blocking facade: a plain script, run in a thread of its own as a script would run,
against real brokers and a controller on loopback."""

from __future__ import annotations

import asyncio
import threading
from collections import defaultdict

import pytest
from client_cluster import ClientCluster, by_key, parse, payload

from scalable_topics.client import ClientClosed, SyncClient, SyncStreamConsumer, Timeout

KEYS = [f"k{n}" for n in range(6)]


def read_all(consumer: SyncStreamConsumer, expected: int) -> list[tuple[str, int]]:
    received: list[tuple[str, int]] = []
    while len(received) < expected:
        message = consumer.receive(wait_seconds=30)
        received.append(parse(message.payload))
        consumer.acknowledge_cumulative(message)
    return received


def produce_split_consume(service_url: str) -> tuple[list[tuple[str, int]], ...]:
    """Create a topic, produce, split while producing, consume in key order: all blocking."""
    with SyncClient(service_url, client_name="script") as client:
        with client.admin() as admin:
            admin.create_topic("orders", initial_segments=2, subscriptions=[("s", "Stream")])
            assert admin.describe_topic("orders")["name"] == "orders"
        consumer = client.subscribe_stream("orders", "s", "c1")
        producer = client.create_producer("orders", batching_max_delay=0.005)
        sent = []
        pending = []
        for sequence in range(20):
            for key in KEYS:
                pending.append(producer.send_async(payload(key, sequence), key=key))
                sent.append((key, sequence))
            if sequence == 9:
                first = min(s["id"] for s in admin_segments(client) if s["state"] == "Active")
                with client.admin() as admin:
                    assert admin.split("orders", first)["result"] == "Succeeded"
        producer.flush()
        ids = [future.result(timeout=30) for future in pending]
        assert all(message_id is not None for message_id in ids)
        assert producer.send(payload("last", 0), key="last") is not None
        received = read_all(consumer, len(sent) + 1)
        durable = consumer.flush_acknowledgements()
        # A parent read to its end may be released by the controller while the flush runs:
        # it leaves positions() but its acknowledgement was still made durable.
        held = consumer.positions()
        assert held, "the split's children are still read"
        assert held.items() <= durable.items()
        released = set(durable) - set(held)
        assert released <= {first}, f"only the split parent may be released, got {released}"
        producer.close()
        consumer.close()
        return sent, received


def admin_segments(client: SyncClient) -> list[dict[str, object]]:
    with client.admin() as admin:
        return list(admin.describe_topic("orders")["segments"])  # type: ignore[arg-type]


async def test_a_script_produces_splits_and_consumes_in_key_order(
    cluster: ClientCluster,
) -> None:
    sent, received = await asyncio.to_thread(produce_split_consume, cluster.service_url)
    assert by_key(received) == by_key([*sent, ("last", 0)])
    assert len(received) == len(sent) + 1
    topic = await cluster.read_topic("orders")
    assert len([s for s in topic.status.segments if s.state == "Active"]) == 3


def queue_round_trip(service_url: str) -> dict[str, list[int]]:
    """Key-ordered queue consumption with individual acks, a nack and an iterator."""
    with SyncClient(service_url) as client:
        with client.admin() as admin:
            admin.create_topic("jobs", initial_segments=2)
        consumer = client.subscribe_queue("jobs", "workers", key_ordered=True)
        with client.create_producer("jobs") as producer:
            for sequence in range(30):
                producer.send(payload(KEYS[sequence % 3], sequence), key=KEYS[sequence % 3])
        first = consumer.receive(wait_seconds=30)
        consumer.negative_acknowledge(first)
        seen: dict[str, list[int]] = defaultdict(list)
        for message in consumer:
            key, sequence = parse(message.payload)
            seen[key].append(sequence)
            if message.message_id == first.message_id:
                assert message.redelivery_count >= 1
            consumer.acknowledge(message)
            if sum(map(len, seen.values())) == 30:
                consumer.flush_acknowledgements()
                consumer.close()  # ends the iteration
        with pytest.raises(Timeout):
            client.subscribe_queue("jobs", "workers").receive(wait_seconds=1)
        return dict(seen)


async def test_a_script_consumes_a_queue_with_acks_and_a_nack(cluster: ClientCluster) -> None:
    seen = await asyncio.to_thread(queue_round_trip, cluster.service_url)
    assert {key: sorted(sequences) for key, sequences in seen.items()} == {
        key: list(range(n, 30, 3)) for n, key in enumerate(KEYS[:3])
    }


def test_a_closed_client_refuses_calls_and_stops_its_thread() -> None:
    client = SyncClient("ws://127.0.0.1:9")
    client.close()
    assert not [t for t in threading.enumerate() if t.name == "scalable-topics"]
    with pytest.raises(ClientClosed, match="closed"):
        client.create_producer("orders")
    client.close()  # twice is fine


def test_a_bad_service_url_is_refused_before_a_thread_starts() -> None:
    with pytest.raises(ValueError, match="ws://HOST:PORT"):
        SyncClient("http://127.0.0.1:6650")
    assert not [t for t in threading.enumerate() if t.name == "scalable-topics"]


def test_a_blocking_call_from_the_clients_own_loop_is_refused() -> None:
    with SyncClient("ws://127.0.0.1:9") as client:
        admin = client.admin()
        outcome = asyncio.run_coroutine_threadsafe(_call_inside(admin.close), client_loop(client))
        with pytest.raises(RuntimeError, match="would wait forever"):
            outcome.result(timeout=5)
        admin.close()


async def _call_inside(blocking: object) -> None:
    assert callable(blocking)
    blocking()


def client_loop(client: SyncClient) -> asyncio.AbstractEventLoop:
    return client._runner.loop
