"""What a producer tells the application when its messages are not acknowledged: each future
fails, and flush() and close() raise SendFailed for every message queued with send_async since
the last flush that failed, so that a script cannot report success for a lost message."""

from __future__ import annotations

import asyncio

import pytest
from client_cluster import ClientCluster

from scalable_topics.client import ClientClosed, Producer, SendFailed, SyncClient, Timeout

pytestmark = pytest.mark.slow

# Long enough for a loaded machine to acknowledge a message, short enough to wait out.
SEND_TIMEOUT = 3.0


def kill_brokers(cluster: ClientCluster) -> None:
    for broker in cluster.brokers:
        broker.kill()


async def restart_brokers(cluster: ClientCluster) -> None:
    await asyncio.gather(*(broker.start() for broker in cluster.brokers))


async def send_until_acknowledged(producer: Producer, keys: list[str]) -> None:
    """send() with each key until one is acknowledged: the producer reopens every segment on
    restarted brokers, each with its own backoff. A failed send() raised here; flush() does
    not report it again."""
    async with asyncio.timeout(30):
        for key in keys:
            while True:
                try:
                    await producer.send(b"back", key=key)
                    break
                except Timeout:
                    continue


async def test_flush_and_close_raise_for_sends_that_failed_while_the_service_was_down(
    cluster: ClientCluster,
) -> None:
    await cluster.create_topic("orders", initial=2)
    async with cluster.client() as client:
        producer = await client.create_producer("orders", send_timeout=SEND_TIMEOUT)
        stored = [
            await producer.send_async(f"stored-{n}".encode(), key=f"k{n % 4}") for n in range(20)
        ]
        await producer.flush()  # every one acknowledged: nothing to raise
        assert all(future.result() is not None for future in stored)

        kill_brokers(cluster)
        lost = [await producer.send_async(f"lost-{n}".encode(), key=f"k{n % 4}") for n in range(20)]
        with pytest.raises(SendFailed) as raised:
            await producer.flush()
        failed = raised.value
        # Every failed send, in the order queued, with its message and its own error.
        assert [f.message.payload for f in failed.failures] == [
            f"lost-{n}".encode() for n in range(20)
        ]
        assert all(f.topic == "default/orders" for f in failed.failures)
        assert all(isinstance(f.error, Timeout) for f in failed.failures)
        assert "20 messages" in failed.message and "send timeout of 3 s" in failed.message
        assert isinstance(failed.__cause__, Timeout)
        # The futures failed one by one, as before.
        assert all(isinstance(future.exception(), Timeout) for future in lost)

        await restart_brokers(cluster)
        await send_until_acknowledged(producer, [f"k{n}" for n in range(4)])
        after = [
            await producer.send_async(f"after-{n}".encode(), key=f"k{n % 4}") for n in range(5)
        ]
        await producer.flush()  # the earlier failures were reported once, by the last flush
        assert all(future.result() is not None for future in after)

        kill_brokers(cluster)
        await producer.send_async(b"lost at close", key="k1")
        with pytest.raises(SendFailed, match="1 message ") as at_close:
            await producer.close()
        assert [f.message.payload for f in at_close.value.failures] == [b"lost at close"]
        with pytest.raises(ClientClosed):
            await producer.send_async(b"closed")


async def test_a_timed_out_message_fails_the_messages_queued_behind_it(
    cluster: ClientCluster,
) -> None:
    """As in Pulsar: when a segment's oldest message times out, everything waiting behind it
    for that segment fails with it, so a producer facing a dead service ends within one send
    timeout and no message is stored after an earlier one to its segment failed."""
    await cluster.create_topic("orders", initial=1)
    async with cluster.client() as client:
        producer = await client.create_producer("orders", send_timeout=SEND_TIMEOUT)
        await producer.send(b"stored", key="k")
        kill_brokers(cluster)
        oldest = await producer.send_async(b"oldest", key="k")
        await asyncio.sleep(0.2)  # only so that the next deadline comes strictly later
        behind = [await producer.send_async(f"behind-{n}".encode(), key="k") for n in range(3)]
        answered_with_oldest: list[bool] = []
        oldest.add_done_callback(
            lambda _: answered_with_oldest.append(all(f.done() for f in behind))
        )
        with pytest.raises(SendFailed) as raised:
            await producer.flush()
        assert answered_with_oldest == [True]
        [first, *others] = raised.value.failures
        assert (first.message.payload, str(first.error)) == (
            b"oldest",
            "the message was not acknowledged within the send timeout of 3 s; "
            "it may or may not have been stored",
        )
        for other in others:
            assert isinstance(other.error, Timeout)
            assert "an earlier message to segment 0 was not acknowledged" in str(other.error)
        await producer.close()


async def test_the_sync_client_raises_the_same_way(cluster: ClientCluster) -> None:
    await cluster.create_topic("orders", initial=1)

    def script() -> tuple[SendFailed, SendFailed]:
        with SyncClient(cluster.service_url, client_name="script") as client:
            producer = client.create_producer("orders", send_timeout=SEND_TIMEOUT)
            producer.send(b"stored", key="k")
            kill_brokers(cluster)
            lost = producer.send_async(b"lost", key="k")
            with pytest.raises(SendFailed) as at_flush:
                producer.flush()
            assert isinstance(lost.exception(), Timeout)
            producer.send_async(b"lost at close", key="k")
            with pytest.raises(SendFailed) as at_close:
                producer.close()
            return at_flush.value, at_close.value

    at_flush, at_close = await asyncio.to_thread(script)
    assert [f.message.payload for f in at_flush.failures] == [b"lost"]
    assert [f.message.payload for f in at_close.failures] == [b"lost at close"]
