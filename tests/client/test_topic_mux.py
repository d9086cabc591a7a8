"""The namespace consumers' shared queue: messages come out in the order they went in, but
for those of feeds closed meanwhile (dropped, whatever compaction did) and those their segment
consumer refuses as they are taken; a failure is raised at once (hypothesis)."""

from __future__ import annotations

import asyncio

import pytest
from hypothesis import given
from hypothesis import strategies as st

from scalable_topics.client import ClientClosed, NotAuthorized
from scalable_topics.client.receive_queue import QueuedMessage
from scalable_topics.client.topic_mux import Feed, MuxQueue
from scalable_topics.protocol import DeliveredMessage, MessageId


class Source:
    """A segment consumer that refuses the messages whose entry is odd, when asked to."""

    def __init__(self, refuse_odd: bool) -> None:
        self.refuse_odd = refuse_odd

    def take(self, item: QueuedMessage) -> bool:
        return not (self.refuse_odd and item.message.message_id.entry_id % 2)


def item(source: Source, entry: int) -> QueuedMessage:
    delivered = DeliveredMessage(MessageId(0, entry), b"", None, {}, None, 0, 0)
    return QueuedMessage(source, 0, delivered)


# Steps: put a message on feed i, close feed i, or take one message (puts the likeliest).
steps = st.lists(
    st.tuples(st.sampled_from(["put"] * 4 + ["close", "take", "take"]), st.integers(0, 2)),
    max_size=60,
)


@given(steps, st.booleans())
def test_messages_come_out_in_order_without_those_of_closed_feeds(
    script: list[tuple[str, int]], refuse_odd: bool
) -> None:
    asyncio.run(_play(script, refuse_odd))


async def _play(script: list[tuple[str, int]], refuse_odd: bool) -> None:
    mux: MuxQueue[object] = MuxQueue()
    source = Source(refuse_odd)
    feeds = [Feed(mux, f"ns/t{i}", lambda error: None) for i in range(3)]
    model: list[tuple[int, int]] = []  # (feed, entry) in, in order
    entry = 0
    for kind, index in script:
        if kind == "put":
            feeds[index].put(item(source, entry))
            if feeds[index].open:
                model.append((index, entry))
            entry += 1
        elif kind == "close":
            feeds[index].close()
            model = [(f, e) for f, e in model if f != index]
        else:
            expected = [(f, e) for f, e in model if not (refuse_odd and e % 2)]
            if not expected:
                assert len(mux) == len(model)
                continue
            feed, taken = await mux.get()
            assert (feeds.index(feed), taken.message.message_id.entry_id) == expected[0]
            model = model[model.index(expected[0]) + 1 :]
        assert len(mux) == len(model)


async def test_a_failure_is_raised_at_once_with_messages_queued() -> None:
    mux: MuxQueue[object] = MuxQueue()
    feed = Feed(mux, "ns/t", lambda error: None)
    feed.put(item(Source(False), 0))
    mux.fail(NotAuthorized("no role"))
    mux.fail(ClientClosed("closed"))  # the first failure stays
    with pytest.raises(NotAuthorized):
        await mux.get()


async def test_a_feed_reports_failures_until_closed() -> None:
    failures: list[Exception] = []
    feed = Feed(MuxQueue(), "ns/t", failures.append)
    feed.fail(NotAuthorized("refused"))
    feed.close()
    feed.fail(ClientClosed("its consumer closing"))
    assert [type(error) for error in failures] == [NotAuthorized]
