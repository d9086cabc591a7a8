"""Pure broker pieces: producer access modes and fencing, deduplication, batch records, load."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from scalable_topics.broker.batch_record import (
    CorruptRecord,
    decode_batch,
    encode_batch,
)
from scalable_topics.broker.dedup import DedupTracker, Verdict
from scalable_topics.broker.load import RollingRate, SegmentLoad
from scalable_topics.broker.producer_access import (
    AccessError,
    ProducerAccess,
    ProducerBusy,
    ProducerFenced,
    Standing,
)
from scalable_topics.model.clock import ManualClock
from scalable_topics.model.resources import ProducerAccessMode as Mode
from scalable_topics.protocol import BatchMessage


def test_second_exclusive_producer_fails_at_once_naming_the_holder() -> None:
    access = ProducerAccess()
    first = access.open("a", "writer-1", Mode.EXCLUSIVE)
    assert first.standing is Standing.GRANTED
    assert first.grant is not None and first.grant.epoch == 1
    with pytest.raises(ProducerBusy, match="held by 'writer-1'"):
        access.open("b", "writer-2", Mode.EXCLUSIVE)
    with pytest.raises(ProducerBusy):
        access.open("c", "shared-1", Mode.SHARED)
    assert [g.name for g in access.producers] == ["writer-1"]


def test_exclusive_fails_while_shared_producers_write() -> None:
    access = ProducerAccess()
    access.open("s", "shared", Mode.SHARED)
    with pytest.raises(ProducerBusy, match="'shared'"):
        access.open("x", "exclusive", Mode.EXCLUSIVE)


def test_wait_for_exclusive_takes_over_when_the_holder_closes() -> None:
    access = ProducerAccess()
    access.open("a", "first", Mode.EXCLUSIVE)
    waiting = access.open("b", "second", Mode.WAIT_FOR_EXCLUSIVE)
    assert waiting.standing is Standing.WAITING
    assert access.waiting == 1
    granted, refused = access.close("a")
    assert refused == []
    assert [(g.handle, g.epoch) for g in granted] == [("b", 2)]
    assert access.check_send("b").name == "second"
    with pytest.raises(ProducerFenced):
        access.check_send("a")


def test_fencing_producer_takes_over_and_the_old_one_is_fenced_for_good() -> None:
    access = ProducerAccess()
    access.open("old", "old", Mode.EXCLUSIVE)
    result = access.open("new", "new", Mode.EXCLUSIVE_WITH_FENCING)
    assert [g.handle for g in result.fenced] == ["old"]
    assert access.epoch == 2
    with pytest.raises(ProducerFenced, match="fenced for good"):
        access.check_send("old")
    # The old producer coming back with its old epoch is refused.
    with pytest.raises(ProducerFenced, match="asks for epoch 1, but the segment is at epoch 2"):
        access.open("old-again", "old", Mode.EXCLUSIVE, requested_epoch=1)


def test_reconnecting_holder_keeps_its_epoch_but_a_newcomer_bumps_it() -> None:
    access = ProducerAccess()
    access.open("a", "a", Mode.EXCLUSIVE)
    access.close("a")
    again = access.open("a2", "a", Mode.EXCLUSIVE, requested_epoch=1)
    assert again.grant is not None and again.grant.epoch == 1
    access.close("a2")
    newcomer = access.open("b", "b", Mode.EXCLUSIVE)
    assert newcomer.grant is not None and newcomer.grant.epoch == 2


def test_controller_fence_raises_the_epoch_and_fences_older_grants() -> None:
    access = ProducerAccess()
    access.open("s1", "s1", Mode.SHARED)
    access.open("s2", "s2", Mode.SHARED)
    fenced = access.fence(5)
    assert sorted(g.handle for g in fenced) == ["s1", "s2"]
    assert access.epoch == 5
    granted = access.open("x", "x", Mode.EXCLUSIVE, requested_epoch=5)
    assert granted.grant is not None and granted.grant.epoch == 5
    assert access.fence(5) == []  # the topic-wide holder survives a fence at its own epoch


def test_a_reservation_refuses_shared_and_other_names_and_admits_the_holder() -> None:
    access = ProducerAccess()
    access.fence(4, holder="amy")
    assert access.reserved_for == "amy"
    with pytest.raises(ProducerBusy, match="held exclusively by 'amy'"):
        access.open("s", "bob", Mode.SHARED)
    with pytest.raises(ProducerBusy, match="held exclusively by 'amy'"):
        access.open("s", "amy", Mode.SHARED)  # the holder produces exclusively, not shared
    for mode in (Mode.EXCLUSIVE, Mode.WAIT_FOR_EXCLUSIVE, Mode.EXCLUSIVE_WITH_FENCING):
        with pytest.raises(ProducerBusy, match="held exclusively by 'amy'"):
            access.open("x", "bob", mode)
        with pytest.raises(ProducerBusy):
            access.open("x", "bob", mode, requested_epoch=4)  # the holder's epoch is not enough
    assert access.producers == ()
    opened = access.open("a", "amy", Mode.EXCLUSIVE_WITH_FENCING, requested_epoch=4)
    assert opened.grant is not None and (opened.grant.name, opened.grant.epoch) == ("amy", 4)
    access.close("a")  # the holder disconnects: the segment stays reserved for it
    with pytest.raises(ProducerBusy):
        access.open("s", "bob", Mode.SHARED)
    assert access.open("a2", "amy", Mode.EXCLUSIVE, requested_epoch=4).grant is not None


def test_a_cleared_reservation_admits_everyone_again() -> None:
    access = ProducerAccess()
    access.fence(2, holder="amy")
    access.fence(2, holder=None)  # the grant ended: released at the same epoch
    assert access.reserved_for is None and access.epoch == 2
    assert access.open("s", "bob", Mode.SHARED).grant is not None


def test_only_the_controller_moves_a_reservation() -> None:
    """Found by the wire fuzzer: an ExclusiveWithFencing open with a higher epoch of its own
    took the reservation over, so the controller's release at its grant's epoch was stale and
    the segment stayed reserved for a producer nobody granted, refusing everyone for good."""
    access = ProducerAccess()
    access.fence(3, holder="amy")
    access.fence(2, holder=None)  # a release from an older grant, arriving late: ignored
    assert (access.epoch, access.reserved_for) == (3, "amy")
    with pytest.raises(ProducerBusy, match="held exclusively by 'amy' at epoch 3"):
        access.open("b", "bob", Mode.EXCLUSIVE_WITH_FENCING, requested_epoch=4)
    with pytest.raises(AccessError, match="only the topic's controller raises it") as raised:
        access.open("a", "amy", Mode.EXCLUSIVE_WITH_FENCING, requested_epoch=4)
    assert raised.value.code == "InvalidRequest"
    # The holder opens under the grant's epoch, given or not, and the epoch stays.
    taken = access.open("a", "amy", Mode.EXCLUSIVE, requested_epoch=None)
    assert taken.grant is not None and taken.grant.epoch == 3
    access.close("a")
    taken = access.open("a2", "amy", Mode.EXCLUSIVE_WITH_FENCING, requested_epoch=3)
    assert taken.grant is not None and (access.epoch, access.reserved_for) == (3, "amy")
    # The grant ends: its release at epoch 3 clears the reservation, and anyone may open.
    access.close("a2")
    assert access.release(3)
    assert access.open("s", "sam", Mode.SHARED).standing is Standing.GRANTED
    # A newer grant moves the reservation through the controller's fence.
    access.fence(4, holder="bob")
    assert (access.epoch, access.reserved_for) == (4, "bob")


def test_reserving_fences_other_names_and_refuses_queued_ones() -> None:
    access = ProducerAccess()
    access.open("s", "bob", Mode.SHARED)
    access.open("e", "eve", Mode.WAIT_FOR_EXCLUSIVE)  # queued behind bob
    fenced = access.fence(0, holder="amy")  # same epoch: bob's grant is no older, still fenced
    assert [g.name for g in fenced] == ["bob"]
    granted, refused = access.promote_waiters()
    assert granted == []
    assert [(h, type(e)) for h, e in refused] == [("e", ProducerBusy)]


def test_a_conditional_fence_refuses_while_another_producer_is_connected() -> None:
    access = ProducerAccess()
    access.open("s", "shared-1", Mode.SHARED)
    access.open("e", "eve", Mode.WAIT_FOR_EXCLUSIVE)  # waiting: not connected, not counted
    with pytest.raises(ProducerBusy, match="'shared-1' is connected"):
        access.fence(1, holder="amy", if_free=True)
    # Nothing changed: the Shared producer keeps writing, nothing is reserved, no epoch raised.
    assert (access.epoch, access.reserved_for) == (0, None)
    assert access.check_send("s").name == "shared-1"
    access.close("s")
    # eve, first in line on the segment, took it as the Shared producer left: she is another.
    with pytest.raises(ProducerBusy, match="'eve' is connected"):
        access.fence(1, holder="amy", if_free=True)
    access.close("e")
    access.open("a0", "amy", Mode.SHARED)  # the holder's own name is not another producer
    fenced = access.fence(2, holder="amy", if_free=True)
    assert [g.handle for g in fenced] == ["a0"]  # an older epoch's producer is fenced all the same
    assert (access.epoch, access.reserved_for) == (2, "amy")
    with pytest.raises(ProducerBusy, match="held exclusively by 'amy'"):
        access.open("s2", "shared-2", Mode.SHARED)  # reserved: nobody slips in after the check


def test_a_release_clears_the_reservation_and_raises_no_epoch() -> None:
    access = ProducerAccess(epoch=3)
    access.open("s", "shared-1", Mode.SHARED)
    assert access.release(5)  # a claim at 5 undone: this segment was never fenced to it
    assert access.epoch == 3 and access.check_send("s").epoch == 3  # nobody fenced
    access.close("s")
    access.fence(5, holder="amy")
    assert not access.release(4)  # a release from an older grant, arriving late: ignored
    assert access.reserved_for == "amy"
    assert access.release(5)
    assert (access.epoch, access.reserved_for) == (5, None)
    assert access.open("s", "shared-1", Mode.SHARED).grant is not None


def test_waiter_with_a_stale_epoch_is_refused_on_promotion() -> None:
    access = ProducerAccess()
    access.open("a", "a", Mode.EXCLUSIVE)
    access.open("w", "w", Mode.WAIT_FOR_EXCLUSIVE, requested_epoch=1)
    access.fence(3)
    granted, refused = access.promote_waiters()
    assert granted == []
    assert [(h, type(e)) for h, e in refused] == [("w", ProducerFenced)]


def test_a_handle_cannot_open_twice() -> None:
    access = ProducerAccess()
    access.open("a", "a", Mode.SHARED)
    with pytest.raises(AccessError, match="already open"):
        access.open("a", "a", Mode.SHARED)


def test_dedup_distinguishes_new_in_flight_and_duplicate_batches() -> None:
    dedup = DedupTracker()
    assert dedup.classify("p", 9) is Verdict.NEW
    dedup.pushed("p", 9)
    assert dedup.classify("p", 9) is Verdict.IN_FLIGHT
    dedup.persisted("p", 9, entry_id=42)
    assert dedup.classify("p", 5) is Verdict.DUPLICATE
    assert dedup.original_entry("p", 9) == 42
    assert dedup.classify("p", 10) is Verdict.NEW
    dedup.pushed("p", 19)
    dedup.failed("p")
    assert dedup.classify("p", 19) is Verdict.NEW


def test_dedup_forgets_old_positions_but_not_the_mark() -> None:
    dedup = DedupTracker(remembered_batches=2)
    for seq in range(5):
        dedup.persisted("p", seq, entry_id=seq)
    assert dedup.original_entry("p", 0) is None
    assert dedup.original_entry("p", 4) == 4
    assert dedup.classify("p", 0) is Verdict.DUPLICATE


messages = st.lists(
    st.builds(
        BatchMessage,
        payload=st.binary(max_size=64),
        key=st.none() | st.text(max_size=20),
        properties=st.dictionaries(st.text(max_size=5), st.text(max_size=5), max_size=3),
        event_time_ms=st.none() | st.integers(0, 2**62),
    ),
    min_size=1,
    max_size=10,
)


@given(st.text(min_size=1, max_size=30), st.integers(0, 2**62), messages)
def test_batch_records_round_trip(name: str, first: int, batch: list[BatchMessage]) -> None:
    record = decode_batch(encode_batch(name, first, batch))
    assert record.producer_name == name
    assert record.first_sequence_id == first
    assert list(record.messages) == batch
    assert record.last_sequence_id == first + len(batch) - 1


@given(st.binary(max_size=64))
def test_garbage_is_not_a_batch(data: bytes) -> None:
    try:
        decode_batch(data)
    except CorruptRecord:
        return


def test_rates_cover_the_window_and_expire() -> None:
    clock = ManualClock()
    load = SegmentLoad(10, clock.monotonic)
    for _ in range(10):
        load.produced(100, 1000)
        clock.advance(1)
    sample = load.sample()
    assert sample.msg_rate_in == pytest.approx(100)
    assert sample.byte_rate_in == pytest.approx(1000)
    assert sample.msg_rate_out == 0
    clock.advance(30)
    assert load.sample().msg_rate_in == 0


def test_a_young_meter_divides_by_its_age_not_the_window() -> None:
    clock = ManualClock()
    rate = RollingRate(60, clock.monotonic)
    clock.advance(2)
    rate.add(200)
    assert rate.rate() == pytest.approx(100)
