"""Random sequences of split, merge and prune, valid and invalid, against the layout invariants."""

from datetime import UTC, datetime, timedelta

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from scalable_topics.model.errors import LayoutError
from scalable_topics.model.hashing import HASH_MAX
from scalable_topics.model.layout import SegmentLayout
from scalable_topics.model.resources import ScalableTopicStatus

T0 = datetime(2026, 1, 1, tzinfo=UTC)


class LayoutMachine(RuleBasedStateMachine):
    layout: SegmentLayout
    ever_seen: set[int]
    tick: int

    @initialize(count=st.integers(1, 12))
    def start(self, count: int) -> None:
        self.layout = SegmentLayout.initial(count, T0)
        self.ever_seen = set(self.layout.segments)
        self.tick = 0

    def _now(self) -> datetime:
        self.tick += 1
        return T0 + timedelta(seconds=self.tick, microseconds=self.tick)

    def _commit(self, new: SegmentLayout) -> None:
        assert new.epoch == self.layout.epoch + 1
        created = set(new.segments) - set(self.layout.segments)
        assert not created & self.ever_seen, "a segment id was reused"
        assert all(i >= self.layout.next_segment_id for i in created)
        self.ever_seen |= created
        self.layout = new

    def _refused(self, request: object) -> None:
        before = self.layout.to_status()
        try:
            request()  # type: ignore[operator]
        except LayoutError:
            assert self.layout.to_status() == before
        else:
            raise AssertionError("an impossible request was accepted")

    @rule(data=st.data())
    def split(self, data: st.DataObject) -> None:
        candidates = [s for s in self.layout.active if s.hash_range.can_split()]
        if not candidates:
            return
        target = data.draw(st.sampled_from(candidates))
        self._commit(self.layout.split(target.segment_id, self._now()))

    @rule(data=st.data())
    def merge(self, data: st.DataObject) -> None:
        active = self.layout.active
        if len(active) < 2:
            return
        index = data.draw(st.integers(0, len(active) - 2))
        first, second = active[index], active[index + 1]
        if data.draw(st.booleans()):
            first, second = second, first
        self._commit(self.layout.merge(first.segment_id, second.segment_id, self._now()))

    @rule(data=st.data())
    def prune(self, data: st.DataObject) -> None:
        prunable = [
            s
            for s in self.layout.sealed
            if not any(p in self.layout.segments for p in s.parent_ids)
        ]
        if not prunable:
            return
        self._commit(self.layout.prune(data.draw(st.sampled_from(prunable)).segment_id))

    @rule(data=st.data())
    def impossible_request(self, data: st.DataObject) -> None:
        layout = self.layout
        sealed = [s.segment_id for s in layout.sealed]
        active = layout.active
        unknown = data.draw(st.integers(layout.next_segment_id, layout.next_segment_id + 5))
        requests = [
            lambda: layout.split(unknown, T0),
            lambda: layout.merge(unknown, active[0].segment_id, T0),
            lambda: layout.prune(unknown),
            lambda: layout.prune(active[0].segment_id),
            lambda: layout.merge(active[0].segment_id, active[0].segment_id, T0),
        ]
        requests += [lambda s=s: layout.split(s, T0) for s in sealed]
        requests += [lambda s=s: layout.merge(s, active[0].segment_id, T0) for s in sealed]
        requests += [
            lambda s=s: layout.split(s.segment_id, T0)
            for s in active
            if not s.hash_range.can_split()
        ]
        if len(active) >= 3:
            requests.append(lambda: layout.merge(active[0].segment_id, active[2].segment_id, T0))
        children_with_live_parents = [
            s.segment_id for s in layout.sealed if any(p in layout.segments for p in s.parent_ids)
        ]
        requests += [lambda s=s: layout.prune(s) for s in children_with_live_parents]
        self._refused(data.draw(st.sampled_from(requests)))

    @invariant()
    def active_ranges_partition_the_hash_space(self) -> None:
        expected = 0
        for segment in self.layout.active:
            assert segment.hash_range.start == expected
            expected = segment.hash_range.end + 1
        assert expected == HASH_MAX + 1
        self.layout.check_invariants()
        for value in (0, HASH_MAX, self.tick * 7919 % (HASH_MAX + 1)):
            assert self.layout.find_active(value).hash_range.contains(value)

    @invariant()
    def lineage_and_merge_depth_are_consistent(self) -> None:
        layout = self.layout
        for segment_id, info in layout.segments.items():
            lineage = set(layout.lineage(segment_id))
            for other in lineage:
                assert segment_id in layout.lineage(other)
            present_parents = [p for p in info.parent_ids if p in layout.segments]
            assert set(present_parents) <= lineage
            assert set(info.child_ids) <= lineage
            expected_depth = (1 if len(info.parent_ids) == 2 else 0) + max(
                (layout.merge_depth(p) for p in present_parents), default=0
            )
            assert layout.merge_depth(segment_id) == expected_depth
            for ancestor in layout.ancestors(segment_id):
                assert ancestor < segment_id  # ids grow with creation: ascending is topological

    @invariant()
    def status_round_trip_is_lossless(self) -> None:
        status = self.layout.to_status()
        assert SegmentLayout.from_status(status) == self.layout
        through_resource = ScalableTopicStatus.model_validate(status).to_wire()
        assert SegmentLayout.from_status(through_resource) == self.layout


LayoutMachine.TestCase.settings = settings(max_examples=100, stateful_step_count=30, deadline=None)
test_layout_state_machine = LayoutMachine.TestCase
