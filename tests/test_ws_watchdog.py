"""The WebSocket watchdog on fake loop time (looptime): what it does to a silent peer, and that
it leaves alone a peer the server itself stopped reading (at an in-flight publish limit)."""

from __future__ import annotations

import asyncio
from typing import Any, cast

import pytest

from scalable_topics.protocol import CloseCode
from scalable_topics.ws_watchdog import Watchdog

PING = 30.0


class Socket:
    """What the watchdog uses of a server WebSocket: it pings and closes."""

    def __init__(self) -> None:
        self.pings = 0
        self.closed_with: tuple[int, str] | None = None

    async def ping(self) -> None:
        self.pings += 1

    async def close(self, *, code: int, message: bytes) -> None:
        self.closed_with = (code, message.decode())


def watching(socket: Socket) -> Watchdog:
    watchdog = Watchdog(cast(Any, socket), connect_seconds=0, ping_seconds=PING)
    watchdog.connected()
    watchdog.start()
    return watchdog


@pytest.mark.looptime
async def test_a_silent_peer_is_pinged_then_closed() -> None:
    socket = Socket()
    watchdog = watching(socket)
    await asyncio.sleep(PING * 2)
    await watchdog.stop()
    assert socket.pings == 1
    assert socket.closed_with == (CloseCode.POLICY_VIOLATION, "no answer to a ping within 15 s")


@pytest.mark.looptime
async def test_a_peer_the_server_does_not_read_is_not_closed_for_its_silence() -> None:
    socket = Socket()
    watchdog = watching(socket)
    watchdog.hold(True)
    await asyncio.sleep(PING * 20)
    assert (socket.pings, socket.closed_with) == (0, None)
    # Reading again, the peer has at least a ping period before it counts as silent.
    watchdog.hold(False)
    await asyncio.sleep(PING * 0.9)
    assert socket.closed_with is None
    await asyncio.sleep(PING * 2)
    await watchdog.stop()
    assert socket.closed_with is not None and socket.closed_with[0] == CloseCode.POLICY_VIOLATION


@pytest.mark.looptime
async def test_a_hold_that_begins_after_a_ping_keeps_the_connection() -> None:
    socket = Socket()
    watchdog = watching(socket)
    await asyncio.sleep(PING + 1)
    assert socket.pings == 1
    watchdog.hold(True)  # the pong is behind frames the broker is not reading yet
    await asyncio.sleep(PING * 10)
    await watchdog.stop()
    assert socket.closed_with is None
