"""Stream consumers registered through a broker, as the consumer-session tests drive them."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from scalable_topics.protocol import ConsumerAssignment, ErrorCode, RegistrationClosed
from support.wire_client import RequestFailed, WireClient

TIMEOUT = 30.0  # bounds a failing test only


@dataclass
class StreamConsumer:
    name: str
    client: WireClient
    registration_id: int = 1

    @classmethod
    async def join(
        cls, broker_url: str, topic: str, subscription: str, name: str
    ) -> StreamConsumer:
        client = await WireClient.connect(broker_url)
        consumer = cls(name, client)
        async with asyncio.timeout(TIMEOUT):
            while True:
                try:
                    await client.register_consumer(
                        consumer.registration_id, topic, subscription, name
                    )
                    return consumer
                except RequestFailed as refused:
                    # Back right after a drop: the controller may not have seen it yet.
                    if refused.code is not ErrorCode.CONSUMER_BUSY:
                        await client.close()
                        raise
                await asyncio.sleep(0.1)

    async def next_assignment(self, timeout: float = TIMEOUT) -> ConsumerAssignment:
        """The next push; a RegistrationClosed instead fails the test."""
        async with asyncio.timeout(timeout):
            while True:
                event = await self.client.events.get()
                if isinstance(event, RegistrationClosed):
                    raise AssertionError(f"{self.name}'s registration was closed: {event}")
                if isinstance(event, ConsumerAssignment):
                    assert event.registration_id == self.registration_id
                    return event

    async def assignment_where(
        self, wanted: list[int], timeout: float = TIMEOUT
    ) -> ConsumerAssignment:
        """Skip pushes until one assigns exactly ``wanted``."""
        async with asyncio.timeout(timeout):
            while True:
                assignment = await self.next_assignment()
                if segment_ids(assignment) == wanted:
                    return assignment

    def take_pending(self) -> list[object]:
        """The pushes received and not read yet."""
        events = self.client.events
        return [events.get_nowait() for _ in range(events.qsize())]

    async def leave(self) -> None:
        await self.client.unregister_consumer(self.registration_id)

    async def disconnect(self) -> None:
        await self.client.close()


def segment_ids(assignment: ConsumerAssignment) -> list[int]:
    return [segment.segment_id for segment in assignment.segments]
