"""Version negotiation, the limits a connection starts from, and who sends which command."""

from __future__ import annotations

import pytest

from scalable_topics.model.position import Position
from scalable_topics.protocol import (
    COMMAND_CLASSES,
    DEFAULT_MAX_FRAME_BYTES,
    DEFAULT_MAX_MESSAGE_BYTES,
    FRAME_OVERHEAD_RESERVE_BYTES,
    NO_PROPERTIES,
    PROTOCOL_VERSION,
    BatchMessage,
    Connect,
    Connected,
    MessageId,
    Ping,
    Pong,
    Send,
    Sender,
    TopicUpdate,
    decode_frame,
    encode_frame,
    negotiate_version,
)


def test_the_newest_common_version_wins() -> None:
    assert PROTOCOL_VERSION == 2
    assert negotiate_version([1]) == 1
    assert negotiate_version([3, 2, 1]) == 2
    assert negotiate_version([1, 2, 3], supported=[1, 2]) == 2
    assert negotiate_version([3, 4]) is None
    assert negotiate_version([]) is None


def test_a_handshake_round_trips() -> None:
    connect = Connect(request_id=1, protocol_versions=(1, 2), client_name="app", auth_token="t")
    assert decode_frame(encode_frame(connect)) == connect
    chosen = negotiate_version(connect.protocol_versions)
    assert chosen is not None
    connected = Connected(1, chosen, "broker-0", DEFAULT_MAX_FRAME_BYTES, DEFAULT_MAX_MESSAGE_BYTES)
    assert decode_frame(encode_frame(connected)) == connected


def test_a_message_of_the_largest_size_fits_in_a_frame_alone() -> None:
    assert DEFAULT_MAX_FRAME_BYTES == 5 * 1024 * 1024
    assert DEFAULT_MAX_MESSAGE_BYTES + FRAME_OVERHEAD_RESERVE_BYTES == DEFAULT_MAX_FRAME_BYTES
    properties = {"trace-id": "x" * 1000}
    payload = b"\x00" * (DEFAULT_MAX_MESSAGE_BYTES - 3 - 1008)
    largest = BatchMessage(payload, key="k" * 3, properties=properties)
    assert largest.size_bytes == DEFAULT_MAX_MESSAGE_BYTES
    frame = encode_frame(Send(2**64 - 1, 2**64 - 1, (largest,)))
    assert len(frame) <= DEFAULT_MAX_FRAME_BYTES
    assert decode_frame(frame) == Send(2**64 - 1, 2**64 - 1, (largest,))


def test_message_size_counts_utf8_bytes() -> None:
    assert BatchMessage(b"abc", key="é", properties={"ü": "v"}).size_bytes == 3 + 2 + 2 + 1


def test_commands_know_who_sends_them() -> None:
    assert Connect.SENT_BY is Sender.CLIENT
    assert TopicUpdate.SENT_BY is Sender.BROKER
    assert Ping.SENT_BY is Pong.SENT_BY is Sender.EITHER
    assert all(isinstance(command.SENT_BY, Sender) for command in COMMAND_CLASSES)


def test_message_ids_convert_to_and_from_segment_positions() -> None:
    message_id = MessageId.of(4, Position(17, 2))
    assert message_id == MessageId(4, 17, 2)
    assert message_id.position == Position(17, 2)
    assert str(message_id) == "4:17:2"
    assert MessageId(4, 17) < MessageId(4, 17, 1) < MessageId(4, 18)


def test_the_shared_empty_properties_cannot_be_filled() -> None:
    assert BatchMessage(b"").properties is NO_PROPERTIES
    with pytest.raises(TypeError, match="shared"):
        NO_PROPERTIES["k"] = "v"  # type: ignore[index]
    with pytest.raises(TypeError, match="shared"):
        NO_PROPERTIES.update(k="v")  # type: ignore[attr-defined]
    assert NO_PROPERTIES == {}
