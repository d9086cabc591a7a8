"""The values commands carry: message ids, messages in a batch and as delivered, DAG nodes,
assigned segments, and the parts of a namespace watch's updates.

They are NamedTuples on purpose: msgpack writes a tuple as an array natively, so encoding a
batch of messages runs no Python code per message. Their fields are their wire form, in order.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final, NamedTuple, NoReturn

from ..model.hash_range import HashRange
from ..model.position import Position
from ..model.segment import SegmentState
from .errors import ErrorCode


class _NoProperties(dict[str, str]):
    """An empty dict that refuses to be filled: every message without properties shares it.
    A dict rather than a mapping proxy because msgpack writes dicts without calling back."""

    def _refuse(self, *args: object, **kwargs: object) -> NoReturn:
        raise TypeError("NO_PROPERTIES is shared by every message without properties")

    __setitem__ = __delitem__ = __ior__ = _refuse
    clear = pop = popitem = setdefault = update = _refuse


NO_PROPERTIES: Final[Mapping[str, str]] = _NoProperties()


class MessageId(NamedTuple):
    """A message's place in a scalable topic: its segment, the segment log entry (one producer
    batch) and its index in that batch. Ordered within a segment; across segments only the
    DAG orders messages."""

    segment_id: int
    entry_id: int
    batch_index: int = 0

    @classmethod
    def of(cls, segment_id: int, position: Position) -> MessageId:
        return cls(segment_id, position.entry_id, position.batch_index)

    @property
    def position(self) -> Position:
        return Position(self.entry_id, self.batch_index)

    def __str__(self) -> str:
        return f"{self.segment_id}:{self.entry_id}:{self.batch_index}"


class BatchMessage(NamedTuple):
    """One message of a producer batch. ``event_time_ms`` is the application's own time of the
    event (Unix milliseconds), if it has one."""

    payload: bytes
    key: str | None = None
    properties: Mapping[str, str] = NO_PROPERTIES
    event_time_ms: int | None = None

    @property
    def size_bytes(self) -> int:
        """What counts against the message size limit: payload, key and properties, in bytes."""
        size = len(self.payload)
        if self.key is not None:
            size += len(self.key.encode())
        for name, value in self.properties.items():
            size += len(name.encode()) + len(value.encode())
        return size


class DeliveredMessage(NamedTuple):
    """A message as the broker hands it to a consumer. ``publish_time_ms`` is when the broker
    appended its batch (Unix milliseconds); ``redelivery_count`` how often it was delivered
    before (after nacks, redelivery requests and consumer departures)."""

    message_id: MessageId
    payload: bytes
    key: str | None
    properties: Mapping[str, str]
    event_time_ms: int | None
    publish_time_ms: int
    redelivery_count: int = 0


class SegmentNode(NamedTuple):
    """One segment of the DAG as a watch reports it. ``broker_url`` is where the segment is
    served (sealed segments too, while consumers drain them); None while it is not placed."""

    segment_id: int
    hash_range: HashRange
    state: SegmentState
    parent_ids: tuple[int, ...] = ()
    child_ids: tuple[int, ...] = ()
    broker_url: str | None = None


class AssignedSegment(NamedTuple):
    """One segment a stream or checkpoint consumer is assigned: where to subscribe to it.
    ``broker_url`` is None while the segment is not placed yet (a later assignment names it)."""

    segment_id: int
    hash_range: HashRange
    broker_url: str | None = None


class TopicsSnapshot(NamedTuple):
    """The whole matching set of a namespace watch, or a part of it: a snapshot too large for
    one frame comes in several updates, the last one ``complete``. Names are unqualified (the
    watch names the namespace) and sorted; a client acts on a snapshot only once complete."""

    topics: tuple[str, ...]
    complete: bool = True


class TopicsDiff(NamedTuple):
    """A change of a namespace watch's set: apply ``removed`` first, then ``added``. A name in
    both was deleted and created again (a new topic of the same name)."""

    added: tuple[str, ...] = ()
    removed: tuple[str, ...] = ()


class WatchEnded(NamedTuple):
    """Why the broker refused or ended a namespace watch: the watch is no longer open."""

    code: ErrorCode
    message: str
