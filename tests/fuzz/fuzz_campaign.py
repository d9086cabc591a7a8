"""Sends the wire fuzzer's frames to a broker over many connections at once, and counts what
comes back.

``parallel`` workers share one budget of frames. Each takes the next connection number ``n``
and plays the connection drawn from ``random.Random(f"{seed}/{n}")``: most are a scripted
connection (``wire_fuzzer.ConnectionScript``), some abuse the WebSocket layer itself (a frame
cut off by the TCP close, a length announced and never sent, fragments, reserved bits and
opcodes, an unmasked frame, bad control and close frames, an upgrade abandoned), some are a
burst of connections opened at once and dropped together. Every answer is decoded and
counted by command and error code; an ``InternalError`` answer, an answer that does not
decode, a text message from the broker and a connection that stops answering (no Pong within
``STALL_SECONDS``) are findings, each kept with the last frames its connection sent.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import itertools
import random
import struct
import time
from collections import Counter, deque
from collections.abc import Callable
from dataclasses import dataclass, field

from raw_websocket import HandshakeRefused, Opcode, RawWebSocket, frame_header
from wire_fuzzer import (
    COMMAND,
    ConnectionScript,
    ConnectionState,
    Frame,
    Target,
    WireFuzzer,
)

from scalable_topics.protocol import (
    PROTOCOL_VERSION,
    Connect,
    ErrorCode,
    Ping,
    Pong,
    ProducerOpen,
    ProtocolError,
    SegmentSubscriptionType,
    Subscribe,
    decode_frame,
    encode_frame,
)
from scalable_topics.tasks import cancel_and_wait
from support.wire_client import abandon_upgrade

PROGRESS_SECONDS = 10.0
STALL_SECONDS = 60.0  # a connection that answers no Ping for this long has stopped serving
CLOSE_SECONDS = 30.0  # bounds the closing handshake of a broker that stopped serving
_RECENT_FRAMES = 12  # kept per connection, to show with a finding
_MAX_FINDINGS = 20  # kept per kind of finding; every one is counted
_SHOWN_BYTES = 160

# What a connection is, out of 1000: scripted, WebSocket-level abuse, or a burst.
_SCRIPTED, _ABUSE, _BURST = "scripted", "abuse", "burst"
_CONNECTION_KINDS = {_SCRIPTED: 975, _ABUSE: 22, _BURST: 3}
_ABUSES = (
    "cut mid-frame",
    "length never sent",
    "fragments",
    "reserved bits",
    "reserved opcode",
    "unmasked",
    "bad control frame",
    "bad close frame",
    "silent",
    "upgrade abandoned",
)


@dataclass
class Finding:
    what: str
    connection: str
    detail: str
    recent: list[str]

    def render(self) -> str:
        frames = "\n".join(f"    {line}" for line in self.recent)
        return f"{self.what} on connection {self.connection}: {self.detail}\n{frames}"


@dataclass
class Tally:
    frames: int = 0
    frames_by_kind: Counter[str] = field(default_factory=Counter)
    connections: int = 0
    connections_by_kind: Counter[str] = field(default_factory=Counter)
    answers: Counter[str] = field(default_factory=Counter)
    close_codes: Counter[int] = field(default_factory=Counter)
    findings: dict[str, list[Finding]] = field(
        default_factory=lambda: collections.defaultdict(list)
    )
    finding_counts: Counter[str] = field(default_factory=Counter)
    seconds: float = 0.0

    @property
    def internal_errors(self) -> int:
        return self.finding_counts["InternalError answer"]

    def found(self, finding: Finding) -> None:
        self.finding_counts[finding.what] += 1
        kept = self.findings[finding.what]
        if len(kept) < _MAX_FINDINGS:
            kept.append(finding)

    def render(self) -> str:
        rate = self.frames / self.seconds if self.seconds else 0.0
        lines = [
            f"frames sent: {self.frames} in {self.seconds:.1f} s ({rate:,.0f} frames/s)",
            "  by kind: " + _counts(self.frames_by_kind),
            f"connections: {self.connections}",
            "  by kind: " + _counts(self.connections_by_kind),
            f"answers: {sum(self.answers.values())}",
        ]
        lines += [f"  {name}: {count}" for name, count in sorted(self.answers.items())]
        lines.append("close codes from the broker: " + _counts(self.close_codes))
        lines.append("findings: " + (_counts(self.finding_counts) or "none"))
        for kept in self.findings.values():
            lines += [finding.render() for finding in kept[:3]]
        return "\n".join(lines)


def _counts(counter: Counter[str] | Counter[int]) -> str:
    return ", ".join(f"{key} {count}" for key, count in sorted(counter.items(), key=str))


def _show(frame: Frame) -> str:
    data = frame.data
    shown = repr(data[:_SHOWN_BYTES]) if isinstance(data, str) else data[:_SHOWN_BYTES].hex()
    more = "..." if len(data) > _SHOWN_BYTES else ""
    return f"{frame.kind} {frame.command} ({len(data)} bytes): {shown}{more}"


class _Connection:
    """One connection's WebSocket, the reader of its answers, and what a finding shows."""

    def __init__(self, campaign: Campaign, ws: RawWebSocket, label: str) -> None:
        self.campaign = campaign
        self.ws = ws
        self.label = label
        self.state = ConnectionState()
        self.recent: deque[str] = deque(maxlen=_RECENT_FRAMES)
        self.pings = 0
        self.pongs = 0
        self.answered_requests: set[int] = set()
        self.answered = asyncio.Event()
        self.reader = asyncio.get_running_loop().create_task(self._read())

    @property
    def ended(self) -> bool:
        return self.reader.done() or self.ws.closing

    async def send(self, frame: Frame) -> bool:
        """Write one frame; False once the connection is gone."""
        if self.ended:
            return False
        data = frame.data
        if isinstance(data, str):
            self.ws.write_frame(data.encode(), Opcode.TEXT)
        else:
            self.ws.write_frame(data)
        self.campaign.counted(frame)
        self.recent.append(_show(frame))
        if self.campaign.trace is not None:
            self.campaign.trace(f"{self.label} > {_show(frame)}")
        if frame.kind == COMMAND and frame.command == "Ping":
            self.pings += 1
        try:
            await self.ws.drain()
        except ConnectionError:
            return False
        if frame.awaits is not None:
            await self._answer_to(frame.awaits)
        return True

    async def _answer_to(self, request_id: int) -> None:
        try:
            async with asyncio.timeout(STALL_SECONDS):
                while request_id not in self.answered_requests and not self.reader.done():
                    self.answered.clear()
                    await self.answered.wait()  # set by each answer, and when the reader ends
        except TimeoutError:
            self.campaign.found(
                self, "stall", f"request {request_id} unanswered after {STALL_SECONDS:g} s"
            )

    async def ping_and_wait(self) -> None:
        """A Ping after everything sent, and its Pong: the broker read every frame before it."""
        if not await self.send(Frame(COMMAND, encode_frame(Ping()), "Ping")):
            return
        try:
            async with asyncio.timeout(STALL_SECONDS):
                while self.pongs < self.pings and not self.reader.done():
                    self.answered.clear()
                    await self.answered.wait()  # set by each Pong, and when the reader ends
        except TimeoutError:
            self.campaign.found(
                self, "stall", f"no Pong within {STALL_SECONDS:g} s of the last Ping"
            )

    async def close(self) -> None:
        """The closing handshake, then the TCP connection dropped."""
        self.ws.send_close()
        with contextlib.suppress(ConnectionError):
            await self.ws.drain()
        _, pending = await asyncio.wait([self.reader], timeout=CLOSE_SECONDS)
        if pending:
            self.campaign.found(self, "stall", "no close frame answered ours")
        self.abort()

    def abort(self) -> None:
        self.ws.abort()
        self.reader.cancel()

    async def finish(self) -> None:
        """Wait for the reader to end (it ends when the TCP connection does, or is cancelled
        by ``abort``); a failure of the reader itself is the fuzzer's bug, raised here."""
        await asyncio.wait([self.reader])
        if not self.reader.cancelled() and self.reader.exception() is not None:
            raise self.reader.exception()  # type: ignore[misc]

    async def _read(self) -> None:
        try:
            await self._read_answers()
        finally:
            self.answered.set()  # whoever waits for a Pong stops waiting

    async def _read_answers(self) -> None:
        tally = self.campaign.tally
        while True:
            message = await self.ws.receive()
            if message is None:
                return
            opcode, data = message
            if opcode == Opcode.CLOSE:
                if self.ws.close_code is not None:
                    tally.close_codes[self.ws.close_code] += 1
                continue
            if opcode == Opcode.PONG:
                continue  # the answer to a WebSocket ping of ours
            if opcode != Opcode.BINARY:
                self.campaign.found(self, "text answer", repr(data[:_SHOWN_BYTES]))
                continue
            try:
                command = decode_frame(data, 1 << 31)
            except ProtocolError as error:
                self.campaign.found(self, "undecodable answer", f"{error}: {data[:80].hex()}")
                continue
            if self.campaign.trace is not None:
                self.campaign.trace(f"{self.label} < {command!r}"[:400])
            name = type(command).__name__
            code = getattr(command, "code", None)
            tally.answers[name if code is None else f"{name} {code}"] += 1
            if code is ErrorCode.INTERNAL_ERROR:
                self.campaign.found(self, "InternalError answer", repr(command))
            self.state.observe(command)
            request_id = getattr(command, "request_id", None)
            if request_id is not None:
                self.answered_requests.add(request_id)
                self.answered.set()
            if isinstance(command, Pong):
                self.pongs += 1
                self.answered.set()


class Campaign:
    """``frames`` frames against the broker at ``host:port`` over ``parallel`` connections at a
    time, drawn from ``seed``; it stops early once ``serving()`` says the broker is gone."""

    def __init__(
        self,
        host: str,
        port: int,
        target: Target,
        *,
        seed: int,
        frames: int,
        parallel: int = 8,
        max_frames_per_connection: int = 400,
        serving: Callable[[], bool] = lambda: True,
    ) -> None:
        self.host = host
        self.port = port
        self.target = target
        self.seed = seed
        self.budget = frames
        self.parallel = parallel
        self.max_frames_per_connection = max_frames_per_connection
        self.serving = serving  # False once the broker is gone: the campaign stops
        self.tally = Tally()
        self._numbers = itertools.count()
        # Called with every frame sent and answer received, when replaying a connection.
        self.trace: Callable[[str], None] | None = None

    async def run(self, progress: Callable[[Tally], None] | None = None) -> Tally:
        """Fuzz until the budget is spent; ``progress`` is called every ``PROGRESS_SECONDS``."""
        started = time.monotonic()
        reporting = None
        if progress is not None:
            reporting = asyncio.get_running_loop().create_task(self._report(progress, started))
        try:
            async with asyncio.TaskGroup() as group:
                for _ in range(self.parallel):
                    group.create_task(self._worker())
        finally:
            if reporting is not None:
                await cancel_and_wait(reporting)
        self.tally.seconds = time.monotonic() - started
        return self.tally

    async def _report(self, progress: Callable[[Tally], None], started: float) -> None:
        while True:
            await asyncio.sleep(PROGRESS_SECONDS)
            self.tally.seconds = time.monotonic() - started
            progress(self.tally)

    @property
    def exhausted(self) -> bool:
        return self.tally.frames >= self.budget

    def counted(self, frame: Frame) -> None:
        self.tally.frames += 1
        self.tally.frames_by_kind[frame.kind] += 1

    def found(self, connection: _Connection, what: str, detail: str) -> None:
        self.tally.found(Finding(what, connection.label, detail, list(connection.recent)))

    async def replay(self, number: int, trace: Callable[[str], None]) -> Tally:
        """Play connection ``number`` of the seed alone, showing every frame and answer."""
        self.trace = trace
        await self._connection(number)
        return self.tally

    async def _worker(self) -> None:
        while not self.exhausted and self.serving():
            await self._connection(next(self._numbers))

    async def _connection(self, number: int) -> None:
        rng = random.Random(f"{self.seed}/{number}")
        kind = rng.choices(list(_CONNECTION_KINDS), list(_CONNECTION_KINDS.values()))[0]
        label = f"{self.seed}/{number}"
        if kind == _SCRIPTED:
            await self._scripted(rng, label)
        elif kind == _ABUSE:
            await self._abuse(rng, label)
        else:
            await self._burst(rng, label)

    async def _open(self, label: str, kind: str) -> _Connection | None:
        try:
            ws = await RawWebSocket.connect(self.host, self.port)
        except (HandshakeRefused, OSError, asyncio.IncompleteReadError) as error:
            self.tally.finding_counts[f"handshake refused ({type(error).__name__})"] += 1
            return None
        self.tally.connections += 1
        self.tally.connections_by_kind[kind] += 1
        return _Connection(self, ws, label)

    async def _scripted(self, rng: random.Random, label: str) -> None:
        connection = await self._open(label, _SCRIPTED)
        if connection is None:
            return
        try:
            script = ConnectionScript(
                rng, self.target, connection.state, self.max_frames_per_connection
            )
            for frame in script.frames():
                if self.exhausted or not await connection.send(frame):
                    break
            if script.ending == "pong":
                await connection.ping_and_wait()
                await connection.close()
            elif script.ending == "close":
                await connection.close()
            else:
                connection.abort()
        finally:
            connection.abort()
            await connection.finish()

    async def _abuse(self, rng: random.Random, label: str) -> None:
        """One connection that breaks the WebSocket layer, after Connect and a few commands."""
        abuse = rng.choice(_ABUSES)
        if abuse == "upgrade abandoned":
            await abandon_upgrade(f"http://{self.host}:{self.port}")
            self.tally.connections += 1
            self.tally.connections_by_kind[f"abuse: {abuse}"] += 1
            return
        connection = await self._open(label, f"abuse: {abuse}")
        if connection is None:
            return
        ws = connection.ws
        fuzzer = WireFuzzer(rng, self.target, connection.state)
        try:
            frames = [
                fuzzer.connect(),
                *(fuzzer.frame_of(COMMAND) for _ in range(rng.randrange(6))),
            ]
            for frame in frames:
                if not await connection.send(frame):
                    return
            data = encode_frame(fuzzer.command())
            if abuse == "cut mid-frame":
                header = frame_header(Opcode.BINARY, len(data))
                ws.write_raw((header + data)[: rng.randrange(1, len(header) + len(data))])
                self.counted(Frame("ws: " + abuse, data, "-"))
                connection.abort()
                return
            if abuse == "length never sent":
                # The broker waits for the rest (or refuses the length at once): nothing we
                # send after this can be read as a frame of its own.
                length = rng.choice((len(data) + 1, 1 << 20, 1 << 31, (1 << 63) - 1))
                ws.write_raw(frame_header(Opcode.BINARY, length) + data)
                self.counted(Frame("ws: " + abuse, data, "-"))
                connection.abort()
                return
            if abuse == "fragments":
                self._fragments(rng, ws, data)
            elif abuse == "reserved bits":
                ws.write_frame(data, rsv=rng.randint(1, 7))
            elif abuse == "reserved opcode":
                ws.write_frame(data, rng.choice((3, 4, 5, 6, 7, 0xB, 0xC, 0xF)))
            elif abuse == "unmasked":
                ws.write_raw(frame_header(Opcode.BINARY, len(data), mask=False) + data)
            elif abuse == "bad control frame":
                # A ping longer than 125 bytes, or a fragmented one.
                if rng.random() < 0.5:
                    ws.write_frame(b"p" * 200, Opcode.PING)
                else:
                    ws.write_frame(b"p", Opcode.PING, fin=False)
            elif abuse == "bad close frame":
                payload = rng.choice(
                    (b"\x03", struct.pack("!H", 999), struct.pack("!H", 5000), b"\x03\xe8\xff\xfe")
                )
                ws.write_frame(payload, Opcode.CLOSE)
            if abuse != "silent":  # silent: no frame more, the connection just ends below
                self.counted(Frame("ws: " + abuse, data, "-"))
            with contextlib.suppress(ConnectionError):
                await ws.drain()
            if rng.random() < 0.5:
                await connection.close()
        finally:
            connection.abort()
            await connection.finish()

    @staticmethod
    def _fragments(rng: random.Random, ws: RawWebSocket, data: bytes) -> None:
        """A valid message in fragments (a ping between them), or fragments that break the
        rules: a continuation with nothing to continue, a new message before the last ended."""
        cuts = sorted(rng.sample(range(1, len(data)), min(len(data) - 1, rng.randint(1, 4))))
        pieces = [data[a:b] for a, b in itertools.pairwise([0, *cuts, len(data)])]
        broken = rng.random() < 0.4
        for index, piece in enumerate(pieces):
            last = index == len(pieces) - 1
            if index == 0:
                opcode = Opcode.CONTINUATION if broken and rng.random() < 0.5 else Opcode.BINARY
            else:
                opcode = Opcode.BINARY if broken else Opcode.CONTINUATION
            ws.write_frame(piece, opcode, fin=last)
            if not last and rng.random() < 0.3:
                ws.write_frame(b"between", Opcode.PING)

    async def _burst(self, rng: random.Random, label: str) -> None:
        """Many connections at once, each with a producer and a consumer on a real segment,
        all dropped together (or closed together)."""
        count = rng.choice((20, 50, 150))
        opened = await asyncio.gather(*(self._open(f"{label}.{n}", _BURST) for n in range(count)))
        connections = [c for c in opened if c is not None]
        segment = rng.choice(self.target.segment_ids)
        subscription = rng.choice(self.target.subscriptions)
        frames = [
            Connect(1, (PROTOCOL_VERSION,), "burst"),
            ProducerOpen(2, 1, self.target.topic, segment),
            Subscribe(
                3,
                1,
                self.target.topic,
                segment,
                subscription,
                SegmentSubscriptionType.SHARED,
                "burst",
                permits=10,
            ),
        ]
        try:
            await asyncio.gather(
                *(
                    self._send_all(
                        c, [Frame(COMMAND, encode_frame(f), type(f).__name__) for f in frames]
                    )
                    for c in connections
                )
            )
            if rng.random() < 0.5:
                await asyncio.gather(*(c.close() for c in connections))
        finally:
            for connection in connections:
                connection.abort()
            for connection in connections:
                await connection.finish()

    @staticmethod
    async def _send_all(connection: _Connection, frames: list[Frame]) -> None:
        for frame in frames:
            if not await connection.send(frame):
                return
