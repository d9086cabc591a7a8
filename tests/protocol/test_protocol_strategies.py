"""Hypothesis strategies for every command, shared by the protocol tests, and the check that
they cover the whole protocol."""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

from scalable_topics.model.hash_range import HashRange
from scalable_topics.protocol import (
    COMMAND_CLASSES,
    NO_PROPERTIES,
    Ack,
    AckType,
    AcquireExclusive,
    AssignedSegment,
    BatchMessage,
    Command,
    CommandType,
    Connect,
    Connected,
    ConsumerAssignment,
    ConsumerClose,
    ConsumerClosed,
    DeliveredMessage,
    EndOfSegment,
    Error,
    ErrorCode,
    ExclusiveGranted,
    ExclusiveRevoked,
    Flow,
    InitialPosition,
    Message,
    MessageId,
    Nack,
    NamespaceUpdate,
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
    RegistrationClosed,
    ReleaseExclusive,
    Seek,
    SegmentNode,
    SegmentState,
    SegmentSubscriptionType,
    Send,
    SendError,
    SendReceipt,
    Subscribe,
    Success,
    TopicsDiff,
    TopicsSnapshot,
    TopicUpdate,
    UnregisterConsumer,
    Unsubscribe,
    WatchClose,
    WatchClosed,
    WatchEnded,
    WatchNamespace,
    WatchTopic,
)
from scalable_topics.protocol.limits import MAX_TOPIC_SET_HASH

uints = st.integers(min_value=0, max_value=2**64 - 1)
small_uints = st.integers(min_value=0, max_value=1000)
texts = st.text(max_size=12)
payloads = st.binary(max_size=48)
properties = st.just(NO_PROPERTIES) | st.dictionaries(texts, texts, max_size=3)
hash_ranges = st.tuples(st.integers(0, 0xFFFF), st.integers(0, 0xFFFF)).map(
    lambda ends: HashRange(min(ends), max(ends))
)
id_lists = st.lists(uints, max_size=3).map(tuple)


def optional(strategy: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.none() | strategy


message_ids = st.builds(MessageId, uints, uints, uints)
batch_messages = st.builds(BatchMessage, payloads, optional(texts), properties, optional(uints))
delivered_messages = st.builds(
    DeliveredMessage,
    message_ids,
    payloads,
    optional(texts),
    properties,
    optional(uints),
    uints,
    uints,
)
segment_nodes = st.builds(
    SegmentNode,
    uints,
    hash_ranges,
    st.sampled_from(SegmentState),
    id_lists,
    id_lists,
    optional(texts),
)
assigned_segments = st.builds(AssignedSegment, uints, hash_ranges, optional(texts))
error_codes = st.sampled_from(ErrorCode)


def _tuples_of(strategy: st.SearchStrategy[Any], min_size: int = 0) -> st.SearchStrategy[Any]:
    return st.lists(strategy, min_size=min_size, max_size=4).map(tuple)


_acks = st.one_of(
    st.builds(
        Ack,
        consumer_id=uints,
        ack_type=st.just(AckType.INDIVIDUAL),
        message_ids=_tuples_of(message_ids, min_size=1),
        request_id=optional(uints),
    ),
    st.builds(
        Ack,
        consumer_id=uints,
        ack_type=st.just(AckType.CUMULATIVE),
        message_ids=message_ids.map(lambda message_id: (message_id,)),
        request_id=optional(uints),
    ),
)
_seeks = st.one_of(
    st.builds(Seek, request_id=uints, consumer_id=uints, message_id=message_ids),
    st.builds(Seek, request_id=uints, consumer_id=uints, timestamp_ms=uints),
)
_send_receipts = st.one_of(
    st.builds(SendReceipt, uints, uints, message_ids, st.booleans()),
    st.builds(SendReceipt, uints, uints, st.none(), st.just(True)),
)

COMMANDS: dict[type[Command], st.SearchStrategy[Any]] = {
    Connect: st.builds(Connect, uints, _tuples_of(small_uints), texts, optional(texts)),
    Connected: st.builds(Connected, uints, small_uints, texts, uints, uints),
    Ping: st.just(Ping()),
    Pong: st.just(Pong()),
    Success: st.builds(Success, uints),
    Error: st.builds(Error, optional(uints), error_codes, texts),
    ProducerOpen: st.builds(
        ProducerOpen,
        uints,
        uints,
        texts,
        uints,
        optional(texts),
        st.sampled_from(ProducerAccessMode),
        optional(uints),
    ),
    ProducerOpened: st.builds(ProducerOpened, uints, texts, uints, optional(uints)),
    ProducerClose: st.builds(ProducerClose, uints, uints),
    ProducerClosed: st.builds(ProducerClosed, uints, error_codes, texts),
    Send: _tuples_of(batch_messages, min_size=1).flatmap(
        # The batch's last sequence id is a uint too.
        lambda messages: st.builds(
            Send, uints, st.integers(0, 2**64 - len(messages)), st.just(messages)
        )
    ),
    SendReceipt: _send_receipts,
    SendError: st.builds(SendError, uints, uints, error_codes, texts),
    Subscribe: st.builds(
        Subscribe,
        uints,
        uints,
        texts,
        uints,
        texts,
        st.sampled_from(SegmentSubscriptionType),
        texts,
        uints,
        st.sampled_from(InitialPosition),
        uints,
    ),
    Unsubscribe: st.builds(Unsubscribe, uints, uints),
    ConsumerClose: st.builds(ConsumerClose, uints, uints),
    ConsumerClosed: st.builds(ConsumerClosed, uints, error_codes, texts),
    Flow: st.builds(Flow, uints, uints),
    Message: st.builds(Message, uints, _tuples_of(delivered_messages, min_size=1)),
    Ack: _acks,
    Nack: st.builds(Nack, uints, _tuples_of(message_ids), uints),
    RedeliverUnacknowledged: st.builds(RedeliverUnacknowledged, uints, _tuples_of(message_ids)),
    Seek: _seeks,
    EndOfSegment: st.builds(EndOfSegment, uints, optional(uints)),
    WatchTopic: st.builds(WatchTopic, uints, uints, texts),
    TopicUpdate: st.builds(
        TopicUpdate, uints, optional(uints), uints, _tuples_of(segment_nodes), optional(texts)
    ),
    WatchClose: st.builds(WatchClose, uints, uints),
    WatchClosed: st.builds(WatchClosed, uints, error_codes, texts),
    WatchNamespace: st.builds(
        WatchNamespace,
        uints,
        texts,
        st.dictionaries(texts, texts, max_size=4),
        optional(st.integers(0, MAX_TOPIC_SET_HASH)),
    ),
    NamespaceUpdate: st.one_of(
        st.builds(
            NamespaceUpdate,
            uints,
            snapshot=st.builds(TopicsSnapshot, _tuples_of(texts), st.booleans()),
        ),
        st.builds(
            NamespaceUpdate,
            uints,
            diff=st.builds(TopicsDiff, _tuples_of(texts), _tuples_of(texts)),
        ),
        st.builds(NamespaceUpdate, uints, ended=st.builds(WatchEnded, error_codes, texts)),
    ),
    NamespaceWatchClose: st.builds(NamespaceWatchClose, uints, uints),
    RegisterConsumer: st.builds(RegisterConsumer, uints, uints, texts, texts, texts),
    ConsumerAssignment: st.builds(
        ConsumerAssignment, uints, uints, uints, _tuples_of(assigned_segments)
    ),
    UnregisterConsumer: st.builds(UnregisterConsumer, uints, uints),
    RegistrationClosed: st.builds(RegistrationClosed, uints, error_codes, texts),
    AcquireExclusive: st.builds(
        AcquireExclusive,
        uints,
        uints,
        texts,
        texts,
        st.sampled_from(ProducerAccessMode),
        optional(uints),
    ),
    ExclusiveGranted: st.builds(ExclusiveGranted, uints, optional(uints), uints),
    ReleaseExclusive: st.builds(ReleaseExclusive, uints, uints),
    ExclusiveRevoked: st.builds(ExclusiveRevoked, uints, error_codes, texts),
}

any_command: st.SearchStrategy[Any] = st.one_of(*COMMANDS.values())

# Every value msgpack can carry (the decoder sees arrays as tuples; maps need string keys).
wire_values: st.SearchStrategy[Any] = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**64 - 1)
    | st.floats(allow_nan=False)
    | texts
    | payloads,
    lambda children: (
        st.lists(children, max_size=4).map(tuple) | st.dictionaries(texts, children, max_size=3)
    ),
    max_leaves=12,
)


def test_every_command_has_a_strategy_and_one_tag() -> None:
    assert set(COMMANDS) == set(COMMAND_CLASSES)
    assert sorted(command.TYPE for command in COMMAND_CLASSES) == sorted(CommandType)
