"""Frames that attack a broker, from a seeded ``random.Random``: the wire fuzzer's generator.

Every command of the protocol is built from its own class (``scalable_topics.protocol``), its
fields drawn from their type hints: mostly values that reach real state (the fuzzed topic, its
segments and subscriptions, a few producer and consumer ids, message ids the connection was
delivered), now and then the edges of each type (0, -1, 2**31, 2**63-1, 2**64-1, empty and huge
strings, non-ASCII text, huge lists). Around them come the frames a broken or hostile peer
sends: the same commands with a field of the wrong type or out of range, a field too many or
too few, a broken invariant or another command's tag (``malformed``); cut at a random point
(``truncated``); with bits flipped, bytes inserted or deleted (``mutated``); random bytes or
random msgpack (``random``); text WebSocket messages (``text``); one past the frame size
limit (``oversize``).

A :class:`ConnectionScript` strings them into one connection's life: Connect, then commands
that make sense together (open a producer and send on it, subscribe and acknowledge what came)
with garbage in between, often ending at the first garbage frame, which usually ends the
connection. Nothing here does I/O: ``fuzz_campaign.py`` sends the frames.
"""

from __future__ import annotations

import dataclasses
import random
from collections import deque
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from enum import Enum
from types import NoneType, UnionType
from typing import Any, Final, Union, get_args, get_origin, get_type_hints

from wire_values import (
    Splices,
    any_uint,
    edge_int,
    payload,
    small_uint,
    text,
    uint_edge,
    wrong_value,
)

from scalable_topics.model.hash_range import HashRange
from scalable_topics.protocol import (
    COMMAND_CLASSES,
    DEFAULT_MAX_FRAME_BYTES,
    NO_PROPERTIES,
    PROTOCOL_VERSION,
    Ack,
    AckType,
    AcquireExclusive,
    BatchMessage,
    Command,
    Connect,
    ConsumerClose,
    ConsumerClosed,
    Error,
    Flow,
    Message,
    MessageId,
    Nack,
    NamespaceWatchClose,
    Ping,
    Pong,
    ProducerAccessMode,
    ProducerClose,
    ProducerClosed,
    ProducerOpen,
    ProducerOpened,
    RedeliverUnacknowledged,
    RegisterConsumer,
    ReleaseExclusive,
    Seek,
    SegmentSubscriptionType,
    Send,
    Sender,
    Subscribe,
    Success,
    UnregisterConsumer,
    Unsubscribe,
    WatchClose,
    WatchNamespace,
    WatchTopic,
    encode_frame,
)

# The kinds of frame, as counted in reports.
COMMAND, MALFORMED, TRUNCATED, MUTATED, RANDOM, TEXT, OVERSIZE = (
    "command",
    "malformed",
    "truncated",
    "mutated",
    "random",
    "text",
    "oversize",
)
FRAME_KINDS: Final = (COMMAND, MALFORMED, TRUNCATED, MUTATED, RANDOM, TEXT, OVERSIZE)

# How often each kind of frame follows Connect (out of the sum). Garbage is rare enough that a
# connection usually gets a few dozen commands in before one ends it.
_FRAME_WEIGHTS: Final = {
    COMMAND: 900,
    MALFORMED: 35,
    TRUNCATED: 15,
    MUTATED: 30,
    RANDOM: 8,
    TEXT: 8,
    OVERSIZE: 0.02,
}

# Commands a client sends, weighted towards the ones that reach segments and subscriptions.
_CLIENT_WEIGHTS: Final[dict[type[Command], float]] = {
    Send: 240,
    ProducerOpen: 60,
    ProducerClose: 25,
    Subscribe: 60,
    Flow: 60,
    Ack: 120,
    Nack: 30,
    RedeliverUnacknowledged: 20,
    Seek: 20,
    ConsumerClose: 20,
    Unsubscribe: 8,
    WatchTopic: 20,
    WatchClose: 15,
    WatchNamespace: 10,
    NamespaceWatchClose: 8,
    RegisterConsumer: 10,
    UnregisterConsumer: 8,
    AcquireExclusive: 2,
    ReleaseExclusive: 6,
    Ping: 20,
    Pong: 4,
    Error: 2,
    Connect: 2,  # a second Connect: UnexpectedCommand
}
_BROKER_ONLY: Final = tuple(c for c in COMMAND_CLASSES if c.SENT_BY is Sender.BROKER)
_BROKER_ONLY_WEIGHT: Final = 4.0  # in all: each is refused with UnexpectedCommand

_ALL_TAGS: Final = tuple(int(c.TYPE) for c in COMMAND_CLASSES)
# msgpack type bytes a mutation writes over another: nil, the never-used 0xc1, bool, bin, ext,
# floats, uint64, int64, fixext, str8, array16/32, map16/32, empty fixmap/fixarray/fixstr,
# and a negative fixint.
_TYPE_BYTES: Final = bytes.fromhex("c0 c1 c2 c4 c7 ca cb cf d3 d4 d9 dc dd de df 80 90 a0 ff")
_KEYS: Final = tuple(f"key-{n}" for n in range(16))


@dataclass(frozen=True, slots=True)
class Target:
    """What the fuzzed broker serves: frames name these most of the time."""

    topic: str
    segment_ids: tuple[int, ...]
    subscriptions: tuple[str, ...]
    started_ms: int  # when the system started (Unix ms): Seek timestamps fall around it


@dataclass(frozen=True, slots=True)
class Frame:
    """One WebSocket message: binary when ``data`` is bytes, text when it is a str.
    ``awaits``: the request id whose answer the sender waits for before its next frame, as a
    client does before it uses the producer or consumer it opened."""

    kind: str
    data: bytes | str
    command: str  # the command it was built from (or "-"), for reports
    awaits: int | None = None


@dataclass(frozen=True, slots=True)
class _Pending:
    """A request whose answer opens or closes a producer or a consumer."""

    producer: bool  # a producer's id, else a consumer's
    local_id: int
    opens: bool


@dataclass(slots=True)
class ConnectionState:
    """What one connection's frames refer back to: its request ids, each producer's next
    sequence id, the producers and consumers the broker opened for it, and message ids it was
    delivered. Whoever reads the answers passes each one to :meth:`observe`."""

    delivered: deque[MessageId] = dataclasses.field(default_factory=lambda: deque(maxlen=256))
    next_request_id: int = 1
    sequences: dict[int, int] = dataclasses.field(default_factory=dict)
    producers: set[int] = dataclasses.field(default_factory=set)
    consumers: set[int] = dataclasses.field(default_factory=set)
    pending: dict[int, _Pending] = dataclasses.field(default_factory=dict)

    def sent(self, command: Command) -> None:
        match command:
            case ProducerOpen() | ProducerClose():
                opens = isinstance(command, ProducerOpen)
                self.pending[command.request_id] = _Pending(True, command.producer_id, opens)
            case Subscribe() | ConsumerClose() | Unsubscribe():
                opens = isinstance(command, Subscribe)
                self.pending[command.request_id] = _Pending(False, command.consumer_id, opens)

    def observe(self, command: Command) -> None:
        """An answer or a push from the broker."""
        match command:
            case ProducerOpened() | Success():
                pending = self.pending.pop(command.request_id, None)
                if pending is not None:
                    ids = self.producers if pending.producer else self.consumers
                    if pending.opens:
                        ids.add(pending.local_id)
                    else:
                        ids.discard(pending.local_id)
            case Error(request_id=int() as request_id):
                self.pending.pop(request_id, None)
            case ProducerClosed():
                self.producers.discard(command.producer_id)
            case ConsumerClosed():
                self.consumers.discard(command.consumer_id)
            case Message():
                self.delivered.extend(message.message_id for message in command.messages)


def _hints(struct_type: type) -> list[tuple[str, Any]]:
    hints = get_type_hints(struct_type)
    if dataclasses.is_dataclass(struct_type):
        return [(f.name, hints[f.name]) for f in dataclasses.fields(struct_type)]
    return [(name, hints[name]) for name in struct_type._fields]  # type: ignore[attr-defined]


_FIELDS: Final[dict[type, list[tuple[str, Any]]]] = {c: _hints(c) for c in COMMAND_CLASSES}


class WireFuzzer:
    """Commands and frames for one connection, drawn from ``rng``."""

    def __init__(self, rng: random.Random, target: Target, state: ConnectionState) -> None:
        self.rng = rng
        self.target = target
        self.state = state
        kinds = list(_CLIENT_WEIGHTS)
        weights = list(_CLIENT_WEIGHTS.values())
        kinds += _BROKER_ONLY
        weights += [_BROKER_ONLY_WEIGHT / len(_BROKER_ONLY)] * len(_BROKER_ONLY)
        self._kinds = kinds
        self._kind_weights = weights
        self._last_producer_id = 0
        self._kind: type[Command] = Ping  # the kind of command being drawn
        self._frame_kinds = list(_FRAME_WEIGHTS)
        self._frame_weights = list(_FRAME_WEIGHTS.values())
        self._by_name: dict[str, Callable[[Splices], Any]] = {
            "request_id": self._request_id,
            "producer_id": self._producer_id,
            "sequence_id": self._sequence_id,
            "consumer_id": self._consumer_id,
            "watch_id": self._local_id,
            "registration_id": self._local_id,
            "grant_id": self._local_id,
            "topic": self._topic,
            "segment_id": self._segment_id,
            "subscription": self._subscription,
            "producer_name": self._producer_name,
            "consumer_name": self._short_name,
            "client_name": self._short_name,
            "access_mode": self._access_mode,
            "producer_epoch": self._producer_epoch,
            "protocol_versions": self._protocol_versions,
            "auth_token": self._auth_token,
            "messages": self._messages,
            "message_ids": self._message_ids,
            "permits": self._permits,
            "priority": lambda _: small_uint(self.rng),
            "redelivery_delay_ms": self._delay_ms,
            "timestamp_ms": self._timestamp_ms,
        }

    # -- frames ---------------------------------------------------------------------------------

    def frame(self) -> Frame:
        """Any frame but Connect: a command most of the time, garbage now and then."""
        kind = self.rng.choices(self._frame_kinds, self._frame_weights)[0]
        return self.frame_of(kind)

    def frame_of(self, kind: str) -> Frame:
        rng = self.rng
        if kind == COMMAND:
            command = self.command()
            return Frame(
                COMMAND, encode_frame(command), type(command).__name__, self._awaits(command)
            )
        if kind == MALFORMED:
            return self.malformed()
        if kind == TRUNCATED:
            command = self.command()
            data = encode_frame(command)
            return Frame(TRUNCATED, data[: rng.randrange(len(data))], type(command).__name__)
        if kind == MUTATED:
            command = self.command()
            return Frame(MUTATED, self.mutate(encode_frame(command)), type(command).__name__)
        if kind == RANDOM:
            return self.random_frame()
        if kind == TEXT:
            return self.text_frame()
        if kind == OVERSIZE:
            # Past the default limit, inside the WebSocket slack the broker keeps for an answer.
            size = DEFAULT_MAX_FRAME_BYTES + rng.randrange(1, 512 * 1024)
            return Frame(OVERSIZE, b"\x94\x0e\x01\x00" + b"\x00" * (size - 4), "-")
        raise ValueError(f"no frame kind {kind!r}")

    def connect(self) -> Frame:
        """The first frame: a valid Connect, but now and then a refused one or another command."""
        rng = self.rng
        roll = rng.random()
        if roll < 0.94:
            command: Command = Connect(
                self._request_id(Splices()), (PROTOCOL_VERSION,), self._short_name(Splices())
            )
        elif roll < 0.97:
            splices = Splices()
            command = Connect(
                self._request_id(splices), self._protocol_versions(splices), text(rng, splices)
            )
            if splices:
                return Frame(MALFORMED, splices.pack(self.wire_array(command)), "Connect")
        else:
            return self.frame()  # before Connect: NotConnected, or whatever the frame earns
        return Frame(COMMAND, encode_frame(command), "Connect", self._awaits(command))

    def setup(self) -> Iterator[Frame]:
        """What most clients do right after Connect: open a producer, subscribe a consumer
        (each waited for), so that the frames after them reach a segment."""
        rng, target = self.rng, self.target
        if rng.random() < 0.6:
            open_producer = self.command(ProducerOpen)
            command: Command = dataclasses.replace(
                open_producer, topic=target.topic, access_mode=ProducerAccessMode.SHARED
            )
            self.state.sent(command)
            yield Frame(COMMAND, encode_frame(command), "ProducerOpen", command.request_id)
        if rng.random() < 0.6:
            subscribe = self.command(Subscribe)
            command = dataclasses.replace(
                subscribe,
                topic=target.topic,
                subscription=rng.choice(target.subscriptions),
                subscription_type=SegmentSubscriptionType.SHARED,
                permits=rng.randrange(1, 200),
            )
            self.state.sent(command)
            yield Frame(COMMAND, encode_frame(command), "Subscribe", command.request_id)

    def _awaits(self, command: Command) -> int | None:
        """The request id to wait for after ``command``, most of the time for the requests
        whose answer a client needs before going on (a WaitForExclusive producer may wait for
        ever, and a registration for the controller: those are not waited for)."""
        if isinstance(command, ProducerOpen):
            if command.access_mode is ProducerAccessMode.WAIT_FOR_EXCLUSIVE:
                return None
        elif not isinstance(command, Subscribe | Connect):
            return None
        return command.request_id if self.rng.random() < 0.8 else None

    # -- commands -------------------------------------------------------------------------------

    def command(self, kind: type[Command] | None = None) -> Command:
        """A command of ``kind`` (or of a random kind) with random field values of the right
        wire types. Values no encoder writes (invalid UTF-8) are left to ``malformed``."""
        if kind is None:
            kind = self.rng.choices(self._kinds, self._kind_weights)[0]
        self._kind = kind
        for _ in range(20):
            splices = Splices()
            values = [self._field(name, hint, splices) for name, hint in _FIELDS[kind]]
            if splices:
                continue  # a raw value slipped in: draw again, this one must encode
            try:
                command = kind(*values)
            except ValueError:
                continue  # an invariant of the command (a cumulative ack of two ids, ...)
            self.state.sent(command)
            return command
        return Ping()

    def wire_array(self, command: Command) -> list[Any]:
        """The command's frame before packing: ``[tag, field, ...]``."""
        names = [name for name, _ in _FIELDS[type(command)]]
        return [int(command.TYPE), *(getattr(command, name) for name in names)]

    def malformed(self) -> Frame:
        """A command's frame, wrong in one way a decoder must catch."""
        rng = self.rng
        command = self.command()
        name = type(command).__name__
        splices = Splices()
        array = self.wire_array(command)
        roll = rng.randrange(12)
        if roll <= 3 and len(array) > 1:
            # One field of the wrong type, or out of range.
            index = rng.randrange(1, len(array))
            array[index] = wrong_value(rng, splices)
        elif roll == 4 and len(array) > 1:
            # Inside a field: an element of a list, a field of a message or id.
            index = rng.randrange(1, len(array))
            array[index] = self._confuse_inside(array[index], splices)
        elif roll == 5:
            if len(array) > 1 and rng.random() < 0.5:
                array.pop()
            else:
                array.append(wrong_value(rng, splices))
        elif roll == 6:
            # Another command's tag over these fields, or a tag of no command.
            array[0] = rng.choice(
                (*_ALL_TAGS, 0, 7, 99, 255, 256, 65_536, edge_int(rng), -1, -(2**63))
            )
        elif roll == 7:
            # The tag as a str, a float, nil or a bool.
            array[0] = rng.choice((str(array[0]), float(array[0]), None, True))
        elif roll == 8:
            # map <-> array: the fields as a map of names, or the array inside a map.
            names = ["tag", *(n for n, _ in _FIELDS[type(command)])]
            return Frame(
                MALFORMED,
                splices.pack(
                    dict(zip(names, array, strict=True)) if rng.random() < 0.5 else {"0": array}
                ),
                name,
            )
        elif roll == 9:
            array = self._broken_invariant(command)
        elif roll == 10:
            # Every field nil, or every field swapped for one of another type.
            array = [array[0], *(wrong_value(rng, splices) for _ in array[1:])]
        else:
            # The frame wrapped in arrays, or an empty array, or a bare scalar.
            choice = rng.randrange(3)
            packed: Any = [array] if choice == 0 else [] if choice == 1 else array[0]
            return Frame(MALFORMED, splices.pack(packed), name)
        return Frame(MALFORMED, splices.pack(array), name)

    def mutate(self, data: bytes) -> bytes:
        """Bit flips, inserted, deleted, duplicated or overwritten bytes, trailing garbage."""
        rng = self.rng
        buffer = bytearray(data)
        for _ in range(rng.randint(1, 4)):
            roll = rng.randrange(7)
            where = rng.randrange(len(buffer) + 1)
            if roll == 0 and buffer:
                index = min(where, len(buffer) - 1)
                buffer[index] ^= 1 << rng.randrange(8)
            elif roll == 1:
                buffer[where:where] = rng.randbytes(rng.randint(1, 8))
            elif roll == 2 and buffer:
                del buffer[where : where + rng.randint(1, 8)]
            elif roll == 3 and buffer:
                # A msgpack type byte where another was: the type changes, lengths lie.
                index = min(where, len(buffer) - 1)
                buffer[index] = rng.choice(_TYPE_BYTES)
            elif roll == 4:
                end = min(len(buffer), where + rng.randint(1, 16))
                buffer[where:where] = buffer[where:end]
            elif roll == 5:
                buffer += rng.randbytes(rng.randint(1, 8))
            elif buffer:
                index = min(where, len(buffer) - 1)
                buffer[index] = rng.randrange(256)
        return bytes(buffer)

    def random_frame(self) -> Frame:
        rng = self.rng
        roll = rng.randrange(4)
        if roll == 0:
            size = rng.choice((0, 1, 2, 3, 8, 64, 1024, 100_000))
            return Frame(RANDOM, rng.randbytes(size), "-")
        splices = Splices()
        if roll == 1:
            # A real tag with random fields: gets past the tag check into a command's decoder.
            fields = [wrong_value(rng, splices) for _ in range(rng.randrange(12))]
            return Frame(RANDOM, splices.pack([rng.choice(_ALL_TAGS), *fields]), "-")
        if roll == 2:
            return Frame(RANDOM, splices.pack(wrong_value(rng, splices)), "-")
        # Two frames in one message: a valid one with another after it.
        first, second = (encode_frame(self.command()) for _ in range(2))
        return Frame(RANDOM, first + second, "-")

    def text_frame(self) -> Frame:
        rng = self.rng
        if rng.random() < 0.5:
            return Frame(TEXT, repr(self.command()), "-")
        return Frame(TEXT, "".join(chr(rng.randrange(0x20, 0x7F)) for _ in range(20)), "-")

    # -- fields ---------------------------------------------------------------------------------

    def _field(self, name: str, hint: Any, splices: Splices) -> Any:
        special = self._by_name.get(name)
        if name == "messages" and self._kind is not Send:
            special = None  # a Message's are delivered messages: drawn by their type
        if special is not None and self.rng.random() < 0.97:
            value = special(splices)
            # A name shared by an optional field and a required one (producer_name): nil
            # only where the command allows it.
            if value is not None or NoneType in get_args(hint):
                return value
        return self._of_type(hint, splices)

    def _of_type(self, hint: Any, splices: Splices, depth: int = 0) -> Any:
        rng = self.rng
        if hint is int:
            return any_uint(rng)
        if hint is str:
            return text(rng, splices)
        if hint is bytes:
            return payload(rng)
        if hint is bool:
            return rng.random() < 0.5
        origin, args = get_origin(hint), get_args(hint)
        if origin in (Union, UnionType) and NoneType in args:
            if rng.random() < 0.4:
                return None
            (present,) = (arg for arg in args if arg is not NoneType)
            return self._of_type(present, splices, depth)
        if origin is tuple:
            count = rng.choice((0, 1, 1, 2, 3)) if depth < 2 else 0
            return tuple(self._of_type(args[0], splices, depth + 1) for _ in range(count))
        if origin is Mapping:
            return self._properties(splices)
        if isinstance(hint, type) and issubclass(hint, Enum):
            return rng.choice(list(hint))
        if hint is HashRange:
            start = rng.randrange(0x10000)
            return HashRange(start, rng.randrange(start, 0x10000))
        if hint is BatchMessage:
            return self._batch_message(splices)
        if hint is MessageId:
            return self._message_id()
        if isinstance(hint, type) and (dataclasses.is_dataclass(hint) or hasattr(hint, "_fields")):
            return hint(*(self._of_type(h, splices, depth + 1) for _, h in _hints(hint)))
        raise TypeError(f"the fuzzer has no values of {hint!r}")

    def _request_id(self, splices: Splices) -> int:
        state, rng = self.state, self.rng
        roll = rng.random()
        if roll < 0.03:
            return uint_edge(rng) if rng.random() < 0.5 else max(0, state.next_request_id - 1)
        request_id = state.next_request_id
        state.next_request_id += 1
        return request_id

    def _local_id(self, splices: Splices) -> int:
        return self.rng.randrange(4) if self.rng.random() < 0.95 else any_uint(self.rng)

    def _producer_id(self, splices: Splices) -> int:
        opening = self._kind is ProducerOpen
        producer_id = self._id_among(self.state.producers, opening, splices)
        self._last_producer_id = producer_id  # the sequence id drawn next is this producer's
        return producer_id

    def _consumer_id(self, splices: Splices) -> int:
        return self._id_among(self.state.consumers, self._kind is Subscribe, splices)

    def _id_among(self, open_ids: set[int], opening: bool, splices: Splices) -> int:
        """Mostly an id not open yet when opening one, an open one otherwise (as a client
        does), else any of the few ids the connection uses."""
        rng = self.rng
        if rng.random() < 0.85:
            candidates = [n for n in range(4) if (n in open_ids) != opening]
            if candidates:
                return rng.choice(candidates)
        return self._local_id(splices)

    def _sequence_id(self, splices: Splices) -> int:
        """Mostly the producer's next sequence id; now and then one it used (a duplicate), or
        any."""
        rng, sequences = self.rng, self.state.sequences
        producer_id = self._last_producer_id
        roll = rng.random()
        if roll < 0.85:
            sequence = sequences.get(producer_id, 0)
            sequences[producer_id] = sequence + rng.randint(1, 4)
            return sequence
        if roll < 0.95:
            return max(0, sequences.get(producer_id, 0) - rng.randint(1, 8))
        return any_uint(rng)

    def _topic(self, splices: Splices) -> str:
        rng = self.rng
        if rng.random() < 0.9:
            return self.target.topic
        namespace = self.target.topic.split("/")[0]
        return rng.choice(
            (
                f"{namespace}/absent",
                namespace,
                self.target.topic.upper(),
                f"{self.target.topic}/extra",
                f"{namespace}/{'a' * 300}",
                text(rng, splices),
            )
        )

    def _segment_id(self, splices: Splices) -> int:
        rng = self.rng
        return rng.choice(self.target.segment_ids) if rng.random() < 0.9 else any_uint(rng)

    def _subscription(self, splices: Splices) -> str:
        rng = self.rng
        roll = rng.random()
        if roll < 0.75:
            return rng.choice(self.target.subscriptions)
        if roll < 0.9:
            return f"fuzz-{rng.randrange(4)}"
        return rng.choice(("", "a" * 129, "-leading", "a/b", "x" * 128, text(rng, splices)))

    def _producer_name(self, splices: Splices) -> str | None:
        rng = self.rng
        roll = rng.random()
        if roll < 0.6:
            return None
        if roll < 0.95:
            return f"fuzz-producer-{rng.randrange(4)}"
        return text(rng, splices)

    def _short_name(self, splices: Splices) -> str:
        return (
            f"fuzz-{self.rng.randrange(8)}" if self.rng.random() < 0.9 else text(self.rng, splices)
        )

    def _access_mode(self, splices: Splices) -> ProducerAccessMode:
        rng = self.rng
        return (
            ProducerAccessMode.SHARED
            if rng.random() < 0.85
            else rng.choice(list(ProducerAccessMode))
        )

    def _producer_epoch(self, splices: Splices) -> int | None:
        rng = self.rng
        roll = rng.random()
        if roll < 0.85:
            return None
        if roll < 0.95:
            return small_uint(rng)
        return rng.choice((2**62, 2**62 + 1, 2**63 - 1, 2**63, 2**64 - 1))

    def _protocol_versions(self, splices: Splices) -> tuple[int, ...]:
        rng = self.rng
        if rng.random() < 0.9:
            return (PROTOCOL_VERSION,)
        return rng.choice(
            ((), (0,), (2,), (2**64 - 1,), (1, 1, 1), (PROTOCOL_VERSION,) * 50_000, (3, 1))
        )

    def _auth_token(self, splices: Splices) -> str | None:
        return None if self.rng.random() < 0.95 else text(self.rng, splices)

    def _messages(self, splices: Splices) -> tuple[BatchMessage, ...]:
        rng = self.rng
        if rng.random() < 0.999:
            return tuple(self._batch_message(splices) for _ in range(rng.randint(1, 4)))
        # A huge batch of one small message over and over (drawing each would cost the fuzzer
        # more than the broker, and a big one would make a frame of gigabytes).
        message = BatchMessage(rng.randbytes(rng.randrange(16)), rng.choice(_KEYS))
        return (message,) * rng.choice((1000, 10_000))

    def _batch_message(self, splices: Splices) -> BatchMessage:
        rng = self.rng
        roll = rng.random()
        key = rng.choice(_KEYS) if roll < 0.7 else None if roll < 0.95 else text(rng, splices)
        return BatchMessage(
            payload(rng),
            key,
            NO_PROPERTIES if rng.random() < 0.8 else self._properties(splices),
            None if rng.random() < 0.8 else any_uint(rng),
        )

    def _properties(self, splices: Splices) -> dict[str, str]:
        rng = self.rng
        return {text(rng, splices): text(rng, splices) for _ in range(rng.randint(0, 3))}

    def _message_ids(self, splices: Splices) -> tuple[MessageId, ...]:
        rng = self.rng
        if rng.random() < 0.995:
            return tuple(self._message_id() for _ in range(rng.randint(1, 3)))
        # None, or a huge list: consecutive ids of one segment (cheap to draw).
        segment_id = rng.choice(self.target.segment_ids)
        count = rng.choice((0, 5000, 100_000))
        return tuple(MessageId(segment_id, n, 0) for n in range(count))

    def _message_id(self) -> MessageId:
        rng = self.rng
        delivered = self.state.delivered
        if delivered and rng.random() < 0.7:
            return delivered[rng.randrange(len(delivered))]
        if rng.random() < 0.9:
            return MessageId(
                rng.choice(self.target.segment_ids), rng.randrange(64), small_uint(rng)
            )
        return MessageId(any_uint(rng), any_uint(rng), any_uint(rng))

    def _permits(self, splices: Splices) -> int:
        rng = self.rng
        return rng.randrange(1000) if rng.random() < 0.9 else any_uint(rng)

    def _delay_ms(self, splices: Splices) -> int:
        rng = self.rng
        return rng.randrange(50) if rng.random() < 0.9 else any_uint(rng)

    def _timestamp_ms(self, splices: Splices) -> int:
        rng = self.rng
        if rng.random() < 0.8:
            return self.target.started_ms + rng.randrange(-1000, 600_000)
        return any_uint(rng)

    # -- malformed ------------------------------------------------------------------------------

    def _confuse_inside(self, value: Any, splices: Splices) -> Any:
        rng = self.rng
        if isinstance(value, tuple) and value:
            items = list(value)
            index = rng.randrange(len(items))
            items[index] = self._confuse_inside(items[index], splices)
            return items
        if isinstance(value, dict) and value:
            # A property's value, or a key, of the wrong type.
            items = list(value.items())
            key, item = items[rng.randrange(len(items))]
            return {**value, key: wrong_value(rng, splices)} if rng.random() < 0.5 else {1: item}
        return wrong_value(rng, splices)

    def _broken_invariant(self, command: Command) -> list[Any]:
        """Well-typed fields that break a rule of the command (docs/protocol.md, section 7)."""
        rng = self.rng
        seg = rng.choice(self.target.segment_ids)
        choice = rng.randrange(4)
        if choice == 0:
            return [int(Send.TYPE), small_uint(rng), small_uint(rng), []]
        if choice == 1:
            ids = [MessageId(seg, n, 0) for n in range(rng.choice((0, 2, 3)))]
            return [int(Ack.TYPE), small_uint(rng), AckType.CUMULATIVE.value, ids, None]
        if choice == 2:
            both = rng.random() < 0.5
            message_id = MessageId(seg, 0, 0) if both else None
            timestamp = 0 if both else None
            return [int(Seek.TYPE), self._request_id(Splices()), 0, message_id, timestamp]
        return [int(Ack.TYPE), small_uint(rng), AckType.INDIVIDUAL.value, [], 1]


# How a connection ends once its frames are sent: "pong" (a Ping, wait for its Pong, then
# close), "close" (a WebSocket close at once) or "abort" (drop the TCP connection with
# requests still in flight).
ENDINGS: Final = ("pong", "close", "abort")


class ConnectionScript:
    """One connection's frames: Connect, then up to ``max_frames`` more. It often stops right
    after its first garbage frame (which usually ends the connection), sometimes goes on to
    check that the broker reads nothing after it."""

    def __init__(
        self, rng: random.Random, target: Target, state: ConnectionState, max_frames: int
    ) -> None:
        self.rng = rng
        self.fuzzer = WireFuzzer(rng, target, state)
        self.max_frames = max_frames
        self.ending = rng.choices(ENDINGS, (70, 15, 15))[0]

    def frames(self) -> Iterator[Frame]:
        rng = self.rng
        yield self.fuzzer.connect()
        yield from self.fuzzer.setup()
        # Geometric lengths: many short connections, some long ones.
        length = min(self.max_frames, int(rng.expovariate(1 / 60)) + 1)
        for _ in range(length):
            frame = self.fuzzer.frame()
            yield frame
            if frame.kind not in (COMMAND, TEXT) and rng.random() < 0.7:
                return
