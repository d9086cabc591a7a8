"""Manual split and merge requests, made declaratively with an annotation on the ScalableTopic.

kubectl users write ``kubectl annotate st orders scalabletopics.dev/split-segment=3`` or
``scalabletopics.dev/merge-segments=3,4``; ``stctl topics split/merge`` writes the same
annotations. The topic's leader takes a request, removes the annotation and records the outcome
in ``status.lastOperation`` (and a condition and an Event). The annotation is removed once the
request is answered; a request that the last operation already answered (by the requester's
token, or else by what it asks) is not taken again, so a leader that died between finishing an
operation and removing its annotation neither repeats it nor reports a false error.

A topic has one slot for operations: a request nobody answered yet, or a running operation
(``status.pendingOperation``), occupies it (:func:`occupying`). stctl and the admin API write a
request only into a free slot, with a compare-and-swap on the version they read, so two
concurrent requests never overwrite each other: the second is refused, naming the first.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from .layout import ChangeKind, LayoutChange, SegmentLayout
from .resources import GROUP, LastOperation, PendingOperation

SPLIT_ANNOTATION = f"{GROUP}/split-segment"
MERGE_ANNOTATION = f"{GROUP}/merge-segments"
REQUESTER_ANNOTATION = f"{GROUP}/requested-by"
REQUEST_ANNOTATIONS = (SPLIT_ANNOTATION, MERGE_ANNOTATION, REQUESTER_ANNOTATION)


class InvalidScaleRequest(ValueError):
    """An annotation whose value is not a request: the message says what was expected."""

    def __init__(self, kind: ChangeKind, annotation: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind
        self.annotation = annotation


@dataclass(frozen=True, slots=True)
class ScaleRequest:
    kind: ChangeKind
    segment_ids: tuple[int, ...]
    annotation: str
    requested_by: str | None = None

    def plan(self, layout: SegmentLayout) -> LayoutChange:
        """The change against ``layout``; raises a LayoutError naming why it is impossible."""
        if self.kind is ChangeKind.SPLIT:
            return layout.plan_split(self.segment_ids[0])
        return layout.plan_merge(*self.segment_ids)

    def answered_by(self, kind: str, parent_ids: list[int], requested_by: str | None) -> bool:
        """Whether a finished operation (carried out, rolled back or refused) answered this
        very request: the requester's token when it left one, else what was asked."""
        if self.requested_by is not None:
            return requested_by == self.requested_by
        return kind == self.kind.value and sorted(parent_ids) == sorted(self.segment_ids)

    def answered(self, last: LastOperation | None) -> bool:
        return last is not None and self.answered_by(last.kind, last.parent_ids, last.requested_by)

    def describe(self) -> str:
        return describe_operation(self.kind.value, self.segment_ids)


def describe_operation(kind: str, segment_ids: Sequence[int]) -> str:
    """What an operation does, in words: "split of segment 3", "merge of segments 3 and 4"."""
    ids = " and ".join(str(i) for i in segment_ids)
    return (
        f"split of segment {ids}" if kind == ChangeKind.SPLIT.value else f"merge of segments {ids}"
    )


def request_annotations(
    kind: ChangeKind, segment_ids: Sequence[int], requested_by: str
) -> dict[str, str | None]:
    """The merge patch of the annotations that ask for a request: it also removes an answered
    request of the other kind, which the leader would otherwise take first (splits first) and
    answer to this requester."""
    annotation = SPLIT_ANNOTATION if kind is ChangeKind.SPLIT else MERGE_ANNOTATION
    patch: dict[str, str | None] = {key: None for key in REQUEST_ANNOTATIONS}
    patch[annotation] = ",".join(str(i) for i in segment_ids)
    patch[REQUESTER_ANNOTATION] = requested_by
    return patch


@dataclass(frozen=True, slots=True)
class Occupant:
    """What holds a topic's operation slot: a running operation or an unanswered request."""

    kind: str  # Split or Merge
    segment_ids: tuple[int, ...]
    requested_by: str | None
    what: str  # "split of segment 3", or the malformed annotation
    step: str | None = None  # the running operation's; None for a request

    @property
    def state(self) -> str:
        return "Requested" if self.step is None else "Running"

    def describe(self) -> str:
        by = f" (requested by {self.requested_by})" if self.requested_by else ""
        if self.step is None:
            return f"{self.what}{by} is waiting for the topic's controller"
        return f"{self.what}{by} is running (step {self.step})"

    def to_dict(self) -> dict[str, object]:
        answer: dict[str, object] = {
            "kind": self.kind,
            "segmentIds": list(self.segment_ids),
            "requestedBy": self.requested_by,
            "state": self.state,
        }
        if self.step is not None:
            answer["step"] = self.step
        return answer


def occupying(
    annotations: Mapping[str, str],
    pending: PendingOperation | None,
    last: LastOperation | None,
) -> Occupant | None:
    """What stands in the way of a new request, if anything: the running operation, else a
    request the last operation has not answered (a malformed one too: its refusal is due)."""
    if pending is not None:
        ids = tuple(pending.parent_ids)
        what = describe_operation(pending.kind, ids)
        return Occupant(pending.kind, ids, pending.requested_by, what, pending.step.value)
    requester = annotations.get(REQUESTER_ANNOTATION)
    try:
        request = read_scale_request(annotations)
    except InvalidScaleRequest as error:
        what = f"the request {error.annotation}={annotations[error.annotation]!r}"
        return Occupant(error.kind.value, (), requester, what)
    if request is None or request.answered(last):
        return None
    return Occupant(request.kind.value, request.segment_ids, requester, request.describe())


def read_scale_request(annotations: Mapping[str, str]) -> ScaleRequest | None:
    """The pending request in the annotations, splits first; raises InvalidScaleRequest for a
    malformed value (the annotation is named so the leader can remove exactly that one)."""
    requester = annotations.get(REQUESTER_ANNOTATION)
    if SPLIT_ANNOTATION in annotations:
        ids = _segment_ids(ChangeKind.SPLIT, SPLIT_ANNOTATION, annotations[SPLIT_ANNOTATION])
        return ScaleRequest(ChangeKind.SPLIT, ids, SPLIT_ANNOTATION, requester)
    if MERGE_ANNOTATION in annotations:
        ids = _segment_ids(ChangeKind.MERGE, MERGE_ANNOTATION, annotations[MERGE_ANNOTATION])
        return ScaleRequest(ChangeKind.MERGE, ids, MERGE_ANNOTATION, requester)
    return None


def _segment_ids(kind: ChangeKind, annotation: str, value: str) -> tuple[int, ...]:
    count = 1 if kind is ChangeKind.SPLIT else 2
    parts = [part.strip() for part in value.split(",")]
    expected = "one segment id, e.g. 3" if count == 1 else "two segment ids, e.g. 3,4"
    if len(parts) != count or not all(part.isascii() and part.isdigit() for part in parts):
        raise InvalidScaleRequest(
            kind, annotation, f"annotation {annotation}={value!r}: expected {expected}"
        )
    return tuple(int(part) for part in parts)
