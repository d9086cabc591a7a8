"""The pure part of namespace watches (broker/namespace_set.py): filters, the member set with
the changes seen before it was read, what a client lags behind, and updates cut to a frame."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from scalable_topics.broker.namespace_set import (
    Lag,
    MemberSet,
    diff_parts,
    frame_budget,
    matches,
    member_uid,
    normalized,
    opening,
    snapshot_parts,
)
from scalable_topics.protocol import (
    NamespaceUpdate,
    TopicsDiff,
    TopicsSnapshot,
    encode_frame,
    topic_set_hash,
)

LARGEST_WATCH_ID = 2**64 - 1
texts = st.text(alphabet="abc", max_size=2)
properties = st.dictionaries(texts, texts, max_size=4)


def topic(properties: dict[str, str], uid: str = "u", deleting: bool = False) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": "t", "namespace": "ns", "uid": uid}
    if deleting:
        metadata["deletionTimestamp"] = "2024-05-01T12:00:00Z"
    return {"metadata": metadata, "spec": {"properties": properties}}


# -- filters -------------------------------------------------------------------------------------


@given(properties, properties)
def test_a_topic_matches_when_it_holds_every_filter_pair(
    held: dict[str, str], filters: dict[str, str]
) -> None:
    expected = all(key in held and held[key] == value for key, value in filters.items())
    assert matches(held, normalized(filters)) is expected
    assert (member_uid(topic(held), normalized(filters)) == "u") is expected


@given(properties)
def test_no_filters_match_every_topic_and_a_topic_being_deleted_matches_none(
    held: dict[str, str],
) -> None:
    assert member_uid(topic(held), ()) == "u"
    assert member_uid(topic(held, deleting=True), ()) is None
    assert member_uid(None, ()) is None


def test_a_topic_without_properties_matches_no_filter() -> None:
    bare = {"metadata": {"name": "t", "uid": "u"}, "spec": {}}
    assert member_uid(bare, ()) == "u"
    assert member_uid(bare, (("env", "prod"),)) is None


def test_filters_are_one_set_whatever_their_order() -> None:
    assert normalized({"b": "2", "a": "1"}) == normalized({"a": "1", "b": "2"})


# -- the member set and one client's lag ---------------------------------------------------------

names = st.sampled_from(["a", "b", "c", "d"])
uids = st.sampled_from([None, "u1", "u2"])  # None: deleted, or out of the filters
events = st.lists(st.tuples(names, uids), max_size=30)


@given(
    events,
    st.data(),
    st.sampled_from(["no hash", "the client's hash", "another hash"]),
)
def test_a_client_ends_with_the_set_whatever_the_interleaving(
    history: list[tuple[str, str | None]], data: st.DataObject, hashing: str
) -> None:
    """The set is registered at one point of the history, read from the cache at a later one
    and loaded at a later one still; changes reach it from the registration on. Whenever the
    client is told, it ends holding the true set, and it is told nothing net-zero."""
    count = len(history)
    registered = data.draw(st.integers(0, count), "registered")
    read_at = data.draw(st.integers(registered, count), "read")
    loaded_at = data.draw(st.integers(read_at, count), "loaded")
    told_at = set(data.draw(st.lists(st.integers(loaded_at, count)), "told"))

    def state(upto: int) -> dict[str, str]:
        members: dict[str, str] = {}
        for name, uid in history[:upto]:
            if uid is None:
                members.pop(name, None)
            else:
                members[name] = uid
        return members

    members, lag = MemberSet(), Lag()
    client: set[str] = set()

    def tell() -> None:
        diff = lag.take(members)
        if diff is None:
            return
        assert diff.added or diff.removed
        assert set(diff.added).isdisjoint(client - set(diff.removed)), "added twice"
        assert set(diff.removed) <= client, "removed what the client does not hold"
        client.difference_update(diff.removed)
        client.update(diff.added)

    for index in range(count + 1):
        if index == loaded_at:
            members.load(state(read_at))
            if hashing == "the client's hash":
                client = set(state(loaded_at))  # it held the set already: nothing is sent
                current_hash: int | None = topic_set_hash(client)
            else:
                client = {"stale"} if hashing == "another hash" else set()
                current_hash = None if hashing == "no hash" else topic_set_hash(client)
            parts = opening(members, current_hash, 1 << 20)
            if hashing == "the client's hash":
                assert parts == []
            else:
                client = {name for part in parts for name in part.topics}
        if index in told_at:
            tell()
        if index == count:
            break
        if index >= registered:
            name, uid = history[index]
            changed, previous = members.observe(name, uid)
            if changed:
                lag.note(name, previous)
    tell()
    assert client == set(state(count))
    assert members.names() == tuple(sorted(state(count)))


def test_a_topic_deleted_and_created_again_is_in_both_lists() -> None:
    members, lag = MemberSet(), Lag()
    members.load({"orders": "u1"})
    for name, uid in (("orders", None), ("orders", "u2")):
        changed, previous = members.observe(name, uid)
        assert changed
        lag.note(name, previous)
    assert lag.take(members) == TopicsDiff(("orders",), ("orders",))


def test_a_change_undone_before_the_client_is_told_sends_nothing() -> None:
    members, lag = MemberSet(), Lag()
    members.load({"orders": "u1"})
    for name, uid in (("refunds", "u9"), ("orders", None), ("refunds", None), ("orders", "u1")):
        changed, previous = members.observe(name, uid)
        assert changed
        lag.note(name, previous)
    assert lag.take(members) is None
    assert not lag


def test_a_member_set_loads_once() -> None:
    members = MemberSet()
    members.load({})
    with pytest.raises(RuntimeError, match="loaded already"):
        members.load({})


# -- cutting updates to the frame ----------------------------------------------------------------

topic_names = st.lists(
    st.text(alphabet="abcdefghij-é漢", min_size=1, max_size=63), unique=True, max_size=80
)
frame_sizes = st.integers(256, 2048)


def fits(update: NamespaceUpdate, max_frame_bytes: int) -> bool:
    return len(encode_frame(update)) <= max_frame_bytes


@given(topic_names, frame_sizes)
def test_a_snapshot_is_cut_into_parts_that_fit_in_order(
    listed: list[str], max_frame_bytes: int
) -> None:
    ordered = tuple(sorted(listed))
    parts = snapshot_parts(ordered, frame_budget(max_frame_bytes))
    assert all(fits(NamespaceUpdate(LARGEST_WATCH_ID, snapshot=p), max_frame_bytes) for p in parts)
    assert tuple(name for part in parts for name in part.topics) == ordered
    assert [p.complete for p in parts] == [False] * (len(parts) - 1) + [True]
    assert all(part.topics for part in parts[:-1]) or len(parts) == 1


def test_a_snapshot_that_fits_is_one_part_of_the_same_names() -> None:
    ordered = ("a", "b")
    [part] = snapshot_parts(ordered, frame_budget(1024))
    assert part == TopicsSnapshot(ordered, True) and part.topics is ordered
    assert snapshot_parts((), frame_budget(1024)) == [TopicsSnapshot((), True)]


@given(topic_names, topic_names, frame_sizes)
def test_a_diff_is_cut_into_parts_that_fit_removals_first(
    added: list[str], removed: list[str], max_frame_bytes: int
) -> None:
    whole = TopicsDiff(tuple(sorted(added)), tuple(sorted(removed)))
    if not whole.added and not whole.removed:
        return
    parts = diff_parts(whole, frame_budget(max_frame_bytes))
    assert all(fits(NamespaceUpdate(LARGEST_WATCH_ID, diff=p), max_frame_bytes) for p in parts)
    assert all(p.added or p.removed for p in parts)
    assert tuple(n for p in parts for n in p.removed) == whole.removed
    assert tuple(n for p in parts for n in p.added) == whole.added
    first_addition = next((i for i, p in enumerate(parts) if p.added), len(parts))
    assert not any(p.removed for p in parts[first_addition + 1 :])


def test_a_frame_too_small_for_any_name_is_refused() -> None:
    with pytest.raises(ValueError, match="no room"):
        frame_budget(64)
    with pytest.raises(ValueError, match="does not fit"):
        snapshot_parts(("x" * 100,), 50)
