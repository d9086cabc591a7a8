"""The wire format, pinned: tags, field order, enum and error code values, and the exact bytes
of a few frames. A failure here means peers already deployed would no longer understand us:
change the protocol version, not these tests."""

from __future__ import annotations

from pathlib import Path

import pytest

from scalable_topics.model.hash_range import HashRange
from scalable_topics.protocol import (
    COMMAND_CLASSES,
    Ack,
    AckType,
    AcquireExclusive,
    AssignedSegment,
    BatchMessage,
    Command,
    Connect,
    ConsumerAssignment,
    DeliveredMessage,
    Error,
    ErrorCode,
    ExclusiveGranted,
    Message,
    MessageId,
    NamespaceUpdate,
    ProducerAccessMode,
    SegmentNode,
    SegmentState,
    Send,
    TopicsDiff,
    TopicsSnapshot,
    TopicUpdate,
    WatchEnded,
    WatchNamespace,
    decode_frame,
    encode_frame,
)
from scalable_topics.protocol.schema import struct_schema

WIRE_LAYOUT = {
    "Connect": (1, "request_id protocol_versions client_name auth_token"),
    "Connected": (2, "request_id protocol_version broker_name max_frame_bytes max_message_bytes"),
    "Ping": (3, ""),
    "Pong": (4, ""),
    "Success": (5, "request_id"),
    "Error": (6, "request_id code message"),
    "ProducerOpen": (
        10,
        "request_id producer_id topic segment_id producer_name access_mode producer_epoch",
    ),
    "ProducerOpened": (11, "request_id producer_name producer_epoch last_sequence_id"),
    "ProducerClose": (12, "request_id producer_id"),
    "ProducerClosed": (13, "producer_id code message"),
    "Send": (14, "producer_id sequence_id messages"),
    "SendReceipt": (15, "producer_id sequence_id message_id duplicate"),
    "SendError": (16, "producer_id sequence_id code message"),
    "Subscribe": (
        20,
        "request_id consumer_id topic segment_id subscription subscription_type consumer_name "
        "priority initial_position permits",
    ),
    "Unsubscribe": (21, "request_id consumer_id"),
    "ConsumerClose": (22, "request_id consumer_id"),
    "ConsumerClosed": (23, "consumer_id code message"),
    "Flow": (24, "consumer_id permits"),
    "Message": (25, "consumer_id messages"),
    "Ack": (26, "consumer_id ack_type message_ids request_id"),
    "Nack": (27, "consumer_id message_ids redelivery_delay_ms"),
    "RedeliverUnacknowledged": (28, "consumer_id message_ids"),
    "Seek": (29, "request_id consumer_id message_id timestamp_ms"),
    "EndOfSegment": (30, "consumer_id last_entry_id"),
    "WatchTopic": (40, "request_id watch_id topic"),
    "TopicUpdate": (41, "watch_id request_id epoch segments controller_endpoint"),
    "WatchClose": (42, "request_id watch_id"),
    "WatchClosed": (43, "watch_id code message"),
    "WatchNamespace": (44, "watch_id namespace filters current_hash"),
    "NamespaceUpdate": (45, "watch_id snapshot diff ended"),
    "NamespaceWatchClose": (46, "request_id watch_id"),
    "RegisterConsumer": (50, "request_id registration_id topic subscription consumer_name"),
    "ConsumerAssignment": (51, "registration_id term layout_epoch segments"),
    "UnregisterConsumer": (52, "request_id registration_id"),
    "RegistrationClosed": (53, "registration_id code message"),
    "AcquireExclusive": (
        54,
        "request_id grant_id topic producer_name access_mode producer_epoch",
    ),
    "ExclusiveGranted": (55, "grant_id request_id producer_epoch"),
    "ReleaseExclusive": (56, "request_id grant_id"),
    "ExclusiveRevoked": (57, "grant_id code message"),
    # values inside commands
    "MessageId": (None, "segment_id entry_id batch_index"),
    "BatchMessage": (None, "payload key properties event_time_ms"),
    "DeliveredMessage": (
        None,
        "message_id payload key properties event_time_ms publish_time_ms redelivery_count",
    ),
    "SegmentNode": (None, "segment_id hash_range state parent_ids child_ids broker_url"),
    "AssignedSegment": (None, "segment_id hash_range broker_url"),
    "HashRange": (None, "start end"),
    "TopicsSnapshot": (None, "topics complete"),
    "TopicsDiff": (None, "added removed"),
    "WatchEnded": (None, "code message"),
}

ERROR_CODES = (
    "MalformedFrame FrameTooLarge UnknownCommand UnsupportedVersion NotConnected "
    "UnexpectedCommand AuthenticationFailed InvalidRequest NotAuthorized TopicNotFound "
    "SegmentNotFound SubscriptionNotFound UnknownProducer UnknownConsumer UnknownWatch IdInUse "
    "ProducerBusy ProducerFenced ConsumerBusy SubscriptionTypeMismatch SegmentTerminated "
    "WrongBroker MessageTooLarge ServiceNotReady InternalError NotLeader UnknownRegistration "
    "UnknownGrant TooManyOpen"
)


def test_tags_and_field_order_are_pinned() -> None:
    value_types = (
        MessageId,
        BatchMessage,
        DeliveredMessage,
        SegmentNode,
        AssignedSegment,
        HashRange,
        TopicsSnapshot,
        TopicsDiff,
        WatchEnded,
    )
    layout = {
        t.__name__: (
            int(t.TYPE) if t in COMMAND_CLASSES else None,
            " ".join(struct_schema(t).field_names),
        )
        for t in (*COMMAND_CLASSES, *value_types)
    }
    assert layout == WIRE_LAYOUT


def test_error_codes_are_pinned() -> None:
    assert " ".join(code.value for code in ErrorCode) == ERROR_CODES


GOLDEN: list[tuple[Command, str]] = [
    (
        Connect(1, (1,), "orders-app", "s3cret"),
        "9501019101aa6f72646572732d617070a6733363726574",
    ),
    (
        Send(
            7,
            100,
            (
                BatchMessage(b"hi", "k1", {"a": "b"}, 1_700_000_000_000),
                BatchMessage(b"\x00\xff"),
            ),
        ),
        # [14, 7, 100, [[bin "hi", "k1", {"a": "b"}, uint64 ms], [bin 00ff, nil, {}, nil]]]
        "940e07649294c4026869a26b3181a161a162cf0000018bcfe5680094c40200ffc080c0",
    ),
    (
        Message(
            3,
            (DeliveredMessage(MessageId(2, 41, 0), b"hi", "k1", {}, None, 1_700_000_000_123, 1),),
        ),
        "931903919793022900c4026869a26b3180c0cf0000018bcfe5687b01",
    ),
    (
        Ack(3, AckType.CUMULATIVE, (MessageId(2, 41, 1),), request_id=9),
        "951a03aa43756d756c6174697665919302290109",
    ),
    (
        Error(5, ErrorCode.PRODUCER_FENCED, "fenced"),
        "940605ae50726f647563657246656e636564a666656e636564",
    ),
    (
        TopicUpdate(
            watch_id=1,
            request_id=2,
            epoch=3,
            segments=(
                SegmentNode(0, HashRange(0, 0xFFFF), SegmentState.SEALED, (), (1, 2)),
                SegmentNode(
                    1, HashRange(0, 0x7FFF), SegmentState.ACTIVE, (0,), (), "ws://broker-0:6650"
                ),
            ),
            controller_endpoint="ws://broker-1:6650",
        ),
        "96290102039296009200cdffffa65365616c656490920102c096019200cd7fffa6416374697665910090"
        "b277733a2f2f62726f6b65722d303a36363530b277733a2f2f62726f6b65722d313a36363530",
    ),
    (
        ConsumerAssignment(
            registration_id=4,
            term=2,
            layout_epoch=7,
            segments=(
                AssignedSegment(3, HashRange(0, 0x3FFF), "ws://broker-0:6650"),
                AssignedSegment(5, HashRange(0x8000, 0xFFFF)),
            ),
        ),
        # [51, 4, 2, 7, [[3, [0, 16383], "ws://broker-0:6650"], [5, [32768, 65535], nil]]]
        "95330402079293039200cd3fffb277733a2f2f62726f6b65722d303a36363530930592cd8000cdffffc0",
    ),
    (
        AcquireExclusive(3, 1, "shop/orders", "ledger", ProducerAccessMode.EXCLUSIVE),
        # [54, 3, 1, "shop/orders", "ledger", "Exclusive", nil]
        "97360301ab73686f702f6f7264657273a66c6564676572a94578636c7573697665c0",
    ),
    (
        ExclusiveGranted(grant_id=1, request_id=None, producer_epoch=7),
        # [55, 1, nil, 7]: pushed after a WaitForExclusive request waited
        "943701c007",
    ),
    (
        WatchNamespace(2, "shop", {"tier": "gold"}, None),
        # [44, 2, "shop", {"tier": "gold"}, nil]
        "952c02a473686f7081a474696572a4676f6c64c0",
    ),
    (
        NamespaceUpdate(2, snapshot=TopicsSnapshot(("orders", "refunds"), True)),
        # [45, 2, [["orders", "refunds"], true], nil, nil]
        "952d029292a66f7264657273a7726566756e6473c3c0c0",
    ),
    (
        NamespaceUpdate(2, diff=TopicsDiff(("returns",), ("refunds",))),
        # [45, 2, nil, [["returns"], ["refunds"]], nil]
        "952d02c09291a772657475726e7391a7726566756e6473c0",
    ),
    (
        NamespaceUpdate(2, ended=WatchEnded(ErrorCode.NOT_AUTHORIZED, "no")),
        # [45, 2, nil, nil, ["NotAuthorized", "no"]]
        "952d02c0c092ad4e6f74417574686f72697a6564a26e6f",
    ),
]


@pytest.mark.parametrize(("command", "wire_hex"), GOLDEN, ids=lambda v: type(v).__name__)
def test_golden_frames(command: Command, wire_hex: str) -> None:
    assert encode_frame(command).hex() == wire_hex
    assert decode_frame(bytes.fromhex(wire_hex)) == command


def test_the_auth_token_stays_out_of_logs() -> None:
    assert "s3cret" not in repr(Connect(1, (1,), "app", "s3cret"))


def _example_frames_in_the_docs() -> list[bytes]:
    docs = Path(__file__).parents[2] / "docs" / "protocol.md"
    example = docs.read_text().split("## 10. A worked example", 1)[1]
    frames: list[str] = []
    previous_was_hex = False
    for line in example.splitlines():
        text = line.strip()
        is_hex = bool(text) and all(c in "0123456789abcdef" for c in text)
        if is_hex and previous_was_hex:
            frames[-1] += text  # a long frame continues on the next line
        elif is_hex:
            frames.append(text)
        previous_was_hex = is_hex
    return [bytes.fromhex(frame) for frame in frames]


def test_the_worked_example_in_the_docs_is_real() -> None:
    frames = _example_frames_in_the_docs()
    assert len(frames) == 5
    for frame in frames:
        assert encode_frame(decode_frame(frame)) == frame
