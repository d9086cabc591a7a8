"""How many sends a client may make the broker hold: the in-flight publish limits.

A send is *in flight* from the moment the broker reads its frame until its answer (SendReceipt
or SendError) is written. Meanwhile the broker holds the decoded batch, a task and, once the
log has it, the receipt waiting for its turn. Two limits bound that:

- **Per connection**, in sends and in bytes: when either is reached the session stops reading
  the connection (:meth:`ConnectionPublishes.room`, awaited before each frame is read) until an
  answer goes out. The client's next frames wait in its own socket buffers, so the backpressure
  reaches it through TCP, without an error and without the broker buffering anything more.
  The other requests a connection's frames start as tasks (acknowledgements, seeks) count at
  the same gate, against a limit of their own.
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
    """Requests other than sends read and not answered yet (acknowledgements, seeks)."""
    request_read_pauses_total: int = 0
    """Times a connection stopped being read at its pending-request limit."""


class ConnectionPublishes:
    """What one connection has in flight, and the one gate its read loop waits at: sends (in
    count and in bytes) and the other requests its frames started as tasks (an
    acknowledgement waits for its cursor's fsync, a seek for the log; without a bound, a
    client acknowledging in a loop during a slow fsync would make the broker hold a task per
    frame). At any of the three limits the next frame stays unread (TCP backpressure)."""

    def __init__(
        self, max_sends: int, max_bytes: int, counters: PublishCounters, max_requests: int = 1000
    ) -> None:
        if max_sends < 1 or max_bytes < 1 or max_requests < 1:
            raise ValueError(
                f"in-flight limits must be at least 1, not {max_sends} sends / {max_bytes} "
                f"bytes / {max_requests} requests"
            )
        self._max_sends = max_sends
        self._max_bytes = max_bytes
        self._max_requests = max_requests
        self._counters = counters
        self._sends = 0
        self._bytes = 0
        self._requests = 0
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
        self._update_room()
        return size

    def answered(self, size: int) -> None:
        """A send's answer went out (or the connection gave up on it)."""
        self._sends -= 1
        self._bytes -= size
        self._counters.in_flight -= 1
        self._counters.in_flight_bytes -= size
        self._update_room()

    def request_started(self, task: asyncio.Task[None]) -> None:
        """Count a request other than a send until its task ends."""
        self._requests += 1
        self._counters.requests_pending += 1
        self._update_room()
        task.add_done_callback(self._request_ended)

    def _request_ended(self, _: asyncio.Task[None]) -> None:
        self._requests -= 1
        self._counters.requests_pending -= 1
        self._update_room()

    def producer_over_limit(self) -> None:
        self._counters.producers_over_limit_total += 1

    @property
    def full(self) -> bool:
        """At a limit: the connection must not read its next frame yet."""
        return not self._room.is_set()

    async def room(self) -> None:
        """Return once the connection may read its next frame: below every limit."""
        if self._room.is_set():
            return
        if self._requests >= self._max_requests:
            self._counters.request_read_pauses_total += 1
        else:
            self._counters.read_pauses_total += 1
        await self._room.wait()

    def _update_room(self) -> None:
        if (
            self._sends >= self._max_sends
            or self._bytes >= self._max_bytes
            or self._requests >= self._max_requests
        ):
            self._room.clear()
        else:
            self._room.set()
