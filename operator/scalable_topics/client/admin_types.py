"""The JSON the topic admin API answers with, as typed dicts (docs/admin-api.md)."""

from __future__ import annotations

from typing import Any, NotRequired, TypedDict


class TopicSummary(TypedDict):
    namespace: str
    name: str
    phase: str | None
    epoch: int | None
    activeSegments: int
    sealedSegments: int
    subscriptions: list[str]
    controller: str | None
    deleting: bool


class SegmentDescription(TypedDict):
    id: int
    descriptor: str
    range: str  # 0000-7fff
    state: str  # Active or Sealed, from the layout
    objectState: str | None  # the Segment object's: Pending, Active, Terminated, Deleting
    parents: list[int]
    children: list[int]
    broker: str | None
    createdAtEpoch: int
    sealedAtEpoch: int | None


class ConsumerEntry(TypedDict):
    name: str
    assignedSegments: list[int]


class SubscriptionDescription(TypedDict):
    name: str
    type: str | None
    declared: bool
    state: str | None  # Creating, Ready or Deleting for declared subscriptions
    consumers: list[ConsumerEntry]  # registered with the controller (stream, checkpoint)
    # Where the segments' brokers have it (their ids) and the consumers attached there,
    # counted per segment (a queue consumer attaches to every segment); None where the
    # brokers were not asked. A runtime subscription (``declared``
    # false) made by a queue consumer is known only there.
    segments: list[int] | None
    attachedConsumers: int | None


class DeclaredSubscription(TypedDict):
    name: str
    type: str


class Operation(TypedDict):
    """How a split or merge ended (the topic's ``status.lastOperation``)."""

    kind: str  # Split or Merge
    parentIds: list[int]
    childIds: list[int]
    result: str  # Succeeded, RolledBack or Rejected
    message: str
    finishedAt: str
    requestedBy: NotRequired[str]
    epoch: NotRequired[int]


class TopicDescription(TypedDict):
    namespace: str
    name: str
    deleting: bool
    spec: dict[str, Any]
    phase: str | None
    epoch: int | None  # None until a controller has created the topic
    nextSegmentId: int | None
    segments: list[SegmentDescription]
    controller: dict[str, Any] | None
    pendingOperation: dict[str, Any] | None
    lastOperation: Operation | None
    producer: dict[str, Any] | None
    subscriptions: list[SubscriptionDescription]
    conditions: list[dict[str, Any]]
