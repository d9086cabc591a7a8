"""Manual split and merge requests, made declaratively with an annotation on the ScalableTopic.

kubectl users write ``kubectl annotate st orders scalabletopics.dev/split-segment=3`` or
``scalabletopics.dev/merge-segments=3,4``; ``stctl topics split/merge`` writes the same
annotations. The topic's leader takes a request, removes the annotation and records the outcome
in ``status.lastOperation`` (and a condition and an Event). The annotation is removed once the
request is answered; a request that the last operation already answered (by the requester's
token, or else by what it asks) is not taken again, so a leader that died between finishing an
operation and removing its annotation neither repeats it nor reports a false error.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from .layout import ChangeKind, LayoutChange, SegmentLayout
from .resources import GROUP

SPLIT_ANNOTATION = f"{GROUP}/split-segment"
MERGE_ANNOTATION = f"{GROUP}/merge-segments"
REQUESTER_ANNOTATION = f"{GROUP}/requested-by"


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
