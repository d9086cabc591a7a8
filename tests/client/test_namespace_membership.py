"""How a namespace consumer follows its set, over any sequence of changes (hypothesis): at no
moment are two consumers of one name open, a name deleted and created again is opened anew
only once its old consumer has closed, and once the changes stop exactly the set's topics
have an open consumer. The per-topic consumers here are in-memory recorders (the real ones
are exercised against brokers in test_namespace_consumers.py); only their opening and
closing matter, each taking a few turns of the event loop."""

from __future__ import annotations

import asyncio
from typing import Any

from hypothesis import example, given
from hypothesis import strategies as st
from namespace_topics import ScriptedTopics, qualified

from scalable_topics.client.namespace_consumer import NamespaceConsumer
from scalable_topics.client.topic_mux import Feed

NAMES = ["a", "b", "c"]


class Recorder:
    """The consumers opened and closed, checking that a name has one open at a time."""

    def __init__(self) -> None:
        self.open: dict[str, Opened] = {}
        self.problems: list[str] = []
        self.changes_made = 0  # how many changes the set had when a consumer was made

    def opened(self, consumer: Opened) -> None:
        if consumer.topic in self.open:
            self.problems.append(f"{consumer.topic} opened while another was open")
        self.open[consumer.topic] = consumer

    def closed(self, consumer: Opened) -> None:
        if self.open.get(consumer.topic) is consumer:
            del self.open[consumer.topic]


class Opened:
    def __init__(self, topic: str, recorder: Recorder, turns: int) -> None:
        self.topic = topic
        self.made_after = recorder.changes_made
        self._recorder = recorder
        self._turns = turns

    async def start(self) -> None:
        self._recorder.opened(self)
        for _ in range(self._turns):
            await asyncio.sleep(0)

    async def close(self) -> None:
        for _ in range(self._turns):
            await asyncio.sleep(0)
        self._recorder.closed(self)


class Watches:
    """What a namespace consumer asks of its client."""

    async def watch(self, topic: str) -> None:
        await asyncio.sleep(0)

    async def release_watch(self, topic: str) -> None:
        pass

    def untrack(self, closable: object) -> None:
        pass


class Following(NamespaceConsumer[Any]):
    def __init__(self, topics: ScriptedTopics, recorder: Recorder, turns: int) -> None:
        super().__init__(Watches(), topics, "s")  # type: ignore[arg-type]
        self._recorder = recorder
        self._turns = turns

    def _make(self, feed: Feed[Any], watcher: object) -> Opened:
        return Opened(feed.topic, self._recorder, self._turns)

    async def _start_consumer(self, consumer: Opened) -> None:
        await consumer.start()

    async def _close_consumer(self, consumer: Opened, *, unsubscribe: bool) -> None:
        await consumer.close()


changes = st.lists(
    st.tuples(
        st.frozensets(st.sampled_from(NAMES)),  # added
        st.frozensets(st.sampled_from(NAMES)),  # removed (a name in both: created again)
        st.integers(0, 6),  # loop turns before the next change
    ),
    max_size=12,
)


@given(st.frozensets(st.sampled_from(NAMES)), changes, st.integers(0, 3))
# Created again twice in a row: the second new member must wait for the first consumer too,
# not only for the member cancelled while it waited (which ends at once).
@example(frozenset({"a"}), [(frozenset({"a"}), frozenset({"a"}), 0)] * 2, 3)
def test_one_consumer_per_topic_of_the_set_whatever_the_changes(
    initial: frozenset[str], script: list[tuple[frozenset[str], frozenset[str], int]], turns: int
) -> None:
    asyncio.run(_follow(initial, script, turns))


async def _follow(
    initial: frozenset[str], script: list[tuple[frozenset[str], frozenset[str], int]], turns: int
) -> None:
    recorder = Recorder()
    topics = ScriptedTopics(sorted(initial))
    consumer = Following(topics, recorder, turns)
    await consumer._start()
    assert set(recorder.open) == topics.topics
    last_added: dict[str, int] = {}
    for index, (added, removed, pause) in enumerate(script, start=1):
        before = topics.topics
        topics.change(added=added, removed=removed)
        recorder.changes_made = index
        # New to the set, or deleted and created again: adding a name held changes nothing.
        fresh = (qualified(n) for n in added if n in removed or qualified(n) not in before)
        last_added.update((topic, index) for topic in fresh)
        assert consumer.topics == topics.topics
        for _ in range(pause):
            await asyncio.sleep(0)
    async with asyncio.timeout(10):
        while set(consumer.attached_topics) != topics.topics or set(recorder.open) != topics.topics:
            await asyncio.sleep(0)
    assert recorder.problems == []
    assert {c.topic for c in recorder.open.values()} == {qualified(n) for n in topics.topics}
    # A name added (or deleted and created again) has a consumer made after that change.
    for topic, opened in recorder.open.items():
        assert opened.made_after >= last_added.get(topic, 0), topic
    await consumer.close()
    assert recorder.open == {} and topics.closed
