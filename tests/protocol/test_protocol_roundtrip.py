"""Every command survives encode -> decode unchanged, and the inline fast paths agree with
the generic decoder on every input."""

from __future__ import annotations

from typing import Any

import msgpack
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_protocol_strategies import (
    COMMANDS,
    batch_messages,
    delivered_messages,
    message_ids,
    wire_values,
)

from scalable_topics.protocol import (
    BatchMessage,
    Command,
    DeliveredMessage,
    MessageId,
    Send,
    decode_frame,
    encode_frame,
)
from scalable_topics.protocol.fast_paths import ACCEPTORS
from scalable_topics.protocol.schema import FieldError, struct_schema


@pytest.mark.parametrize("command_type", list(COMMANDS), ids=lambda t: t.__name__)
@settings(max_examples=40, deadline=None)
@given(data=st.data())
def test_every_command_round_trips(command_type: type[Command], data: st.DataObject) -> None:
    command = data.draw(COMMANDS[command_type])
    frame = encode_frame(command)
    decoded = decode_frame(frame)
    assert type(decoded) is command_type
    assert decoded == command
    # One encoding per command: what a peer decodes, it re-encodes byte for byte.
    assert encode_frame(decoded) == frame


def test_decoded_values_have_their_own_types() -> None:
    send = Send(1, 2, (BatchMessage(b"p", key="k", properties={"k": "v"}),))
    decoded = decode_frame(encode_frame(send))
    assert isinstance(decoded, Send)
    assert type(decoded.messages) is tuple
    assert type(decoded.messages[0]) is BatchMessage
    assert decoded.messages[0].properties == {"k": "v"}
    assert decoded.last_sequence_id == 2


def test_encode_refuses_what_is_not_a_command() -> None:
    with pytest.raises(TypeError, match="not a protocol command"):
        encode_frame(MessageId(1, 2, 3))  # type: ignore[arg-type]


def _wire(value: Any) -> Any:
    """A value as the decoder sees it after msgpack: arrays as tuples."""
    return msgpack.unpackb(msgpack.packb(value, use_bin_type=True), use_list=False, raw=False)


def _near(valid: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """Wire forms of valid values with fields now and then swapped for arbitrary ones."""

    def corrupt(draw: st.DrawFn) -> Any:
        fields = list(_wire(draw(valid)))
        for index in range(len(fields)):
            if draw(st.integers(0, 3)) == 0:
                fields[index] = draw(wire_values)
        if draw(st.integers(0, 9)) == 0:
            fields = fields[: draw(st.integers(0, len(fields)))]
        return tuple(fields)

    return st.one_of(st.composite(corrupt)(), wire_values)


@pytest.mark.parametrize(
    ("value_type", "valid"),
    [
        (MessageId, message_ids),
        (BatchMessage, batch_messages),
        (DeliveredMessage, delivered_messages),
    ],
    ids=["MessageId", "BatchMessage", "DeliveredMessage"],
)
@settings(max_examples=150, deadline=None)
@given(data=st.data())
def test_fast_path_agrees_with_the_generic_decoder(
    value_type: type, valid: st.SearchStrategy[Any], data: st.DataObject
) -> None:
    wire = data.draw(_near(valid))
    accepted = ACCEPTORS[value_type](wire)
    try:
        expected = struct_schema(value_type).decode(wire)
    except FieldError:
        assert accepted is None
    else:
        assert accepted == expected
        assert type(accepted) is value_type
