"""The protocol's own enumerations; each travels on the wire as its string value.

Producer access modes and segment states are the model's enums (``ProducerAccessMode``,
``SegmentState``), reused as they are so that the wire and the resources spell them alike.
"""

from __future__ import annotations

from enum import StrEnum


class SegmentSubscriptionType(StrEnum):
    """How one segment's subscription dispatches to its consumers (Pulsar's four types).

    The topic-level types (Queue, Stream, Checkpoint in the model) are built from these by the
    client: a queue consumer subscribes Shared to every segment, a stream consumer Exclusive or
    Failover to the segments it is assigned.
    """

    EXCLUSIVE = "Exclusive"
    FAILOVER = "Failover"
    SHARED = "Shared"
    KEY_SHARED = "Key_Shared"


class InitialPosition(StrEnum):
    """Where a subscription that does not exist yet starts reading."""

    EARLIEST = "Earliest"
    LATEST = "Latest"


class AckType(StrEnum):
    INDIVIDUAL = "Individual"
    CUMULATIVE = "Cumulative"
