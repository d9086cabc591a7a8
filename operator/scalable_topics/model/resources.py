"""The Kubernetes resources of the API group ``scalabletopics.dev``: ScalableTopic and Segment.

These pydantic models are the one source of truth for the resources' shape: the CRDs in
``crds/`` are generated from them (``make crds``), and every component reads and writes the
resources through them. Field names are camelCase on the wire, snake_case in Python.
"""

from __future__ import annotations

import re
from datetime import datetime
from enum import StrEnum
from typing import Any, ClassVar, Final, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator
from pydantic.alias_generators import to_camel

from .conditions import Condition
from .hashing import HASH_MAX, HASH_MIN

GROUP: Final = "scalabletopics.dev"
VERSION: Final = "v1alpha1"
# GROUP/VERSION, spelled out so that the Literal fields below can name it.
API_VERSION: Final = "scalabletopics.dev/v1alpha1"
TOPIC_LABEL = f"{GROUP}/topic"
FINALIZER = f"{GROUP}/cleanup"
# On the Lease `<topic>-controller`: where the topic's elected controller takes registrations.
CONTROLLER_ENDPOINT_ANNOTATION = f"{GROUP}/controller-endpoint"
MAX_INITIAL_SEGMENTS = (
    1024  # a manifest's bound: each segment is an object and a log; splits go further
)

NAME_PATTERN = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
_SUBSCRIPTION_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]*$"


SUBSCRIPTION_NAME_MAX = 128
# Pulsar's maxSubscriptionsPerTopic: the subscriptions a topic may declare (spec.subscriptions,
# the CRD's maxItems), and the most a segment lets consumers reach by creating their own. With
# a 128-character name each costs the ScalableTopic at most 354 bytes of JSON (its spec and
# status entries, without consumers) and a Segment 292 (spec.subscriptions and a drained
# marker): 354 KB and, at MAX_SEGMENT_SUBSCRIPTIONS, 584 KB, within the 1.5 MiB an object may
# have in etcd. Fixed, not a flag: the CRD's bound cannot follow a flag, and every surface
# must refuse what kubectl apply would.
MAX_SUBSCRIPTIONS_PER_TOPIC: Final = 1000
# What a segment can be created with: the declared subscriptions and those consumers created,
# each up to MAX_SUBSCRIPTIONS_PER_TOPIC. A merge whose parents hold more between them is
# refused rather than made.
MAX_SEGMENT_SUBSCRIPTIONS: Final = 2 * MAX_SUBSCRIPTIONS_PER_TOPIC
# A producer's name, and so an exclusive holder's: above the names a broker chooses (its
# identity, by default HOST:PORT with a host name of at most 253 characters, and a counter),
# well below what would cost each log record (it holds the name) more than its messages.
PRODUCER_NAME_MAX: Final = 1024
# A topic's name is the value of its Segments' TOPIC_LABEL, and a label value has at most 63
# characters: a longer name would make a topic whose Segments cannot be created.
TOPIC_NAME_MAX = 63
NAMESPACE_MAX = 63  # a Kubernetes namespace is a DNS label


DNS_LABEL_RULE = "lower-case letters, digits and '-', starting and ending with a letter or digit"


def _label_problem(what: str, value: str, limit: int) -> str | None:
    if not value:
        return f"{what} must not be empty"
    too_long = len(value) > limit
    if too_long or not re.fullmatch(NAME_PATTERN, value):
        length = f" (it has {len(value)} characters)" if too_long else ""
        return f"{what} {value!r} is not a DNS label: at most {limit} {DNS_LABEL_RULE}{length}"
    return None


def topic_name_problem(name: str) -> str | None:
    """Why ``name`` cannot name a topic, or None: a DNS label of at most TOPIC_NAME_MAX
    characters (it is the value of its Segments' TOPIC_LABEL, and part of their names)."""
    return _label_problem("topic name", name, TOPIC_NAME_MAX)


def namespace_problem(namespace: str) -> str | None:
    """Why ``namespace`` cannot be a topic's namespace (a Kubernetes namespace), or None."""
    return _label_problem("namespace", namespace, NAMESPACE_MAX)


def subscription_name_problem(name: str) -> str | None:
    """Why ``name`` cannot name a subscription (the rule the CRD enforces too), or None."""
    if not name:
        return "a subscription name must not be empty"
    if len(name) > SUBSCRIPTION_NAME_MAX:
        return (
            f"a subscription name has at most {SUBSCRIPTION_NAME_MAX} characters, not {len(name)}"
        )
    if not re.fullmatch(_SUBSCRIPTION_PATTERN, name):
        return (
            f"subscription name {name!r} must start with a letter or digit and hold only "
            "letters, digits, '.', '_' and '-'"
        )
    return None


def subscription_count_problem(count: int) -> str | None:
    """Why a topic cannot declare ``count`` subscriptions, or None."""
    if count > MAX_SUBSCRIPTIONS_PER_TOPIC:
        return (
            f"a topic has at most {MAX_SUBSCRIPTIONS_PER_TOPIC} subscriptions "
            f"(maxSubscriptionsPerTopic), not {count}"
        )
    return None


def producer_name_problem(name: str) -> str | None:
    """Why ``name`` cannot name a producer (or the holder of a topic's exclusive grant)."""
    if not name:
        return "a producer name must not be empty"
    if len(name) > PRODUCER_NAME_MAX:
        return f"a producer name has at most {PRODUCER_NAME_MAX} characters, not {len(name)}"
    return None


def _validations(*rules: tuple[str, str]) -> dict[str, Any]:
    """CEL rules for the CRD schema: (rule, message) pairs."""
    return {"x-kubernetes-validations": [{"rule": r, "message": m} for r, m in rules]}


class Wire(BaseModel):
    """camelCase on the wire, refusal of unknown fields so a typo in a manifest is an error."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="forbid")

    def to_wire(self) -> dict[str, Any]:
        return self.model_dump(mode="json", by_alias=True, exclude_none=True)


# -- shared pieces ------------------------------------------------------------------------------


class HashRangeSpec(Wire):
    model_config = ConfigDict(
        json_schema_extra=_validations(("self.start <= self.end", "start must not exceed end"))
    )

    start: int = Field(ge=HASH_MIN, le=HASH_MAX)
    end: int = Field(ge=HASH_MIN, le=HASH_MAX)


class OwnerReference(Wire):
    api_version: str
    kind: str
    name: str
    uid: str
    controller: bool | None = None
    block_owner_deletion: bool | None = None


class ObjectMeta(Wire):
    """The part of Kubernetes' ObjectMeta this project reads; other fields pass through."""

    model_config = ConfigDict(extra="allow")

    name: str
    namespace: str | None = None
    uid: str | None = None
    resource_version: str | None = None
    generation: int | None = None
    creation_timestamp: datetime | None = None
    deletion_timestamp: datetime | None = None
    labels: dict[str, str] = Field(default_factory=dict)
    annotations: dict[str, str] = Field(default_factory=dict)
    finalizers: list[str] = Field(default_factory=list)
    owner_references: list[OwnerReference] = Field(default_factory=list)


# -- ScalableTopic ------------------------------------------------------------------------------


class SubscriptionType(StrEnum):
    QUEUE = "Queue"  # unordered, individual acks, every segment at once
    STREAM = "Stream"  # ordered, cumulative acks, segments assigned by the controller
    CHECKPOINT = "Checkpoint"  # ordered, positions kept by the application


class SubscriptionSpec(Wire):
    name: str = Field(min_length=1, max_length=SUBSCRIPTION_NAME_MAX, pattern=_SUBSCRIPTION_PATTERN)
    type: SubscriptionType = SubscriptionType.QUEUE


class RateThresholds(Wire):
    msg_rate_in: float | None = Field(default=None, ge=0, description="messages per second in")
    msg_rate_out: float | None = Field(default=None, ge=0, description="messages per second out")
    byte_rate_in: float | None = Field(default=None, ge=0, description="bytes per second in")
    byte_rate_out: float | None = Field(default=None, ge=0, description="bytes per second out")


# The rates a policy has thresholds for, as (Python, wire) names.
_RATES: Final = (
    ("msg_rate_in", "msgRateIn"),
    ("msg_rate_out", "msgRateOut"),
    ("byte_rate_in", "byteRateIn"),
    ("byte_rate_out", "byteRateOut"),
)


def _autoscale_rules() -> dict[str, Any]:
    """The policy's cross-field rules as CEL, for the CRD; ``AutoScaleSpec`` checks the same
    ones with the same messages. A split threshold of 0 would make every rate infinitely
    over it; one at or below its merge threshold would split and merge the same load."""
    rules = [
        {
            "rule": "!has(self.minSegments) || !has(self.maxSegments) "
            "|| self.minSegments <= self.maxSegments",
            "message": "minSegments must not exceed maxSegments",
            "fieldPath": ".minSegments",
        }
    ]
    for _, rate in _RATES:
        split, merge = f"self.splitThresholds.{rate}", f"self.mergeThresholds.{rate}"
        rules.append(
            {
                "rule": f"!has(self.splitThresholds) || !has({split}) || double({split}) > 0.0",
                "message": f"splitThresholds.{rate} must be greater than 0",
                "fieldPath": f".splitThresholds.{rate}",
            }
        )
        rules.append(
            {
                "rule": f"!has(self.splitThresholds) || !has(self.mergeThresholds) "
                f"|| !has({split}) || !has({merge}) || double({split}) > double({merge})",
                "message": f"splitThresholds.{rate} must be greater than mergeThresholds.{rate}",
                "fieldPath": f".splitThresholds.{rate}",
            }
        )
    return {"x-kubernetes-validations": rules}


# Refused, naming the field: minSegments above maxSegments, a split threshold that is not
# above 0, a split threshold not strictly above its merge threshold (a merge threshold of 0
# means never merge on that rate), negative counts, depths and durations. The CRD carries the
# same rules (OpenAPI minimums and the CEL above), so `kubectl apply` refuses them too.
class AutoScaleSpec(Wire):
    """Per-topic overrides of the cluster's autoscale policy; unset fields keep the default."""

    model_config = ConfigDict(json_schema_extra=_autoscale_rules())

    enabled: bool | None = None
    min_segments: int | None = Field(default=None, ge=1)
    max_segments: int | None = Field(default=None, ge=1)
    max_dag_depth: int | None = Field(default=None, ge=0)
    split_cooldown_seconds: int | None = Field(default=None, ge=0)
    merge_cooldown_seconds: int | None = Field(default=None, ge=0)
    merge_window_seconds: int | None = Field(default=None, ge=0)
    split_thresholds: RateThresholds | None = None
    merge_thresholds: RateThresholds | None = None

    @model_validator(mode="after")
    def _consistent(self) -> AutoScaleSpec:
        problems = []
        low, high = self.min_segments, self.max_segments
        if low is not None and high is not None and low > high:
            problems.append(f"minSegments must not exceed maxSegments ({low} > {high})")
        split = self.split_thresholds or RateThresholds()
        merge = self.merge_thresholds or RateThresholds()
        for field, rate in _RATES:
            up, down = getattr(split, field), getattr(merge, field)
            if up is not None and not up > 0:
                problems.append(f"splitThresholds.{rate} must be greater than 0, not {up:g}")
            if up is not None and down is not None and not up > down:
                problems.append(
                    f"splitThresholds.{rate} must be greater than mergeThresholds.{rate} "
                    f"({up:g} <= {down:g})"
                )
        if problems:
            raise ValueError("; ".join(problems))
        return self


class RetentionSpec(Wire):
    """How long consumed data is kept; unconsumed data is never dropped."""

    max_size_bytes: int | None = Field(default=None, ge=0)
    max_age_seconds: int | None = Field(default=None, ge=0)


class ScalableTopicSpec(Wire):
    model_config = ConfigDict(
        json_schema_extra=_validations(
            ("self.initialSegments == oldSelf.initialSegments", "initialSegments is immutable"),
        )
    )

    initial_segments: int = Field(default=1, ge=1, le=MAX_INITIAL_SEGMENTS)
    properties: dict[str, str] = Field(default_factory=dict)
    subscriptions: list[SubscriptionSpec] = Field(
        default_factory=list,
        max_length=MAX_SUBSCRIPTIONS_PER_TOPIC,
        json_schema_extra={"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"]},
    )
    auto_scale: AutoScaleSpec | None = None
    retention: RetentionSpec | None = None


class SegmentEntry(Wire):
    """One node of the DAG as kept in ``status.segments`` (see SegmentLayout.to_status)."""

    id: int = Field(ge=0)
    hash_range: HashRangeSpec
    state: Literal["Active", "Sealed"]
    parent_ids: list[int] = Field(default_factory=list)
    child_ids: list[int] = Field(default_factory=list)
    created_at_epoch: int = Field(ge=0)
    sealed_at_epoch: int = Field(default=0, ge=0)
    created_at: datetime
    sealed_at: datetime | None = None


class PlannedChildEntry(Wire):
    id: int = Field(ge=0)
    hash_range: HashRangeSpec


class OperationStep(StrEnum):
    """Where a split or merge stands; each step is idempotent, so a new leader redoes the last."""

    PLANNED = "Planned"
    CHILDREN_CREATED = "ChildrenCreated"


class PendingOperation(Wire):
    kind: Literal["Split", "Merge"]
    base_epoch: int = Field(ge=0)
    parent_ids: list[int] = Field(min_length=1, max_length=2)
    children: list[PlannedChildEntry] = Field(min_length=1, max_length=2)
    subscriptions: list[str] | None = Field(
        default=None,
        description="the parents' subscriptions, read once when the operation began; every "
        "child is created with exactly these (unset until they are read)",
    )
    step: OperationStep = OperationStep.PLANNED
    requested_by: str | None = None
    started_at: datetime | None = None


class OperationResult(StrEnum):
    SUCCEEDED = "Succeeded"
    ROLLED_BACK = "RolledBack"
    REJECTED = "Rejected"


class LastOperation(Wire):
    """How the latest split or merge request ended: what ``stctl`` and kubectl users read back."""

    kind: Literal["Split", "Merge"]
    parent_ids: list[int] = Field(default_factory=list, max_length=2)
    child_ids: list[int] = Field(default_factory=list, max_length=2)
    result: OperationResult
    message: str = ""
    requested_by: str | None = None
    epoch: int | None = Field(default=None, ge=0, description="the layout epoch it produced")
    finished_at: datetime


class AutoScaleDecisionKind(StrEnum):
    SPLIT = "Split"
    MERGE = "Merge"
    NO_ACTION = "NoAction"


class AutoScaleRecommendation(Wire):
    """What the load job (Spark) recommends for the topic, computed for one layout epoch.
    The controller acts on it only while it is fresh (before ``expiresAt``) and the layout is
    still at ``layoutEpoch``, and only after checking every gate against the live layout."""

    decision: AutoScaleDecisionKind
    segment_ids: list[int] = Field(
        default_factory=list, max_length=2, description="one to split, or the pair to merge"
    )
    rule: str | None = Field(default=None, description="the rule that fired, e.g. msgRateIn")
    window: str | None = Field(default=None, description="the rate window it read, e.g. 2m")
    reason: str = ""
    layout_epoch: int = Field(ge=0)
    computed_at: datetime
    expires_at: datetime
    source: str = Field(default="spark", description="what computed it")


class AutoScaleAction(Wire):
    """The latest automatic split or merge the controller asked for, and why."""

    decision: AutoScaleDecisionKind
    segment_ids: list[int] = Field(default_factory=list, max_length=2)
    rule: str
    window: str | None = None
    reason: str = ""
    source: Literal["recommendation", "controller"]
    at: datetime


class AutoScaleStatus(Wire):
    """Autoscale state that must survive a leader failover. The cooldown times are written in
    the same compare-and-swap as the layout a split or merge commits (manual ones included),
    never before: a change that fails does not start a cooldown."""

    last_split_time: datetime | None = None
    last_merge_time: datetime | None = None
    recommendation: AutoScaleRecommendation | None = None
    last_action: AutoScaleAction | None = None


class ControllerStatus(Wire):
    identity: str
    endpoint: str | None = None
    term: int = Field(default=0, ge=0)


class ProducerAccessMode(StrEnum):
    SHARED = "Shared"
    EXCLUSIVE = "Exclusive"
    WAIT_FOR_EXCLUSIVE = "WaitForExclusive"
    EXCLUSIVE_WITH_FENCING = "ExclusiveWithFencing"


class ProducerStatus(Wire):
    """The topic-wide exclusive producer: fencing epoch, holder, and the term that wrote it."""

    # A Kubernetes int64: a grant that would need a larger epoch is refused, never stored.
    epoch: int = Field(default=0, ge=0, le=2**63 - 1)
    holder: str | None = None
    access_mode: ProducerAccessMode | None = None
    term: int = Field(default=0, ge=0)
    claiming: bool = Field(
        default=False,
        description="an Exclusive or WaitForExclusive grant not yet confirmed by every "
        "segment (no other producer connected); a new leader undoes it",
    )


class ConsumerRegistration(Wire):
    """A consumer's durable session: its name and the segments it was assigned."""

    name: str
    assigned_segments: list[int] = Field(default_factory=list)
    layout_epoch: int = Field(default=0, ge=0)
    term: int = Field(default=0, ge=0)
    registered_at: datetime | None = None


class SubscriptionState(StrEnum):
    """Where a declared subscription stands on the topic's segments."""

    CREATING = "Creating"  # being created on every segment
    READY = "Ready"  # on every segment
    DELETING = "Deleting"  # left spec.subscriptions: being deleted from every segment


class SubscriptionStatus(Wire):
    name: str
    type: SubscriptionType = SubscriptionType.QUEUE
    state: SubscriptionState | None = Field(
        default=None,
        description="declared subscriptions only (unset for ones consumers created): "
        "Creating, Ready, or Deleting after leaving spec.subscriptions",
    )
    consumers: list[ConsumerRegistration] = Field(default_factory=list)


class TopicPhase(StrEnum):
    PENDING = "Pending"
    READY = "Ready"
    SCALING = "Scaling"
    DELETING = "Deleting"
    FAILED = "Failed"


class ScalableTopicStatus(Wire):
    epoch: int | None = Field(default=None, ge=0)
    next_segment_id: int | None = Field(default=None, ge=0)
    segments: list[SegmentEntry] = Field(default_factory=list)
    active_segments: int | None = Field(default=None, ge=0, description="count, for kubectl get")
    pending_operation: PendingOperation | None = None
    last_operation: LastOperation | None = None
    controller: ControllerStatus | None = None
    producer: ProducerStatus | None = None
    auto_scale: AutoScaleStatus | None = None
    subscriptions: list[SubscriptionStatus] = Field(default_factory=list)
    conditions: list[Condition] = Field(default_factory=list)
    observed_generation: int | None = None
    phase: TopicPhase | None = None


class ScalableTopic(Wire):
    KIND: ClassVar[str] = "ScalableTopic"
    PLURAL: ClassVar[str] = "scalabletopics"
    SINGULAR: ClassVar[str] = "scalabletopic"
    SHORT_NAMES: ClassVar[tuple[str, ...]] = ("st",)

    model_config = ConfigDict(
        extra="ignore"
    )  # tolerate what the API server adds (e.g. managedFields)

    api_version: Literal["scalabletopics.dev/v1alpha1"] = API_VERSION
    kind: Literal["ScalableTopic"] = "ScalableTopic"
    metadata: ObjectMeta
    spec: ScalableTopicSpec = Field(default_factory=ScalableTopicSpec)
    status: ScalableTopicStatus = Field(default_factory=ScalableTopicStatus)


# -- Segment --------------------------------------------------------------------------------------


class SegmentSpec(Wire):
    model_config = ConfigDict(
        json_schema_extra=_validations(("self == oldSelf", "a Segment's spec is immutable"))
    )

    topic: str = Field(min_length=1, max_length=253, pattern=NAME_PATTERN)
    segment_id: int = Field(ge=0)
    hash_range: HashRangeSpec
    parents: list[int] = Field(default_factory=list, max_length=2)
    subscriptions: list[str] = Field(default_factory=list, description="created at Earliest")


class SegmentPhase(StrEnum):
    PENDING = "Pending"
    ACTIVE = "Active"
    TERMINATED = "Terminated"
    DELETING = "Deleting"


class SegmentLoad(Wire):
    """A segment's load record, written by its broker only on a material change: the four
    rates (per second, over the report interval that ended at ``sampledAt``), and since when
    every rate has been at or below the topic's merge thresholds (None: not cold). ``coldSince``
    is carried over from record to record while the segment stays cold, also across a move to
    another broker, so that only a change of load restarts the merge window."""

    msg_rate_in: float = Field(default=0.0, ge=0)
    msg_rate_out: float = Field(default=0.0, ge=0)
    byte_rate_in: float = Field(default=0.0, ge=0)
    byte_rate_out: float = Field(default=0.0, ge=0)
    sampled_at: datetime | None = None
    cold_since: datetime | None = None


class SegmentStatus(Wire):
    state: SegmentPhase | None = None
    broker: str | None = None
    range: str | None = Field(
        default=None, description="the hash range as ssss-eeee, for kubectl get"
    )
    last_entry_id: int | None = None
    drained: dict[str, datetime] = Field(
        default_factory=dict,
        description="subscription -> when every message of this segment was acknowledged",
    )
    load: SegmentLoad | None = None
    conditions: list[Condition] = Field(default_factory=list)
    observed_generation: int | None = None


class Segment(Wire):
    KIND: ClassVar[str] = "Segment"
    PLURAL: ClassVar[str] = "segments"
    SINGULAR: ClassVar[str] = "segment"
    SHORT_NAMES: ClassVar[tuple[str, ...]] = ("seg",)

    model_config = ConfigDict(extra="ignore")

    api_version: Literal["scalabletopics.dev/v1alpha1"] = API_VERSION
    kind: Literal["Segment"] = "Segment"
    metadata: ObjectMeta
    spec: SegmentSpec
    status: SegmentStatus = Field(default_factory=SegmentStatus)


def segment_object_name(topic: str, segment_descriptor: str) -> str:
    """The Segment resource's name: ``<topic>-<descriptor>``."""
    return f"{topic}-{segment_descriptor}"
