"""For the namespace consumers' tests: a scripted topic set that a test changes by hand (in
place of a namespace watch), topics created through the admin API, and receiving until given
messages came."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from scalable_topics.client import Client, ClientError, ReceivedMessage, TopicSetChange

NAMESPACE = "shop"
WAIT_SECONDS = 60.0  # bounds a failing test only


def qualified(name: str) -> str:
    return name if "/" in name else f"{NAMESPACE}/{name}"


@dataclass
class ScriptedTopics:
    """A namespace watch whose set the test changes: the TopicSet a namespace consumer uses."""

    initial: Iterable[str] = ()
    namespace: str = NAMESPACE
    filters: Mapping[str, str] = field(default_factory=dict)
    closed: bool = False

    def __post_init__(self) -> None:
        self.topics = frozenset(qualified(name) for name in self.initial)
        self._listeners: list[
            tuple[Callable[[TopicSetChange], None], Callable[[ClientError], None] | None]
        ] = []

    @property
    def listeners(self) -> int:
        return len(self._listeners)

    def listen(
        self,
        on_change: Callable[[TopicSetChange], None],
        on_end: Callable[[ClientError], None] | None = None,
    ) -> Callable[[], None]:
        entry = (on_change, on_end)
        self._listeners.append(entry)
        return lambda: self._listeners.remove(entry)

    def change(self, added: Iterable[str] = (), removed: Iterable[str] = ()) -> None:
        """Removed first, then added: a name in both was deleted and created again."""
        plus = frozenset(qualified(name) for name in added)
        minus = frozenset(qualified(name) for name in removed)
        self.topics = (self.topics - minus) | plus
        for on_change, _ in list(self._listeners):
            on_change(TopicSetChange(plus, minus, self.topics))

    def end(self, error: ClientError) -> None:
        for _, on_end in list(self._listeners):
            if on_end is not None:
                on_end(error)

    async def close(self) -> None:
        self.closed = True


async def create_topics(
    client: Client,
    names: Sequence[str],
    *,
    subscriptions: Sequence[tuple[str, str]] = (),
    properties: Mapping[str, str] | None = None,
    segments: int = 2,
) -> None:
    """Create the topics through the admin API and wait until each is Ready."""
    async with client.admin() as admin:
        for name in names:
            await admin.create_topic(
                qualified(name), segments, subscriptions=subscriptions, properties=properties
            )
        async with asyncio.timeout(WAIT_SECONDS):
            for name in names:
                while (await admin.describe_topic(qualified(name)))["phase"] != "Ready":
                    await asyncio.sleep(0.05)


async def produce_each(
    client: Client, names: Sequence[str], count: int, *, start: int = 0, keys: int = 3
) -> list[str]:
    """Send ``count`` messages ``topic|key|n`` to each topic (keyed, keys interleaved); return
    the payloads sent, in order."""
    sent = []
    for name in names:
        producer = await client.create_producer(qualified(name))
        try:
            for sequence in range(start, start + count):
                key = f"k{sequence % keys}"
                text = f"{qualified(name)}|{key}|{sequence}"
                await producer.send(text.encode(), key=key)
                sent.append(text)
        finally:
            await producer.close()
    return sent


def parse(message: ReceivedMessage) -> tuple[str, str, int]:
    """(topic, key, sequence) of a ``produce_each`` payload."""
    topic, key, sequence = message.payload.decode().split("|")
    return topic, key, int(sequence)


class Receiving(Protocol):
    """Either namespace consumer."""

    async def receive(self, wait_seconds: float | None = None) -> ReceivedMessage: ...


async def receive_until(
    consumer: Receiving, wanted: Iterable[str], on_message: Callable[[ReceivedMessage], object]
) -> list[ReceivedMessage]:
    """Receive until every payload of ``wanted`` came, calling ``on_message`` (sync or async)
    with each message; return all the messages received, in order."""
    missing = set(wanted)
    received = []
    async with asyncio.timeout(WAIT_SECONDS):
        while missing:
            message = await consumer.receive()
            received.append(message)
            missing.discard(message.payload.decode())
            outcome = on_message(message)
            if asyncio.iscoroutine(outcome):
                await outcome
    return received
