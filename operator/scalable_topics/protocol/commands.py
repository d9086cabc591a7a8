"""Every command of protocol version 1, one frozen dataclass each.

A command's wire form is the msgpack array ``[tag, field, field, ...]``: its ``TYPE`` tag,
then its fields in the order they are declared here (``docs/protocol.md`` lists them). The
fields' Python types fix their wire types; ``schema.py`` derives the checks from them.

Requests that expect an answer carry a client-chosen ``request_id``, which the answer (or the
Error frame refusing the request) repeats. Sends are answered per ``(producer_id,
sequence_id)`` instead.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Enum, IntEnum
from typing import ClassVar, TypeAlias

from ..model.resources import ProducerAccessMode
from .enums import AckType, InitialPosition, SegmentSubscriptionType
from .errors import ErrorCode, ProtocolError
from .limits import MAX_TOPIC_SET_HASH, MAX_UINT
from .values import (
    AssignedSegment,
    BatchMessage,
    DeliveredMessage,
    MessageId,
    SegmentNode,
    TopicsDiff,
    TopicsSnapshot,
    WatchEnded,
)


class CommandType(IntEnum):
    """The tag that opens every frame. Stable: a tag is never reused for another command."""

    CONNECT = 1
    CONNECTED = 2
    PING = 3
    PONG = 4
    SUCCESS = 5
    ERROR = 6
    PRODUCER_OPEN = 10
    PRODUCER_OPENED = 11
    PRODUCER_CLOSE = 12
    PRODUCER_CLOSED = 13
    SEND = 14
    SEND_RECEIPT = 15
    SEND_ERROR = 16
    SUBSCRIBE = 20
    UNSUBSCRIBE = 21
    CONSUMER_CLOSE = 22
    CONSUMER_CLOSED = 23
    FLOW = 24
    MESSAGE = 25
    ACK = 26
    NACK = 27
    REDELIVER_UNACKNOWLEDGED = 28
    SEEK = 29
    END_OF_SEGMENT = 30
    WATCH_TOPIC = 40
    TOPIC_UPDATE = 41
    WATCH_CLOSE = 42
    WATCH_CLOSED = 43
    WATCH_NAMESPACE = 44
    NAMESPACE_UPDATE = 45
    NAMESPACE_WATCH_CLOSE = 46
    REGISTER_CONSUMER = 50
    CONSUMER_ASSIGNMENT = 51
    UNREGISTER_CONSUMER = 52
    REGISTRATION_CLOSED = 53
    ACQUIRE_EXCLUSIVE = 54
    EXCLUSIVE_GRANTED = 55
    RELEASE_EXCLUSIVE = 56
    EXCLUSIVE_REVOKED = 57


class Sender(Enum):
    """Who may send a command; a broker refuses a broker-only command with UnexpectedCommand."""

    CLIENT = "client"
    BROKER = "broker"
    EITHER = "either"


# -- connection ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Connect:
    """The first frame of a connection. ``protocol_versions`` lists every version the client
    speaks; answered by Connected or by an Error (UnsupportedVersion, AuthenticationFailed)."""

    TYPE: ClassVar[CommandType] = CommandType.CONNECT
    SENT_BY: ClassVar[Sender] = Sender.CLIENT

    request_id: int
    protocol_versions: tuple[int, ...]
    client_name: str
    auth_token: str | None = field(default=None, repr=False)


@dataclass(frozen=True, slots=True)
class Connected:
    """The broker's answer to Connect: the version chosen and the limits both sides keep."""

    TYPE: ClassVar[CommandType] = CommandType.CONNECTED
    SENT_BY: ClassVar[Sender] = Sender.BROKER

    request_id: int
    protocol_version: int
    broker_name: str
    max_frame_bytes: int
    max_message_bytes: int


@dataclass(frozen=True, slots=True)
class Ping:
    """Either side checks the other is alive; answered by Pong."""

    TYPE: ClassVar[CommandType] = CommandType.PING
    SENT_BY: ClassVar[Sender] = Sender.EITHER


@dataclass(frozen=True, slots=True)
class Pong:
    TYPE: ClassVar[CommandType] = CommandType.PONG
    SENT_BY: ClassVar[Sender] = Sender.EITHER


@dataclass(frozen=True, slots=True)
class Success:
    """The answer to a request that returns nothing but its completion."""

    TYPE: ClassVar[CommandType] = CommandType.SUCCESS
    SENT_BY: ClassVar[Sender] = Sender.BROKER

    request_id: int


@dataclass(frozen=True, slots=True)
class Error:
    """A request refused, or a frame that broke the protocol. ``request_id`` is None when the
    offending frame carried none (Flow, Nack, ...) or it could not be read."""

    TYPE: ClassVar[CommandType] = CommandType.ERROR
    SENT_BY: ClassVar[Sender] = Sender.EITHER

    request_id: int | None
    code: ErrorCode
    message: str

    @classmethod
    def from_protocol_error(cls, error: ProtocolError) -> Error:
        return cls(error.request_id, error.code, error.message)


# -- producers ----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ProducerOpen:
    """Open producer ``producer_id`` on one segment of ``topic`` (``namespace/name``).

    ``producer_name`` None lets the broker choose one; a producer that reconnects sends the name
    it was given, because deduplication goes by name. ``producer_epoch`` is None the first
    time; afterwards the epoch from ProducerOpened (the exclusive-producer seed's topic_epoch),
    so a producer that was taken over is refused with ProducerFenced. Answered by
    ProducerOpened; in WaitForExclusive mode only once exclusive access is granted.
    """

    TYPE: ClassVar[CommandType] = CommandType.PRODUCER_OPEN
    SENT_BY: ClassVar[Sender] = Sender.CLIENT

    request_id: int
    producer_id: int
    topic: str
    segment_id: int
    producer_name: str | None = None
    access_mode: ProducerAccessMode = ProducerAccessMode.SHARED
    producer_epoch: int | None = None


@dataclass(frozen=True, slots=True)
class ProducerOpened:
    """``producer_epoch`` is the segment's producer epoch the producer was admitted under; an
    exclusive producer sends it back when it reopens. ``last_sequence_id`` is the highest
    sequence id persisted for this producer name (None for a new name): the producer numbers
    its next batch above it."""

    TYPE: ClassVar[CommandType] = CommandType.PRODUCER_OPENED
    SENT_BY: ClassVar[Sender] = Sender.BROKER

    request_id: int
    producer_name: str
    producer_epoch: int
    last_sequence_id: int | None


@dataclass(frozen=True, slots=True)
class ProducerClose:
    """Close a producer (or give up waiting for exclusive access); answered by Success."""

    TYPE: ClassVar[CommandType] = CommandType.PRODUCER_CLOSE
    SENT_BY: ClassVar[Sender] = Sender.CLIENT

    request_id: int
    producer_id: int


@dataclass(frozen=True, slots=True)
class ProducerClosed:
    """The broker dropped a producer (segment terminated, moved, producer fenced, shutdown)
    after answering each of its outstanding Sends; ``code`` says why."""

    TYPE: ClassVar[CommandType] = CommandType.PRODUCER_CLOSED
    SENT_BY: ClassVar[Sender] = Sender.BROKER

    producer_id: int
    code: ErrorCode
    message: str


@dataclass(frozen=True, slots=True)
class Send:
    """One producer batch, written to the segment log as one entry. Message ``i`` has the
    sequence id ``sequence_id + i``; the next batch starts above the last. A retried batch
    keeps its sequence ids, so the broker drops it when it already holds it. Answered by
    SendReceipt or SendError, in the order the producer's batches were sent."""

    TYPE: ClassVar[CommandType] = CommandType.SEND
    SENT_BY: ClassVar[Sender] = Sender.CLIENT

    producer_id: int
    sequence_id: int
    messages: tuple[BatchMessage, ...]

    def __post_init__(self) -> None:
        if not self.messages:
            raise ValueError("a Send carries at least one message")
        if self.last_sequence_id > MAX_UINT:
            # The broker stores the last id and hands it back in ProducerOpened: it must be a
            # uint the wire can carry.
            raise ValueError(
                f"a Send's messages have sequence ids up to 2**64-1: {len(self.messages)} "
                f"from {self.sequence_id} go past it"
            )

    @property
    def last_sequence_id(self) -> int:
        return self.sequence_id + len(self.messages) - 1


@dataclass(frozen=True, slots=True)
class SendReceipt:
    """The batch is durable. ``message_id`` is its first message's id (message ``i`` has batch
    index ``i``). For a duplicate batch the id is the original's, or None when the broker no
    longer remembers it."""

    TYPE: ClassVar[CommandType] = CommandType.SEND_RECEIPT
    SENT_BY: ClassVar[Sender] = Sender.BROKER

    producer_id: int
    sequence_id: int
    message_id: MessageId | None
    duplicate: bool = False

    def __post_init__(self) -> None:
        if self.message_id is None and not self.duplicate:
            raise ValueError("a SendReceipt names the batch's message id unless it is a duplicate")


@dataclass(frozen=True, slots=True)
class SendError:
    """The batch was not written; ``code`` says whether the producer may go on."""

    TYPE: ClassVar[CommandType] = CommandType.SEND_ERROR
    SENT_BY: ClassVar[Sender] = Sender.BROKER

    producer_id: int
    sequence_id: int
    code: ErrorCode
    message: str


# -- consumers ----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Subscribe:
    """Attach consumer ``consumer_id`` to ``subscription`` on one segment, creating the
    subscription at ``initial_position`` if it does not exist. ``priority`` 0 is served first
    (Shared). ``permits`` is the first grant of flow permits (see Flow). Answered by Success."""

    TYPE: ClassVar[CommandType] = CommandType.SUBSCRIBE
    SENT_BY: ClassVar[Sender] = Sender.CLIENT

    request_id: int
    consumer_id: int
    topic: str
    segment_id: int
    subscription: str
    subscription_type: SegmentSubscriptionType
    consumer_name: str
    priority: int = 0
    initial_position: InitialPosition = InitialPosition.LATEST
    permits: int = 0


@dataclass(frozen=True, slots=True)
class Unsubscribe:
    """Delete the consumer's subscription on its segment (its cursor) and close the consumer;
    refused with ConsumerBusy while other consumers use it. Answered by Success."""

    TYPE: ClassVar[CommandType] = CommandType.UNSUBSCRIBE
    SENT_BY: ClassVar[Sender] = Sender.CLIENT

    request_id: int
    consumer_id: int


@dataclass(frozen=True, slots=True)
class ConsumerClose:
    """Detach a consumer, keeping the subscription; answered by Success."""

    TYPE: ClassVar[CommandType] = CommandType.CONSUMER_CLOSE
    SENT_BY: ClassVar[Sender] = Sender.CLIENT

    request_id: int
    consumer_id: int


@dataclass(frozen=True, slots=True)
class ConsumerClosed:
    """The broker detached a consumer (segment moved or deleted, shutdown); ``code`` says why."""

    TYPE: ClassVar[CommandType] = CommandType.CONSUMER_CLOSED
    SENT_BY: ClassVar[Sender] = Sender.BROKER

    consumer_id: int
    code: ErrorCode
    message: str


@dataclass(frozen=True, slots=True)
class Flow:
    """Grant ``permits`` more messages to a consumer. No answer."""

    TYPE: ClassVar[CommandType] = CommandType.FLOW
    SENT_BY: ClassVar[Sender] = Sender.CLIENT

    consumer_id: int
    permits: int


@dataclass(frozen=True, slots=True)
class Message:
    """Messages for one consumer, each spending one of its permits."""

    TYPE: ClassVar[CommandType] = CommandType.MESSAGE
    SENT_BY: ClassVar[Sender] = Sender.BROKER

    consumer_id: int
    messages: tuple[DeliveredMessage, ...]

    def __post_init__(self) -> None:
        if not self.messages:
            raise ValueError("a Message frame carries at least one message")


@dataclass(frozen=True, slots=True)
class Ack:
    """Acknowledge messages. A cumulative ack names exactly one id and acknowledges every
    message of that segment up to it. With a ``request_id`` the broker answers Success once
    the acknowledgement is durable (an ack receipt); without one it answers nothing."""

    TYPE: ClassVar[CommandType] = CommandType.ACK
    SENT_BY: ClassVar[Sender] = Sender.CLIENT

    consumer_id: int
    ack_type: AckType
    message_ids: tuple[MessageId, ...]
    request_id: int | None = None

    def __post_init__(self) -> None:
        if not self.message_ids:
            raise ValueError("an Ack names at least one message id")
        if self.ack_type is AckType.CUMULATIVE and len(self.message_ids) != 1:
            raise ValueError(
                f"a cumulative Ack names exactly one message id, not {len(self.message_ids)}"
            )


@dataclass(frozen=True, slots=True)
class Nack:
    """These messages failed; deliver them again after ``redelivery_delay_ms``. No answer."""

    TYPE: ClassVar[CommandType] = CommandType.NACK
    SENT_BY: ClassVar[Sender] = Sender.CLIENT

    consumer_id: int
    message_ids: tuple[MessageId, ...]
    redelivery_delay_ms: int = 0


@dataclass(frozen=True, slots=True)
class RedeliverUnacknowledged:
    """Deliver again, now, these delivered but unacknowledged messages, or all of the
    consumer's when ``message_ids`` is empty. No answer."""

    TYPE: ClassVar[CommandType] = CommandType.REDELIVER_UNACKNOWLEDGED
    SENT_BY: ClassVar[Sender] = Sender.CLIENT

    consumer_id: int
    message_ids: tuple[MessageId, ...] = ()


@dataclass(frozen=True, slots=True)
class Seek:
    """Move the subscription's cursor on the consumer's segment to a message id or to the
    first message published at or after ``timestamp_ms``; exactly one is set. Answered by
    Success."""

    TYPE: ClassVar[CommandType] = CommandType.SEEK
    SENT_BY: ClassVar[Sender] = Sender.CLIENT

    request_id: int
    consumer_id: int
    message_id: MessageId | None = None
    timestamp_ms: int | None = None

    def __post_init__(self) -> None:
        if (self.message_id is None) == (self.timestamp_ms is None):
            raise ValueError("a Seek sets exactly one of message_id and timestamp_ms")


@dataclass(frozen=True, slots=True)
class EndOfSegment:
    """The consumer's segment is sealed and every message of it is acknowledged on this
    subscription: nothing more will be delivered. ``last_entry_id`` is the segment's last
    entry, None when it holds none. For ordered subscriptions this is the signal to move on to
    the segment's children."""

    TYPE: ClassVar[CommandType] = CommandType.END_OF_SEGMENT
    SENT_BY: ClassVar[Sender] = Sender.BROKER

    consumer_id: int
    last_entry_id: int | None


# -- DAG watch ----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class WatchTopic:
    """Open watch ``watch_id`` on a topic's segment DAG. Answered by a TopicUpdate carrying
    this ``request_id``; later layouts are pushed as further TopicUpdates."""

    TYPE: ClassVar[CommandType] = CommandType.WATCH_TOPIC
    SENT_BY: ClassVar[Sender] = Sender.CLIENT

    request_id: int
    watch_id: int
    topic: str


@dataclass(frozen=True, slots=True)
class TopicUpdate:
    """The whole DAG at layout ``epoch``. ``request_id`` is set on the first update only (the
    answer to WatchTopic). ``controller_endpoint`` is where ordered consumers register."""

    TYPE: ClassVar[CommandType] = CommandType.TOPIC_UPDATE
    SENT_BY: ClassVar[Sender] = Sender.BROKER

    watch_id: int
    request_id: int | None
    epoch: int
    segments: tuple[SegmentNode, ...]
    controller_endpoint: str | None = None


@dataclass(frozen=True, slots=True)
class WatchClose:
    """End a watch; answered by Success."""

    TYPE: ClassVar[CommandType] = CommandType.WATCH_CLOSE
    SENT_BY: ClassVar[Sender] = Sender.CLIENT

    request_id: int
    watch_id: int


@dataclass(frozen=True, slots=True)
class WatchClosed:
    """The broker ended a watch (topic deleted, shutdown); ``code`` says why."""

    TYPE: ClassVar[CommandType] = CommandType.WATCH_CLOSED
    SENT_BY: ClassVar[Sender] = Sender.BROKER

    watch_id: int
    code: ErrorCode
    message: str


# -- namespace watch (protocol version 2) -------------------------------------------------------


@dataclass(frozen=True, slots=True)
class WatchNamespace:
    """Open namespace watch ``watch_id``: the names of the topics of ``namespace`` whose
    properties hold every ``filters`` pair (all topics when empty), kept current by
    NamespaceUpdate pushes. ``current_hash`` is the client's topic_set_hash of the set it holds
    from an earlier watch: when the broker's set hashes the same it sends nothing at all;
    otherwise, and when the hash is nil, it sends a snapshot first. Unanswered: a refusal is a
    NamespaceUpdate carrying WatchEnded, so that a matching hash costs no frame back."""

    TYPE: ClassVar[CommandType] = CommandType.WATCH_NAMESPACE
    SENT_BY: ClassVar[Sender] = Sender.CLIENT

    watch_id: int
    namespace: str
    filters: Mapping[str, str]
    current_hash: int | None = None

    def __post_init__(self) -> None:
        if self.current_hash is not None and self.current_hash > MAX_TOPIC_SET_HASH:
            raise ValueError(
                f"current_hash is a CRC32C, at most {MAX_TOPIC_SET_HASH}, not {self.current_hash}"
            )


@dataclass(frozen=True, slots=True)
class NamespaceUpdate:
    """One event of a namespace watch: exactly one of a snapshot (or a part of one), a diff,
    or the end of the watch."""

    TYPE: ClassVar[CommandType] = CommandType.NAMESPACE_UPDATE
    SENT_BY: ClassVar[Sender] = Sender.BROKER

    watch_id: int
    snapshot: TopicsSnapshot | None = None
    diff: TopicsDiff | None = None
    ended: WatchEnded | None = None

    def __post_init__(self) -> None:
        carried = sum(part is not None for part in (self.snapshot, self.diff, self.ended))
        if carried != 1:
            raise ValueError(
                f"a NamespaceUpdate carries exactly one of snapshot, diff and ended, not {carried}"
            )


@dataclass(frozen=True, slots=True)
class NamespaceWatchClose:
    """End a namespace watch; answered by Success, after which no update of it follows."""

    TYPE: ClassVar[CommandType] = CommandType.NAMESPACE_WATCH_CLOSE
    SENT_BY: ClassVar[Sender] = Sender.CLIENT

    request_id: int
    watch_id: int


# -- consumer registrations (stream and checkpoint subscriptions) -------------------------------


@dataclass(frozen=True, slots=True)
class RegisterConsumer:
    """Register consumer ``consumer_name`` of a Stream or Checkpoint subscription of ``topic``
    with the topic's controller, as registration ``registration_id``. Answered by Success once
    the controller has persisted the registration; ConsumerAssignment pushes follow, the first
    one at once. Any broker relays it to the topic's controller."""

    TYPE: ClassVar[CommandType] = CommandType.REGISTER_CONSUMER
    SENT_BY: ClassVar[Sender] = Sender.CLIENT

    request_id: int
    registration_id: int
    topic: str
    subscription: str
    consumer_name: str


@dataclass(frozen=True, slots=True)
class ConsumerAssignment:
    """The segments a registered consumer reads now, computed by controller ``term`` from
    layout ``layout_epoch``. One older than the last received (by term, then epoch) is stale
    and is ignored."""

    TYPE: ClassVar[CommandType] = CommandType.CONSUMER_ASSIGNMENT
    SENT_BY: ClassVar[Sender] = Sender.BROKER

    registration_id: int
    term: int
    layout_epoch: int
    segments: tuple[AssignedSegment, ...]


@dataclass(frozen=True, slots=True)
class UnregisterConsumer:
    """The consumer leaves its subscription: its registration is removed at once and its
    segments go to the others. Answered by Success. (Closing the connection instead keeps the
    registration for the controller's grace period.)"""

    TYPE: ClassVar[CommandType] = CommandType.UNREGISTER_CONSUMER
    SENT_BY: ClassVar[Sender] = Sender.CLIENT

    request_id: int
    registration_id: int


@dataclass(frozen=True, slots=True)
class RegistrationClosed:
    """A registration ended from the serving side (subscription or topic deleted, the
    registration expired); ``code`` says why."""

    TYPE: ClassVar[CommandType] = CommandType.REGISTRATION_CLOSED
    SENT_BY: ClassVar[Sender] = Sender.BROKER

    registration_id: int
    code: ErrorCode
    message: str


# -- topic-wide exclusive producer grants ---------------------------------------------------------


@dataclass(frozen=True, slots=True)
class AcquireExclusive:
    """Ask the topic's controller for topic-wide exclusive producer access, as grant
    ``grant_id``, for producer ``producer_name`` in ``access_mode`` (Exclusive,
    WaitForExclusive or ExclusiveWithFencing). ``producer_epoch`` is None the first time; a
    holder that asks again (after a reconnection) sends the epoch it was granted. Answered by
    ExclusiveGranted once every Active segment is fenced to the granted epoch; a
    WaitForExclusive request that must wait is answered by Success first, and ExclusiveGranted
    is pushed when its turn comes. Any broker relays it to the topic's controller."""

    TYPE: ClassVar[CommandType] = CommandType.ACQUIRE_EXCLUSIVE
    SENT_BY: ClassVar[Sender] = Sender.CLIENT

    request_id: int
    grant_id: int
    topic: str
    producer_name: str
    access_mode: ProducerAccessMode
    producer_epoch: int | None = None


@dataclass(frozen=True, slots=True)
class ExclusiveGranted:
    """Grant ``grant_id`` holds the topic at ``producer_epoch``: the producer opens on each
    segment with that epoch. ``request_id`` is the AcquireExclusive's when this answers it, None
    when it is pushed after the request waited."""

    TYPE: ClassVar[CommandType] = CommandType.EXCLUSIVE_GRANTED
    SENT_BY: ClassVar[Sender] = Sender.BROKER

    grant_id: int
    request_id: int | None
    producer_epoch: int


@dataclass(frozen=True, slots=True)
class ReleaseExclusive:
    """Give the topic up (or stop waiting for it) at once; answered by Success. (Closing the
    connection instead keeps a granted holder's access for the controller's grace period.)"""

    TYPE: ClassVar[CommandType] = CommandType.RELEASE_EXCLUSIVE
    SENT_BY: ClassVar[Sender] = Sender.CLIENT

    request_id: int
    grant_id: int


@dataclass(frozen=True, slots=True)
class ExclusiveRevoked:
    """A grant ended from the serving side: ProducerFenced when another producer took the topic
    over (the producer is closed for good), TopicNotFound when the topic was deleted."""

    TYPE: ClassVar[CommandType] = CommandType.EXCLUSIVE_REVOKED
    SENT_BY: ClassVar[Sender] = Sender.BROKER

    grant_id: int
    code: ErrorCode
    message: str


Command: TypeAlias = (
    Connect
    | Connected
    | Ping
    | Pong
    | Success
    | Error
    | ProducerOpen
    | ProducerOpened
    | ProducerClose
    | ProducerClosed
    | Send
    | SendReceipt
    | SendError
    | Subscribe
    | Unsubscribe
    | ConsumerClose
    | ConsumerClosed
    | Flow
    | Message
    | Ack
    | Nack
    | RedeliverUnacknowledged
    | Seek
    | EndOfSegment
    | WatchTopic
    | TopicUpdate
    | WatchClose
    | WatchClosed
    | WatchNamespace
    | NamespaceUpdate
    | NamespaceWatchClose
    | RegisterConsumer
    | ConsumerAssignment
    | UnregisterConsumer
    | RegistrationClosed
    | AcquireExclusive
    | ExclusiveGranted
    | ReleaseExclusive
    | ExclusiveRevoked
)

COMMAND_CLASSES: tuple[type[Command], ...] = (
    Connect,
    Connected,
    Ping,
    Pong,
    Success,
    Error,
    ProducerOpen,
    ProducerOpened,
    ProducerClose,
    ProducerClosed,
    Send,
    SendReceipt,
    SendError,
    Subscribe,
    Unsubscribe,
    ConsumerClose,
    ConsumerClosed,
    Flow,
    Message,
    Ack,
    Nack,
    RedeliverUnacknowledged,
    Seek,
    EndOfSegment,
    WatchTopic,
    TopicUpdate,
    WatchClose,
    WatchClosed,
    WatchNamespace,
    NamespaceUpdate,
    NamespaceWatchClose,
    RegisterConsumer,
    ConsumerAssignment,
    UnregisterConsumer,
    RegistrationClosed,
    AcquireExclusive,
    ExclusiveGranted,
    ReleaseExclusive,
    ExclusiveRevoked,
)
