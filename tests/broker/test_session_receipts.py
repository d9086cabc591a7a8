"""A session's receipts when its connection ends with sends in flight: every task it leaves ends
cleanly (cancelled), none with a failure nobody retrieves."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Hashable
from pathlib import Path
from typing import Any

import pytest
from aiohttp import WSMessage, WSMsgType

from scalable_topics.broker.config import BrokerConfig
from scalable_topics.broker.producer_access import Grant
from scalable_topics.broker.segment import SegmentKey
from scalable_topics.broker.session import Session
from scalable_topics.model.resources import ProducerAccessMode
from scalable_topics.protocol import (
    PROTOCOL_VERSION,
    BatchMessage,
    Command,
    Connect,
    MessageId,
    ProducerOpen,
    ProducerOpened,
    Send,
    SendReceipt,
    decode_frame,
    encode_frame,
)

TOPIC = "default/orders"
SENDS = 3


class InstantSegment:
    """A segment that stores every batch at once."""

    key = SegmentKey("default", "orders", 0)

    async def open_producer(
        self, handle: Hashable, name: str, mode: ProducerAccessMode, epoch: int | None, link: Any
    ) -> Grant:
        return Grant(handle, name, mode, 0)

    def highest_sequence_id(self, name: str) -> int:
        return -1

    async def publish(self, handle: Hashable, send: Send) -> tuple[MessageId, bool]:
        return MessageId(0, send.sequence_id), False

    async def close_producer(self, handle: Hashable) -> None:
        pass


class OneSegment:
    def __init__(self) -> None:
        self.segment = InstantSegment()

    def find(self, topic: str, segment_id: int) -> InstantSegment:
        return self.segment


class SlowReader:
    """The client's side of the WebSocket: Connect, a producer, a few sends; it never reads a
    receipt (writing the first one blocks), and drops the connection once one is being written."""

    closed = False

    def __init__(self) -> None:
        self.opened = asyncio.Event()
        self.receipt_blocked = asyncio.Event()
        self.sent: list[Command] = []

    def __aiter__(self) -> AsyncIterator[WSMessage]:
        return self._frames()

    async def _frames(self) -> AsyncIterator[WSMessage]:
        yield _binary(Connect(1, (PROTOCOL_VERSION,), "slow"))
        yield _binary(ProducerOpen(2, 1, TOPIC, 0))
        await self.opened.wait()
        for sequence in range(SENDS):
            yield _binary(Send(1, sequence, (BatchMessage(b"m"),)))
        await self.receipt_blocked.wait()
        # The connection ends: the receipts behind the first one wait for it to be written.

    async def send_bytes(self, data: bytes) -> None:
        command = decode_frame(data)
        self.sent.append(command)
        if isinstance(command, ProducerOpened):
            self.opened.set()
        elif isinstance(command, SendReceipt):
            self.receipt_blocked.set()
            await asyncio.Event().wait()  # the client reads no more


def _binary(command: Command) -> WSMessage:
    return WSMessage(WSMsgType.BINARY, encode_frame(command), None)


async def test_a_connection_ending_with_receipts_queued_leaves_no_failed_task(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Found by the wire fuzzer: cancelling the sends that waited for the one before them to be
    answered cancelled that one's completion too, and its task then failed (InvalidStateError)
    with nobody to retrieve it. The session now awaits its tasks when it ends: none is left
    behind, and none failed (a failure is logged as it happens)."""
    ws = SlowReader()
    config = BrokerConfig(data_dir=tmp_path, store_url="embedded:unused.db")
    before = asyncio.all_tasks()
    session = Session(
        ws,  # type: ignore[arg-type]
        config,
        OneSegment(),  # type: ignore[arg-type]
        topic_watches=None,  # type: ignore[arg-type]
        controller_links=None,  # type: ignore[arg-type]
    )
    with caplog.at_level(logging.ERROR):
        await session.serve()
    assert ws.receipt_blocked.is_set(), "no receipt was being written: nothing was tested"
    assert asyncio.all_tasks() - before - {asyncio.current_task()} == set()
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR] == []
