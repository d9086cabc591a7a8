"""DeliveryLedger: an acknowledgement of the n-th message handed out covers, per topic and
segment, the highest message among the first n, and each message is covered once."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from scalable_topics.client.delivery_ledger import DeliveryLedger
from scalable_topics.protocol import MessageId

# A step: hand out a message (topic, segment, entry), or acknowledge one handed out.
deliveries = st.tuples(st.sampled_from("ab"), st.integers(0, 1), st.integers(0, 9))
steps = st.lists(
    st.one_of(
        deliveries.map(lambda d: ("deliver", d)), st.integers(0, 60).map(lambda i: ("ack", i))
    ),
    max_size=80,
)


@given(steps)
def test_an_acknowledgement_covers_the_highest_of_everything_handed_out_before(
    script: list[tuple[str, object]],
) -> None:
    ledger: DeliveryLedger[str] = DeliveryLedger()
    handed: list[tuple[int, str, MessageId]] = []
    floors: dict[tuple[str, int], MessageId] = {}  # what the acknowledgements reached
    acknowledged_through = -1
    for kind, value in script:
        if kind == "deliver":
            topic, segment, entry = value  # type: ignore[misc]
            message_id = MessageId(segment, entry)
            handed.append((ledger.record(topic, message_id), topic, message_id))
            continue
        assert isinstance(value, int)
        if not handed:
            continue
        number = handed[value % len(handed)][0]
        vector = ledger.cover(number)
        newly = [h for h in handed if acknowledged_through < h[0] <= number]
        expected: dict[str, dict[int, MessageId]] = {}
        for _, topic, message_id in newly:
            segments = expected.setdefault(topic, {})
            known = segments.get(message_id.segment_id)
            segments[message_id.segment_id] = (
                message_id if known is None else max(known, message_id)
            )
        assert vector == expected
        for topic, segments in vector.items():
            for segment, message_id in segments.items():
                floor = floors.get((topic, segment))
                floors[topic, segment] = message_id if floor is None else max(floor, message_id)
        acknowledged_through = max(acknowledged_through, number)
        assert len(ledger) == len([h for h in handed if h[0] > acknowledged_through])
    # Every message acknowledged is at or under its segment's floor.
    for number, topic, message_id in handed:
        if number <= acknowledged_through:
            assert message_id <= floors[topic, message_id.segment_id]
