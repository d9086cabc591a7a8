"""How many sends a client may make the broker hold: the in-flight publish limits.

A send is *in flight* from the moment the broker reads its frame until its answer (SendReceipt
or SendError) is written. Meanwhile the broker holds the decoded batch, a task and, once the
log has it, the receipt waiting for its turn. Two limits bound that:

- **Per connection**, in sends and in bytes: when either is reached the session stops reading
  the connection (:meth:`ConnectionPublishes.room`, awaited before each frame is read) until an
  answer goes out. The client's next frames wait in its own socket buffers, so the backpressure
  reaches it through TCP, without an error and without the broker buffering anything more.
- **Per producer**, in sends: a send past it is refused and its producer closed (see the
  session), so a producer that ignores its window costs the others on the connection nothing
  beyond its own share of the connection's window.

The byte count is what a send holds in memory, roughly: its payloads, keys and properties
(text counted in characters) twice, once decoded and once in the log record encoded from them
(both live until the answer: the record waits for its fsync), and
:data:`MESSAGE_OVERHEAD_BYTES` per message for the objects that hold them, so a frame of many
tiny messages counts for what it costs once decoded.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from ..protocol import Send

# What one decoded message costs beyond its payload and text: its tuple and the headers of
# its bytes and str objects (about 150 bytes in CPython 3.11), rounded down.
MESSAGE_OVERHEAD_BYTES = 128


def held_bytes(send: Send) -> int:
    """What a send holds in memory while in flight, counted as the module doc says."""
    content = 0
    for payload, key, properties, _ in send.messages:  # unpacked: on every send's path
        content += len(payload)
        if key is not None:
            content += len(key)
        if properties:
            content += sum(len(name) + len(value) for name, value in properties.items())
    return 2 * content + MESSAGE_OVERHEAD_BYTES * len(send.messages)


@dataclass(slots=True)
class PublishCounters:
    """The broker's totals over every connection, for ``/metrics``."""

    in_flight: int = 0
    """Sends read and not answered yet."""
    in_flight_bytes: int = 0
    most_in_flight: int = 0
    """The most sends one connection has had in flight at once."""
    read_pauses_total: int = 0
    """Times a connection stopped being read because it reached a limit."""
    producers_over_limit_total: int = 0
    """Producers closed because a send came past the per-producer limit."""
    requests_pending: int = 0
    """Requests other than sends read and not answered yet (PendingRequests)."""
    request_read_pauses_total: int = 0
    """Times a connection stopped being read at its pending-request limit."""


class ConnectionPublishes:
    """The sends one connection has in flight, and the gate its read loop waits at."""

    def __init__(self, max_sends: int, max_bytes: int, counters: PublishCounters) -> None:
        if max_sends < 1 or max_bytes < 1:
            raise ValueError(
                f"in-flight limits must be at least 1, not {max_sends} sends / {max_bytes} bytes"
            )
        self._max_sends = max_sends
        self._max_bytes = max_bytes
        self._counters = counters
        self._sends = 0
        self._bytes = 0
        self._room = asyncio.Event()
        self._room.set()

    @property
    def in_flight(self) -> int:
        return self._sends

    @property
    def in_flight_bytes(self) -> int:
        return self._bytes

    def received(self, send: Send) -> int:
        """Count a send just read; returns its size, which :meth:`answered` takes back."""
        size = held_bytes(send)
        self._sends += 1
        self._bytes += size
        counters = self._counters
        counters.in_flight += 1
        counters.in_flight_bytes += size
        counters.most_in_flight = max(counters.most_in_flight, self._sends)
        if self._full():
            self._room.clear()
        return size

    def answered(self, size: int) -> None:
        """A send's answer went out (or the connection gave up on it)."""
        self._sends -= 1
        self._bytes -= size
        self._counters.in_flight -= 1
        self._counters.in_flight_bytes -= size
        if not self._full():
            self._room.set()

    def producer_over_limit(self) -> None:
        self._counters.producers_over_limit_total += 1

    @property
    def full(self) -> bool:
        """At a limit: the connection must not read its next frame yet."""
        return not self._room.is_set()

    async def room(self) -> None:
        """Return once the connection may read its next frame: below both limits."""
        if self._room.is_set():
            return
        self._counters.read_pauses_total += 1
        await self._room.wait()

    def _full(self) -> bool:
        return self._sends >= self._max_sends or self._bytes >= self._max_bytes


class PendingRequests:
    """Requests other than sends that one connection has read and not answered: each runs as
    a task (an acknowledgement waits for its cursor's fsync, a seek for the log). Without a
    bound, a client acknowledging in a loop during a slow fsync would make the broker hold a
    task per frame; at the limit the read loop waits (TCP backpressure), as it does at the
    in-flight publish limits."""

    def __init__(self, limit: int, counters: PublishCounters) -> None:
        self._limit = limit
        self._counters = counters
        self._count = 0
        self._room = asyncio.Event()
        self._room.set()

    @property
    def count(self) -> int:
        return self._count

    @property
    def full(self) -> bool:
        return not self._room.is_set()

    def started(self, task: asyncio.Task[None]) -> None:
        self._count += 1
        self._counters.requests_pending += 1
        if self._count >= self._limit:
            self._room.clear()
        task.add_done_callback(self._ended)

    def _ended(self, _: asyncio.Task[None]) -> None:
        self._count -= 1
        self._counters.requests_pending -= 1
        if self._count < self._limit:
            self._room.set()

    async def room(self) -> None:
        if not self._room.is_set():
            self._counters.request_read_pauses_total += 1
            await self._room.wait()
