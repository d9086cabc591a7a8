"""The set a namespace watch holds (client/namespace_set.py): whatever the broker's set goes
through, and however its updates are cut (snapshots in parts, diffs in parts, drops in the
middle of a snapshot, reconnects with and without a change), the client ends with the broker's
set, each change leads from the set before to the set after, and the hash it sends when
watching again is the broker's when nothing changed."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest
from hypothesis import given
from hypothesis import strategies as st

from scalable_topics.client.namespace_set import NamespaceSet, OutOfOrderUpdate, TopicSetChange
from scalable_topics.protocol import TopicsDiff, TopicsSnapshot, topic_set_hash

NAMESPACE = "team"
NAMES = [f"t{index}" for index in range(10)]


def qualified(names: set[str] | frozenset[str]) -> frozenset[str]:
    return frozenset(f"{NAMESPACE}/{name}" for name in names)


def cut(items: list[str], sizes: list[int]) -> list[list[str]]:
    """``items`` in consecutive parts of the given sizes (the last takes the rest)."""
    parts, start = [], 0
    for size in sizes:
        parts.append(items[start : start + size])
        start += size
    parts.append(items[start:])
    return parts


@dataclass
class Replay:
    """A broker's set, and the client fed what a broker would send it."""

    client: NamespaceSet = field(default_factory=lambda: NamespaceSet(NAMESPACE))
    broker: set[str] = field(default_factory=set)
    changes: list[TopicSetChange] = field(default_factory=list)

    def feed(self, change: TopicSetChange | None) -> None:
        if change is not None:
            self.changes.append(change)

    def snapshot(self, sizes: list[int], complete: bool = True) -> None:
        parts = cut(sorted(self.broker), sizes)
        for index, part in enumerate(parts):
            last = index == len(parts) - 1
            if last and not complete:
                return  # the connection dropped before the last part
            self.feed(self.client.snapshot(TopicsSnapshot(tuple(part), last)))

    def watch(self, sizes: list[int]) -> None:
        """A (re)watch: the broker answers the client's hash as docs/protocol.md says."""
        self.client.begin_watch()
        sent = self.client.rewatch_hash()
        if sent is None or sent != topic_set_hash(self.broker):
            self.snapshot(sizes)

    def change(self, removed: set[str], added: set[str], recreated: set[str], split: int) -> None:
        """The broker's set loses ``removed``, gains ``added``, and ``recreated`` (members
        that stay) are deleted and created again; sent as one diff or two (removals first)."""
        gone = removed & self.broker
        recreated = recreated & (self.broker - gone)
        new = added - (self.broker - gone)
        self.broker = (self.broker - gone) | new
        all_removed = sorted(gone | recreated)
        all_added = sorted(new | recreated)
        if split:
            self.feed(self.client.diff(TopicsDiff((), tuple(all_removed))))
            self.feed(self.client.diff(TopicsDiff(tuple(all_added), ())))
        else:
            self.feed(self.client.diff(TopicsDiff(tuple(all_added), tuple(all_removed))))


names = st.sets(st.sampled_from(NAMES))
sizes = st.lists(st.integers(0, 4), max_size=4)
steps = st.lists(
    st.one_of(
        st.tuples(st.just("change"), names, names, names, st.integers(0, 1)),
        st.tuples(st.just("rewatch"), sizes),
        st.tuples(st.just("drop mid-snapshot"), sizes, sizes),
        st.tuples(st.just("offline change"), names, names),
    ),
    max_size=30,
)


@given(initial=names, first=sizes, steps=steps)
def test_the_client_ends_with_the_brokers_set_and_every_change_leads_there(
    initial: set[str], first: list[int], steps: list[tuple[object, ...]]
) -> None:
    replay = Replay(broker=set(initial))
    replay.watch(first)
    assert replay.client.known and replay.client.topics == qualified(replay.broker)
    replay.changes.clear()  # the initial set is start()'s answer, not a change
    held = replay.client.topics
    for step in steps:
        before = len(replay.changes)
        match step:
            case ("change", set() as removed, set() as added, set() as recreated, int() as split):
                replay.change(removed, added, recreated, split)
            case ("rewatch", list() as parts):
                replay.watch(parts)
            case ("drop mid-snapshot", list() as parts, list() as then):
                replay.client.begin_watch()
                replay.snapshot(parts, complete=False)
                replay.watch(then)
            case ("offline change", set() as removed, set() as added):
                # Changed while the client was away: it hears of it by the reconnect snapshot.
                replay.broker = (replay.broker - removed) | added
                replay.watch([])
        for change in replay.changes[before:]:
            assert (held - change.removed) | change.added == change.topics
            assert change.added or change.removed
            held = change.topics
        assert replay.client.topics == qualified(replay.broker) == held


@given(initial=names, parts=sizes, steps=st.lists(st.tuples(names, names, names), max_size=10))
def test_the_hash_sent_after_a_quiet_drop_is_the_hash_of_the_brokers_set(
    initial: set[str], parts: list[int], steps: list[tuple[set[str], set[str], set[str]]]
) -> None:
    replay = Replay(broker=set(initial))
    assert replay.client.rewatch_hash() is None  # the first watch asks for a snapshot
    replay.watch(parts)
    for removed, added, recreated in steps:
        replay.change(removed, added, recreated, split=0)
    replay.client.begin_watch()
    assert replay.client.rewatch_hash() == topic_set_hash(replay.broker)


def test_a_snapshot_is_taken_only_once_complete() -> None:
    held = NamespaceSet(NAMESPACE)
    assert held.snapshot(TopicsSnapshot(("a", "b"), complete=False)) is None
    assert not held.known and held.topics == frozenset()
    assert held.snapshot(TopicsSnapshot(("c",), complete=True)) == TopicSetChange(
        qualified({"a", "b", "c"}), frozenset(), qualified({"a", "b", "c"})
    )
    assert held.known and held.rewatch_hash() == topic_set_hash(["a", "b", "c"])


def test_a_name_deleted_and_created_again_is_both_removed_and_added() -> None:
    held = NamespaceSet(NAMESPACE)
    held.snapshot(TopicsSnapshot(("a", "b")))
    change = held.diff(TopicsDiff(added=("a",), removed=("a",)))
    assert change == TopicSetChange(qualified({"a"}), qualified({"a"}), qualified({"a", "b"}))


def test_a_diff_that_changes_nothing_is_no_change() -> None:
    held = NamespaceSet(NAMESPACE)
    held.snapshot(TopicsSnapshot(("a",)))
    # A topic the snapshot had arrives again as added; one never there is removed.
    assert held.diff(TopicsDiff(added=("a",), removed=("z",))) is None
    assert held.topics == qualified({"a"})


def test_a_reconnect_snapshot_that_differs_is_a_change_against_the_held_set() -> None:
    held = NamespaceSet(NAMESPACE)
    held.snapshot(TopicsSnapshot(("a", "b")))
    held.begin_watch()
    change = held.snapshot(TopicsSnapshot(("b", "c")))
    assert change == TopicSetChange(qualified({"c"}), qualified({"a"}), qualified({"b", "c"}))


def test_a_diff_out_of_place_is_refused() -> None:
    held = NamespaceSet(NAMESPACE)
    with pytest.raises(OutOfOrderUpdate, match="before the first complete snapshot"):
        held.diff(TopicsDiff(added=("a",)))
    held.snapshot(TopicsSnapshot(("a",)))
    held.snapshot(TopicsSnapshot(("b",), complete=False))
    with pytest.raises(OutOfOrderUpdate, match="between the parts of a snapshot"):
        held.diff(TopicsDiff(added=("c",)))
    # The set held is untouched, and a new watch starts the snapshot over.
    assert held.topics == qualified({"a"})
    held.begin_watch()
    held.snapshot(TopicsSnapshot(("c",)))
    assert held.topics == qualified({"c"})
