"""Ownership shards: which shard a topic is in, which Leases elect them, fair shares, terms."""

from __future__ import annotations

from collections import Counter

from hypothesis import given
from hypothesis import strategies as st

from scalable_topics.model.ownership import (
    SHARD_COUNT_ANNOTATION,
    announced_shard_count,
    fair_share,
    is_member_lease,
    member_lease_name,
    shard_lease_name,
    shard_of,
    shard_of_lease,
    stored_term,
)

names = st.text("abcdefghijklmnopqrstuvwxyz0123456789-", min_size=1, max_size=40)


@given(names, names, st.integers(1, 1024))
def test_a_topic_is_in_one_shard_below_the_count(namespace: str, name: str, count: int) -> None:
    shard = shard_of(namespace, name, count)
    assert 0 <= shard < count
    assert shard == shard_of(namespace, name, count)  # the same in every process


def test_topics_spread_evenly_over_the_shards() -> None:
    counts = Counter(shard_of("default", f"topic-{i}", 16) for i in range(16_000))
    assert set(counts) == set(range(16))
    assert max(counts.values()) < 1.15 * 1000 and min(counts.values()) > 0.85 * 1000


def test_shard_leases_are_named_and_told_apart() -> None:
    assert shard_lease_name(7) == "scalabletopics-shard-7"
    assert shard_of_lease("scalabletopics-shard-7") == 7
    assert shard_of_lease("scalabletopics-shard-") is None
    assert shard_of_lease("scalabletopics-shard-x") is None
    assert shard_of_lease("broker-0") is None
    assert is_member_lease(member_lease_name("Controller_0.example"))
    assert (
        member_lease_name("Controller_0.example")
        == "scalabletopics-controller-controller-0.example"
    )
    assert not is_member_lease(shard_lease_name(0))


@given(st.integers(1, 1024), st.integers(1, 64))
def test_the_fair_shares_cover_every_shard(shards: int, members: int) -> None:
    share = fair_share(shards, members)
    assert share * members >= shards
    assert (share - 1) * members < shards


def test_the_count_announced_by_the_newest_renewal_wins() -> None:
    def lease(shard: int, count: str, renewed: str) -> dict[str, object]:
        return {
            "metadata": {
                "name": shard_lease_name(shard),
                "annotations": {SHARD_COUNT_ANNOTATION: count},
            },
            "spec": {"renewTime": renewed},
        }

    assert announced_shard_count([]) is None
    assert announced_shard_count([{"metadata": {"name": "broker-0"}}]) is None
    older = lease(0, "8", "2026-01-01T00:00:00.000000Z")
    newer = lease(1, "16", "2026-01-01T00:00:05.000000Z")
    assert announced_shard_count([older, newer]) == 16
    assert announced_shard_count([older]) == 8


def test_the_stored_term_is_the_newest_of_every_writer() -> None:
    assert stored_term({}) == 0
    topic = {
        "status": {
            "controller": {"identity": "a", "term": 3},
            "producer": {"epoch": 9, "term": 5},
            "subscriptions": [{"name": "s", "consumers": [{"name": "c", "term": 4}]}],
        }
    }
    assert stored_term(topic) == 5
    topic["status"]["subscriptions"][0]["consumers"][0]["term"] = 11  # type: ignore[index]
    assert stored_term(topic) == 11
    assert stored_term({"status": {"controller": {"term": "bad"}}}) == 0
