"""The wire fuzzer's generator on its own: it covers every command, a seed repeats its frames,
its commands are what they claim, its garbage is refused, and it follows the answers."""

from __future__ import annotations

import itertools
import random
from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from wire_fuzzer import (
    COMMAND,
    FRAME_KINDS,
    MALFORMED,
    OVERSIZE,
    TRUNCATED,
    ConnectionScript,
    ConnectionState,
    Frame,
    Target,
    WireFuzzer,
)

from scalable_topics.protocol import (
    COMMAND_CLASSES,
    Command,
    DeliveredMessage,
    ErrorCode,
    Message,
    MessageId,
    ProducerClosed,
    ProducerOpen,
    ProducerOpened,
    ProtocolError,
    Send,
    Subscribe,
    Success,
    decode_frame,
)

TARGET = Target("default/fuzzed", (0, 1, 2, 3), ("queue", "stream"), started_ms=1_700_000_000_000)
BIG = 1 << 31  # a frame limit the generator's own frames stay under


def fuzzer(seed: int) -> WireFuzzer:
    return WireFuzzer(random.Random(seed), TARGET, ConnectionState())


def test_every_command_and_every_kind_of_frame_is_drawn() -> None:
    generator = fuzzer(1)
    kinds = Counter(type(generator.command()).__name__ for _ in range(20_000))
    assert set(kinds) == {c.__name__ for c in COMMAND_CLASSES}
    frames = Counter(generator.frame_of(kind).kind for kind in FRAME_KINDS)
    assert set(frames) == set(FRAME_KINDS)


def test_a_seed_repeats_its_connections() -> None:
    def frames(seed: int) -> list[Frame]:
        script = ConnectionScript(random.Random(seed), TARGET, ConnectionState(), 400)
        return list(script.frames())

    assert frames(7) == frames(7)
    assert frames(7) != frames(8)


@settings(max_examples=60)
@given(st.integers(0, 2**32))
def test_command_frames_decode_to_the_command_they_name(seed: int) -> None:
    generator = fuzzer(seed)
    for _ in range(40):
        frame = generator.frame_of(COMMAND)
        assert isinstance(frame.data, bytes)
        assert type(decode_frame(frame.data, BIG)).__name__ == frame.command


@settings(max_examples=60)
@given(st.integers(0, 2**32))
def test_garbage_is_refused_with_a_protocol_error_only(seed: int) -> None:
    """Truncated frames are always malformed; any other frame decodes or is refused with a
    ProtocolError (never another exception): what the broker's codec promises."""
    generator = fuzzer(seed)
    for kind in FRAME_KINDS * 5:
        if kind == OVERSIZE:
            continue  # covered below
        frame = generator.frame_of(kind)
        if isinstance(frame.data, str):
            continue
        outcome = _decode_or_refuse(frame.data)
        if isinstance(outcome, ProtocolError):
            assert outcome.code in {ErrorCode.MALFORMED_FRAME, ErrorCode.UNKNOWN_COMMAND}
        else:
            assert kind != TRUNCATED, frame


def test_malformed_frames_are_mostly_refused() -> None:
    generator = fuzzer(3)
    refused = 0
    for _ in range(500):
        try:
            decode_frame(generator.frame_of(MALFORMED).data, BIG)  # type: ignore[arg-type]
        except ProtocolError:
            refused += 1
    # A wrong value can happen to be a right one (0 where an int goes): not every one is.
    assert refused > 400


def test_an_oversize_frame_is_past_the_limit() -> None:
    frame = fuzzer(4).frame_of(OVERSIZE)
    with pytest.raises(ProtocolError) as refused:
        decode_frame(frame.data)  # type: ignore[arg-type]
    assert refused.value.code is ErrorCode.FRAME_TOO_LARGE


def _decode_or_refuse(data: bytes) -> Command | ProtocolError:
    try:
        return decode_frame(data, BIG)
    except ProtocolError as error:
        return error


def test_the_connection_state_follows_the_answers() -> None:
    state = ConnectionState()
    opened = ProducerOpen(5, 2, TARGET.topic, 1)
    subscribed = Subscribe(6, 3, TARGET.topic, 1, "queue", "Shared", "c")  # type: ignore[arg-type]
    state.sent(opened)
    state.sent(subscribed)
    state.observe(ProducerOpened(5, "p", 0, None))
    state.observe(Success(6))
    assert (state.producers, state.consumers) == ({2}, {3})
    delivered = DeliveredMessage(MessageId(1, 4, 0), b"x", None, {}, None, 1, 0)
    state.observe(Message(3, (delivered,)))
    assert list(state.delivered) == [MessageId(1, 4, 0)]
    state.observe(ProducerClosed(2, ErrorCode.SEGMENT_TERMINATED, "split"))
    assert state.producers == set()


def test_producers_and_consumers_in_use_are_drawn_for_their_commands() -> None:
    state = ConnectionState(producers={2}, consumers={1})
    generator = WireFuzzer(random.Random(5), TARGET, state)
    sends = [generator.command(Send) for _ in range(200)]
    assert Counter(s.producer_id for s in sends).most_common(1)[0][0] == 2  # type: ignore[attr-defined]
    opens = [generator.command(ProducerOpen) for _ in range(200)]
    assert Counter(o.producer_id for o in opens)[2] < 40  # type: ignore[attr-defined]
    # Sequence ids of one producer go up, batch after batch.
    fresh = WireFuzzer(random.Random(6), TARGET, ConnectionState(producers={0, 1, 2, 3}))
    ids = [
        command.sequence_id
        for command in (fresh.command(Send) for _ in range(50))
        if isinstance(command, Send) and command.producer_id == 0
    ]
    assert sum(b > a for a, b in itertools.pairwise(ids)) > len(ids) // 2
