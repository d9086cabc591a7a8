"""Errors of the domain model: each names the reason a request is impossible."""


class LayoutError(ValueError):
    """A requested layout change, or a layout read back from storage, is impossible."""


class InvalidSegmentCount(LayoutError):
    def __init__(self, count: int, maximum: int) -> None:
        super().__init__(f"a topic needs between 1 and {maximum} initial segments, not {count}")
        self.count = count


class InvalidHashRange(LayoutError):
    pass


class UnknownSegment(LayoutError):
    def __init__(self, segment_id: int) -> None:
        super().__init__(f"segment {segment_id} does not exist in this topic's layout")
        self.segment_id = segment_id


class SegmentSealed(LayoutError):
    def __init__(self, segment_id: int, action: str) -> None:
        super().__init__(f"cannot {action} segment {segment_id}: it is sealed")
        self.segment_id = segment_id


class SegmentActive(LayoutError):
    def __init__(self, segment_id: int) -> None:
        super().__init__(f"cannot prune segment {segment_id}: it is still active")
        self.segment_id = segment_id


class SegmentHasLiveParents(LayoutError):
    def __init__(self, segment_id: int, parent_ids: list[int]) -> None:
        parents = ", ".join(str(p) for p in parent_ids)
        super().__init__(
            f"cannot prune segment {segment_id}: its parents {parents} are still in the layout "
            "(prune the oldest generation first)"
        )
        self.segment_id = segment_id


class RangeTooSmallToSplit(LayoutError):
    def __init__(self, segment_id: int, hash_value: int) -> None:
        super().__init__(
            f"cannot split segment {segment_id}: it owns the single hash {hash_value:04x}"
        )
        self.segment_id = segment_id


class SegmentsNotAdjacent(LayoutError):
    def __init__(self, first_id: int, second_id: int) -> None:
        super().__init__(
            f"cannot merge segments {first_id} and {second_id}: their hash ranges are not adjacent"
        )


class SameSegment(LayoutError):
    def __init__(self, segment_id: int) -> None:
        super().__init__(f"cannot merge segment {segment_id} with itself")


class StaleLayoutChange(LayoutError):
    def __init__(self, planned_epoch: int, current_epoch: int) -> None:
        super().__init__(
            f"the change was planned against layout epoch {planned_epoch}, "
            f"but the layout is now at epoch {current_epoch}"
        )


class CorruptLayout(LayoutError):
    """Stored layout data that breaks an invariant; nothing is derived from it."""
