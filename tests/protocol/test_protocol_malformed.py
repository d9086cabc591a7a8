"""Whatever bytes arrive, decode_frame returns a command or raises ProtocolError with the code
that fits and a message naming the problem; no other exception ever leaves it."""

from __future__ import annotations

from typing import Any

import msgpack
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_protocol_strategies import COMMANDS, any_command, wire_values

from scalable_topics.protocol import (
    COMMAND_CLASSES,
    Ack,
    AckType,
    BatchMessage,
    Command,
    CommandType,
    Error,
    ErrorCode,
    MessageId,
    ProtocolError,
    Seek,
    Send,
    SendReceipt,
    decode_frame,
    encode_frame,
)
from scalable_topics.protocol.schema import struct_schema

NAMES_BY_TAG = {int(command_type.TYPE): command_type.__name__ for command_type in COMMAND_CLASSES}


def _pack(value: Any) -> bytes:
    packed: bytes = msgpack.packb(value, use_bin_type=True)
    return packed


def _refusal(data: bytes, max_frame_bytes: int = 1 << 20) -> ProtocolError:
    with pytest.raises(ProtocolError) as caught:
        decode_frame(data, max_frame_bytes)
    return caught.value


def _decode_or_refuse(data: bytes) -> Command | ProtocolError:
    try:
        return decode_frame(data)
    except ProtocolError as error:
        outcome = error
    assert outcome.message
    return outcome


# -- fuzzing ----------------------------------------------------------------------------------


@settings(max_examples=400, deadline=None)
@given(st.binary(max_size=64))
def test_random_bytes_are_refused_or_decoded_never_crash(data: bytes) -> None:
    outcome = _decode_or_refuse(data)
    if isinstance(outcome, ProtocolError):
        assert outcome.code in {ErrorCode.MALFORMED_FRAME, ErrorCode.UNKNOWN_COMMAND}


@settings(max_examples=400, deadline=None)
@given(st.sampled_from(list(NAMES_BY_TAG)), st.lists(wire_values, max_size=11))
def test_known_tags_with_arbitrary_fields_never_crash(tag: int, fields: list[Any]) -> None:
    outcome = _decode_or_refuse(_pack([tag, *fields]))
    if isinstance(outcome, ProtocolError):
        assert outcome.code is ErrorCode.MALFORMED_FRAME
        assert outcome.message.startswith(NAMES_BY_TAG[tag])


@settings(max_examples=200, deadline=None)
@given(any_command, st.data())
def test_a_wrong_field_is_named(command: Command, data: st.DataObject) -> None:
    frame = msgpack.unpackb(encode_frame(command), raw=False)
    names = struct_schema(type(command)).field_names
    if not names:
        return
    index = data.draw(st.integers(0, len(names) - 1))
    frame[index + 1] = data.draw(wire_values)
    outcome = _decode_or_refuse(_pack(frame))
    if isinstance(outcome, ProtocolError):
        assert outcome.code is ErrorCode.MALFORMED_FRAME
        invariant_broken = outcome.message.startswith(f"{type(command).__name__}: ")
        assert invariant_broken or f"{type(command).__name__}.{names[index]}" in outcome.message


@settings(max_examples=200, deadline=None)
@given(any_command, st.data())
def test_every_truncation_and_any_trailing_byte_is_malformed(
    command: Command, data: st.DataObject
) -> None:
    frame = encode_frame(command)
    cut = data.draw(st.integers(0, len(frame) - 1))
    truncated = _refusal(frame[:cut])
    assert truncated.code is ErrorCode.MALFORMED_FRAME
    assert "not one msgpack value" in truncated.message
    extended = _refusal(frame + data.draw(st.binary(min_size=1, max_size=4)))
    assert extended.code is ErrorCode.MALFORMED_FRAME


@settings(max_examples=100, deadline=None)
@given(st.sampled_from(list(COMMANDS)), st.data())
def test_a_float_anywhere_in_a_field_is_malformed(
    command_type: type[Command], data: st.DataObject
) -> None:
    # No field of the protocol is a float, so this mutation can never decode.
    frame = msgpack.unpackb(encode_frame(data.draw(COMMANDS[command_type])), raw=False)
    if len(frame) == 1:
        frame.append(0.5)
        assert _refusal(_pack(frame)).message.startswith(f"{command_type.__name__} has 0 fields")
        return
    path = _random_leaf_path(frame, data)
    _replace_at(frame, path, 0.5)
    error = _refusal(_pack(frame))
    assert error.code is ErrorCode.MALFORMED_FRAME
    assert "float 0.5" in error.message


def _random_leaf_path(frame: list[Any], data: st.DataObject) -> list[Any]:
    path: list[Any] = [data.draw(st.integers(1, len(frame) - 1))]
    node = frame[path[0]]
    while isinstance(node, list | dict) and node and data.draw(st.booleans()):
        key = data.draw(st.sampled_from(range(len(node)) if isinstance(node, list) else list(node)))
        path.append(key)
        node = node[key]
    return path


def _replace_at(frame: list[Any], path: list[Any], value: Any) -> None:
    node: Any = frame
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value


# -- size and shape ---------------------------------------------------------------------------


def test_oversize_frame_is_refused_before_unpacking(monkeypatch: pytest.MonkeyPatch) -> None:
    def unpack_must_not_run(*args: object, **kwargs: object) -> None:
        raise AssertionError("an oversize frame was unpacked")

    monkeypatch.setattr(msgpack, "unpackb", unpack_must_not_run)
    error = _refusal(b"\x00" * 1025, max_frame_bytes=1024)
    assert error.code is ErrorCode.FRAME_TOO_LARGE
    assert error.message == "the frame is 1025 bytes, over the limit of 1024"


def test_a_frame_at_the_limit_is_accepted() -> None:
    send = Send(1, 1, (BatchMessage(b"x" * 1000),))
    frame = encode_frame(send)
    assert decode_frame(frame, max_frame_bytes=len(frame)) == send
    assert _refusal(frame, max_frame_bytes=len(frame) - 1).code is ErrorCode.FRAME_TOO_LARGE


@pytest.mark.parametrize(
    ("data", "problem"),
    [
        (b"", "incomplete input"),
        (b"\xc1", "not one msgpack value"),  # a byte msgpack never uses
        (b"\xdd\xff\xff\xff\xff", "exceeds max_array_len"),  # 4G-element array header
        (b"\xdf\xff\xff\xff\xff", "exceeds max_map_len"),
        # bin and str are sliced from the frame, so a length past its end is merely incomplete
        (b"\xc6\xff\xff\xff\xff", "incomplete input"),  # 4 GiB bin header
        (b"\xdb\xff\xff\xff\xff", "incomplete input"),
        (b"\x91" * 100_000 + b"\x03", "not one msgpack value"),  # nesting beyond the stack
        (b"\x92\x06\xa2\xff\xfe", "utf-8"),  # a str that is not UTF-8
        (b"\x92\x03\xd4\x01\x00", "exceeds max_ext_len"),  # an extension type
        (b"\x92\x03\xd6\xff\x00\x00\x00\x00", "exceeds max_ext_len"),  # msgpack timestamp
        (b"\x92\x03\x81\x01\x02", "not allowed for map key"),
    ],
)
def test_frames_that_are_not_one_safe_msgpack_value(data: bytes, problem: str) -> None:
    error = _refusal(data, max_frame_bytes=1 << 20)
    assert error.code is ErrorCode.MALFORMED_FRAME
    assert problem in error.message


@pytest.mark.parametrize(
    ("value", "code", "message"),
    [
        (
            {"t": 1},
            ErrorCode.MALFORMED_FRAME,
            "a frame is a msgpack array [tag, fields...], got map",
        ),
        ([], ErrorCode.MALFORMED_FRAME, "got array of 0"),
        (3, ErrorCode.MALFORMED_FRAME, "got int 3"),
        (["Send", 1], ErrorCode.MALFORMED_FRAME, "a frame opens with an int tag, got str 'Send'"),
        ([True], ErrorCode.MALFORMED_FRAME, "a frame opens with an int tag, got bool true"),
        ([99], ErrorCode.UNKNOWN_COMMAND, "no command has the tag 99"),
        ([-1], ErrorCode.UNKNOWN_COMMAND, "no command has the tag -1"),
        ([3, 1], ErrorCode.MALFORMED_FRAME, "Ping has 0 fields (none), the frame carries 1"),
        (
            [24, 1],
            ErrorCode.MALFORMED_FRAME,
            "Flow has 2 fields (consumer_id, permits), the frame carries 1",
        ),
    ],
)
def test_wrong_shapes_are_named(value: Any, code: ErrorCode, message: str) -> None:
    error = _refusal(_pack(value))
    assert error.code is code
    assert message in error.message


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ([5, -1], "Flow.permits: expected an unsigned int, got int -1"),
        ([5, True], "Flow.permits: expected an unsigned int, got bool true"),
        ([5, "10"], "Flow.permits: expected an unsigned int, got str '10'"),
        ([None, 10], "Flow.consumer_id: expected an unsigned int, got nil"),
    ],
)
def test_ill_typed_scalars_are_named(fields: list[Any], message: str) -> None:
    assert _refusal(_pack([CommandType.FLOW, *fields])).message == message


def test_nested_problems_name_their_path() -> None:
    good = [b"payload", "key", {"a": "b"}, None]
    cases = {
        "Send.messages[1].payload: expected bin, got str 'text'": ["text", None, {}, None],
        "Send.messages[1].properties['a']: expected a str, got int 1": [b"", None, {"a": 1}, None],
        "Send.messages[1].properties: expected str keys, got bin of 1 bytes": [
            b"",
            None,
            {b"k": "v"},
            None,
        ],
        "Send.messages[1].event_time_ms: expected an unsigned int, got float 1.5": [
            b"",
            None,
            {},
            1.5,
        ],
        "Send.messages[1]: expected an array of 4 (payload, key, properties, event_time_ms), "
        "got array of 3": [b"", None, {}],
    }
    for message, bad in cases.items():
        error = _refusal(_pack([CommandType.SEND, 1, 2, [good, bad]]))
        assert error.message == message


def test_enum_values_are_checked() -> None:
    error = _refusal(_pack([CommandType.ACK, 1, "Cumulativ", [[0, 1, 0]], None]))
    assert error.message == (
        "Ack.ack_type: expected one of 'Individual', 'Cumulative', got str 'Cumulativ'"
    )
    error = _refusal(_pack([CommandType.ERROR, None, "Oops", "text"]))
    assert error.message == "Error.code: expected a value of ErrorCode, got str 'Oops'"


def test_hash_ranges_out_of_the_hash_space_are_refused() -> None:
    node = [3, [0x10, 0x1_0000], "Active", [], [], None]
    error = _refusal(_pack([CommandType.TOPIC_UPDATE, 1, None, 4, [node], None]))
    assert error.message.startswith("TopicUpdate.segments[0].hash_range: a hash range needs")


@pytest.mark.parametrize(
    ("command", "message"),
    [
        ([CommandType.SEND, 1, 2, []], "Send: a Send carries at least one message"),
        (
            # Found by the wire fuzzer: the broker stored the last id, past what the wire
            # carries, and could no longer answer a ProducerOpen of that producer.
            [CommandType.SEND, 1, 2**64 - 2, [[b"a", None, {}, None]] * 3],
            "Send: a Send's messages have sequence ids up to 2**64-1: 3 from "
            "18446744073709551614 go past it",
        ),
        ([CommandType.MESSAGE, 1, []], "Message: a Message frame carries at least one message"),
        ([CommandType.ACK, 1, "Individual", [], None], "Ack: an Ack names at least one message"),
        (
            [CommandType.ACK, 1, "Cumulative", [[0, 1, 0], [0, 2, 0]], None],
            "Ack: a cumulative Ack names exactly one message id, not 2",
        ),
        (
            [CommandType.SEEK, 1, 2, None, None],
            "Seek: a Seek sets exactly one of message_id and timestamp_ms",
        ),
        (
            [CommandType.SEEK, 1, 2, [0, 1, 0], 1700000000000],
            "Seek: a Seek sets exactly one of message_id and timestamp_ms",
        ),
        (
            [CommandType.SEND_RECEIPT, 1, 2, None, False],
            "SendReceipt: a SendReceipt names the batch's message id unless it is a duplicate",
        ),
    ],
)
def test_broken_invariants_are_refused(command: list[Any], message: str) -> None:
    error = _refusal(_pack(command))
    assert error.code is ErrorCode.MALFORMED_FRAME
    assert error.message.startswith(message)


def test_the_same_invariants_hold_when_building_commands() -> None:
    with pytest.raises(ValueError, match="at least one message"):
        Send(1, 2, ())
    with pytest.raises(ValueError, match="up to 2\\*\\*64-1"):
        Send(1, 2**64 - 1, (BatchMessage(b"a"), BatchMessage(b"b")))
    assert (
        Send(1, 2**64 - 2, (BatchMessage(b"a"), BatchMessage(b"b"))).last_sequence_id == 2**64 - 1
    )
    with pytest.raises(ValueError, match="exactly one message id"):
        Ack(1, AckType.CUMULATIVE, (MessageId(0, 1), MessageId(0, 2)))
    with pytest.raises(ValueError, match="exactly one of"):
        Seek(1, 2)
    with pytest.raises(ValueError, match="unless it is a duplicate"):
        SendReceipt(1, 2, None)


# -- answering the request ----------------------------------------------------------------------


def test_a_refused_request_keeps_its_request_id_for_the_error_frame() -> None:
    subscribe = [
        CommandType.SUBSCRIBE,
        42,
        7,
        "ns/orders",
        3,
        "sub",
        "Sharded",
        "c",
        0,
        "Latest",
        0,
    ]
    error = _refusal(_pack(subscribe))
    assert error.request_id == 42
    assert "Subscribe.subscription_type" in error.message
    answer = Error.from_protocol_error(error)
    assert answer == Error(42, ErrorCode.MALFORMED_FRAME, error.message)
    assert decode_frame(encode_frame(answer)) == answer


@pytest.mark.parametrize(
    "frame",
    [
        [CommandType.SUBSCRIBE, -3, 7],  # wrong arity, and the request id is unreadable
        [CommandType.SUCCESS, "1"],
        [CommandType.FLOW, 1, -1],  # Flow carries no request id
    ],
)
def test_no_request_id_is_invented(frame: list[Any]) -> None:
    assert _refusal(_pack(frame)).request_id is None


def test_connection_fatal_codes() -> None:
    fatal = {code for code in ErrorCode if code.closes_connection}
    assert fatal == {
        ErrorCode.MALFORMED_FRAME,
        ErrorCode.FRAME_TOO_LARGE,
        ErrorCode.UNKNOWN_COMMAND,
        ErrorCode.UNSUPPORTED_VERSION,
        ErrorCode.NOT_CONNECTED,
        ErrorCode.UNEXPECTED_COMMAND,
        ErrorCode.AUTHENTICATION_FAILED,
    }
    assert str(ProtocolError(ErrorCode.UNKNOWN_PRODUCER, "no producer 4")) == (
        "UnknownProducer: no producer 4"
    )
