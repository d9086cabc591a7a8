"""The store port's contract: every adapter (see ADAPTERS in conftest.py) must pass this suite."""

from __future__ import annotations

import asyncio
import contextlib
import copy
import itertools
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import pytest
from store_testkit import (
    LEASE,
    PROBE,
    TIMEOUT,
    Backend,
    events_through,
    lease_object,
    names,
    next_event,
    probe,
    rv,
    take,
)

from scalable_topics.model.clock import ManualClock
from scalable_topics.model.timefmt import format_time, parse_time
from scalable_topics.store import (
    AlreadyExists,
    Conflict,
    EventType,
    Expired,
    Invalid,
    NotFound,
    Object,
    Store,
    StoreClosed,
    UnknownKind,
)


def assert_stamped(backend: Backend, stamp: str, clock: ManualClock) -> None:
    """``stamp`` is the time of ``clock``, or, where the server keeps its own time, now."""
    if backend.controls_clock:
        assert stamp == format_time(clock.now())
    else:
        assert abs(parse_time(stamp) - datetime.now(UTC)) < timedelta(minutes=5), stamp


def assert_listed_after(backend: Backend, listed: str, last: Object) -> None:
    """A list's resourceVersion is the test's last write, or later where others write too."""
    if backend.private_history:
        assert int(listed) == rv(last)
    else:
        assert int(listed) >= rv(last)


# -- create, read, replace, delete ---------------------------------------------------------------


async def test_create_sets_identity_version_generation_and_timestamp(
    store_backend: Backend,
) -> None:
    clock = ManualClock()
    store = await store_backend.new_store(clock=clock)

    created = await store.create(probe("orders", labels={"team": "a"}, spec={"partitions": 3}))

    meta = created["metadata"]
    assert meta["generation"] == 1
    assert_stamped(store_backend, meta["creationTimestamp"], clock)
    assert len(meta["uid"]) == 36
    assert rv(created) > 0
    assert created["spec"] == {"partitions": 3}
    assert meta["labels"] == {"team": "a"}
    assert await store.get(PROBE, "default", "orders") == created


async def test_every_write_gets_a_new_increasing_resource_version(store_backend: Backend) -> None:
    store = await store_backend.new_store()
    first = await store.create(probe("a"))
    second = await store.create(probe("b"))
    third = await store.replace({**first, "spec": {"partitions": 2}})
    assert rv(first) < rv(second) < rv(third)
    listed = await store.list(PROBE)
    assert_listed_after(store_backend, listed.resource_version, third)


async def test_uids_differ_between_objects(store: Store) -> None:
    a = await store.create(probe("a"))
    b = await store.create(probe("b"))
    assert a["metadata"]["uid"] != b["metadata"]["uid"]


async def test_get_missing_raises_not_found(store: Store) -> None:
    with pytest.raises(NotFound) as caught:
        await store.get(PROBE, "default", "nope")
    assert (caught.value.kind, caught.value.namespace, caught.value.name) == (
        PROBE,
        "default",
        "nope",
    )


async def test_create_twice_raises_already_exists(store: Store) -> None:
    await store.create(probe("orders"))
    with pytest.raises(AlreadyExists):
        await store.create(probe("orders", spec={"partitions": 9}))
    assert (await store.get(PROBE, "default", "orders"))["spec"] == {"partitions": 1}


async def test_same_name_in_other_namespace_is_another_object(store: Store) -> None:
    await store.create(probe("orders", "ns-a"))
    await store.create(probe("orders", "ns-b", spec={"partitions": 2}))
    assert (await store.get(PROBE, "ns-b", "orders"))["spec"] == {"partitions": 2}
    with pytest.raises(NotFound):
        await store.get(PROBE, "ns-c", "orders")


async def test_create_refuses_a_resource_version(store: Store) -> None:
    obj = probe("orders")
    obj["metadata"]["resourceVersion"] = "7"
    with pytest.raises(Invalid, match="resourceVersion"):
        await store.create(obj)


@pytest.mark.parametrize(
    ("mutate", "error", "message"),
    [
        (lambda o: o.update(kind="Pod"), UnknownKind, "Pod"),
        (lambda o: o.update(apiVersion="v1"), Invalid, "apiVersion"),
        (lambda o: o["metadata"].pop("name"), Invalid, "metadata.name"),
        (lambda o: o["metadata"].pop("namespace"), Invalid, "metadata.namespace"),
        (lambda o: o["metadata"].update(name="Bad_Name"), Invalid, "Bad_Name"),
        (lambda o: o["metadata"].update(name="a" * 254), Invalid, "DNS subdomain"),
        (lambda o: o["metadata"].update(name="-lead"), Invalid, "-lead"),
        (lambda o: o["metadata"].update(namespace="a.b"), Invalid, "a.b"),
        (lambda o: o["metadata"].update(labels={"bad key": "v"}), Invalid, "bad key"),
        (lambda o: o["metadata"].update(labels={"k": "bad value"}), Invalid, "bad value"),
        (lambda o: o["metadata"].update(labels={"k": 1}), Invalid, "string"),
        (lambda o: o["metadata"].update(finalizers="x"), Invalid, "finalizers"),
    ],
)
async def test_create_validates_the_object(
    store: Store, mutate: Callable[[Object], object], error: type[Exception], message: str
) -> None:
    obj = probe("orders")
    mutate(obj)
    with pytest.raises(error, match=message):
        await store.create(obj)
    assert (await store.list(PROBE)).items == []


async def test_names_may_be_dotted_dns_subdomains(store: Store) -> None:
    created = await store.create(probe("orders.eu-1.v2"))
    assert created["metadata"]["name"] == "orders.eu-1.v2"


async def test_unknown_kind_is_refused_on_reads_too(store: Store) -> None:
    with pytest.raises(UnknownKind):
        await store.get("Pod", "default", "x")
    with pytest.raises(UnknownKind):
        await store.list("Pod")


async def test_returned_objects_are_copies(store: Store) -> None:
    request = probe("orders", labels={"a": "1"}, spec={"nested": {"x": [1, 2]}})
    created = await store.create(request)
    request["spec"]["nested"]["x"].append(3)
    created["spec"]["nested"]["x"].append(4)
    created["metadata"]["labels"]["a"] = "2"
    fetched = await store.get(PROBE, "default", "orders")
    assert fetched["spec"] == {"nested": {"x": [1, 2]}}
    assert fetched["metadata"]["labels"] == {"a": "1"}
    fetched["spec"]["nested"]["x"].clear()
    listed = await store.list(PROBE)
    assert listed.items[0]["spec"] == {"nested": {"x": [1, 2]}}


async def test_replace_requires_the_read_resource_version(store: Store) -> None:
    created = await store.create(probe("orders"))
    without = copy.deepcopy(created)
    del without["metadata"]["resourceVersion"]
    with pytest.raises(Invalid, match="resourceVersion"):
        await store.replace(without)


async def test_replace_with_a_stale_version_conflicts(store: Store) -> None:
    created = await store.create(probe("orders"))
    updated = await store.replace({**created, "spec": {"partitions": 2}})
    with pytest.raises(Conflict) as caught:
        await store.replace({**created, "spec": {"partitions": 3}})
    assert caught.value.expected == created["metadata"]["resourceVersion"]
    assert caught.value.actual == updated["metadata"]["resourceVersion"]
    assert (await store.get(PROBE, "default", "orders"))["spec"] == {"partitions": 2}


async def test_replace_of_a_missing_object_is_not_found(store: Store) -> None:
    obj = probe("ghost")
    obj["metadata"]["resourceVersion"] = "1"
    with pytest.raises(NotFound):
        await store.replace(obj)


async def test_replace_keeps_system_metadata(store: Store) -> None:
    created = await store.create(probe("orders"))
    forged = copy.deepcopy(created)
    forged["metadata"].update(
        uid="forged", creationTimestamp="1999-01-01T00:00:00.000000Z", generation=42
    )
    forged["metadata"]["labels"] = {"new": "label"}
    replaced = await store.replace(forged)
    for field in ("uid", "creationTimestamp", "generation"):
        assert replaced["metadata"][field] == created["metadata"][field]
    assert replaced["metadata"]["labels"] == {"new": "label"}


async def test_a_write_that_changes_nothing_keeps_the_version(store: Store) -> None:
    created = await store.create(probe("orders", labels={"a": "1"}))
    same = await store.replace(copy.deepcopy(created))
    assert same == created
    patched = await store.patch(PROBE, "default", "orders", {"spec": {"partitions": 1}})
    assert patched == created


async def test_delete_removes_and_returns_the_object(store_backend: Backend) -> None:
    store = await store_backend.new_store()
    created = await store.create(probe("orders"))
    deleted = await store.delete(PROBE, "default", "orders")
    assert deleted["metadata"]["uid"] == created["metadata"]["uid"]
    assert rv(deleted) > rv(created)
    with pytest.raises(NotFound):
        await store.get(PROBE, "default", "orders")
    with pytest.raises(NotFound):
        await store.delete(PROBE, "default", "orders")
    assert_listed_after(store_backend, (await store.list(PROBE)).resource_version, deleted)


async def test_delete_with_a_stale_version_conflicts(store: Store) -> None:
    created = await store.create(probe("orders"))
    await store.replace({**created, "spec": {"partitions": 5}})
    with pytest.raises(Conflict):
        await store.delete(
            PROBE, "default", "orders", resource_version=created["metadata"]["resourceVersion"]
        )
    current = await store.get(PROBE, "default", "orders")
    await store.delete(
        PROBE, "default", "orders", resource_version=current["metadata"]["resourceVersion"]
    )
    with pytest.raises(NotFound):
        await store.get(PROBE, "default", "orders")


async def test_recreated_object_is_a_new_object(store: Store) -> None:
    first = await store.create(probe("orders"))
    await store.delete(PROBE, "default", "orders")
    second = await store.create(probe("orders"))
    assert second["metadata"]["uid"] != first["metadata"]["uid"]
    assert second["metadata"]["generation"] == 1
    with pytest.raises(Conflict):  # a writer that read the first incarnation cannot clobber it
        await store.replace({**first, "spec": {"partitions": 8}})


async def test_list_filters_by_namespace_and_sorts(store: Store) -> None:
    for namespace, name in [("b", "y"), ("a", "z"), ("b", "x"), ("a", "w")]:
        await store.create(probe(name, namespace))
    await store.create(lease_object("not-a-topic", "a"))
    everything = await store.list(PROBE)
    assert [(o["metadata"]["namespace"], o["metadata"]["name"]) for o in everything.items] == [
        ("a", "w"),
        ("a", "z"),
        ("b", "x"),
        ("b", "y"),
    ]
    assert [o["metadata"]["name"] for o in (await store.list(PROBE, "b")).items] == ["x", "y"]
    assert (await store.list(PROBE, "c")).items == []
    assert (await store.list(PROBE, "")).items == everything.items
    assert [o["metadata"]["name"] for o in (await store.list(LEASE)).items] == ["not-a-topic"]


# -- generation and the status subresource --------------------------------------------------------


async def test_generation_grows_only_with_spec(store: Store) -> None:
    created = await store.create(probe("orders"))
    relabeled = await store.replace(
        {**created, "metadata": {**created["metadata"], "labels": {"x": "y"}}}
    )
    assert relabeled["metadata"]["generation"] == 1
    respecced = await store.replace({**relabeled, "spec": {"partitions": 2}})
    assert respecced["metadata"]["generation"] == 2
    status = await store.replace_status({**respecced, "status": {"phase": "Ready"}})
    assert status["metadata"]["generation"] == 2
    patched = await store.patch(PROBE, "default", "orders", {"spec": {"partitions": 3}})
    assert patched["metadata"]["generation"] == 3
    annotated = await store.patch(
        PROBE, "default", "orders", {"metadata": {"annotations": {"a": "b"}}}
    )
    assert annotated["metadata"]["generation"] == 3


async def test_create_drops_status_of_a_status_subresource_kind(store: Store) -> None:
    created = await store.create(probe("orders", status={"phase": "Ready"}))
    assert "status" not in created
    assert "status" not in await store.get(PROBE, "default", "orders")


async def test_replace_ignores_status_and_replace_status_ignores_the_rest(store: Store) -> None:
    created = await store.create(probe("orders"))
    with_status = await store.replace_status({**created, "status": {"phase": "Ready"}})
    assert with_status["status"] == {"phase": "Ready"}

    replaced = await store.replace(
        {**with_status, "spec": {"partitions": 4}, "status": {"phase": "Gone"}}
    )
    assert replaced["status"] == {"phase": "Ready"}
    assert replaced["spec"] == {"partitions": 4}

    sneaky = copy.deepcopy(replaced)
    sneaky["spec"] = {"partitions": 99}
    sneaky["metadata"]["labels"] = {"sneaky": "yes"}
    sneaky["status"] = {"phase": "Draining"}
    status_only = await store.replace_status(sneaky)
    assert status_only["status"] == {"phase": "Draining"}
    assert status_only["spec"] == {"partitions": 4}
    assert "labels" not in status_only["metadata"]
    assert status_only["metadata"]["generation"] == replaced["metadata"]["generation"]
    assert rv(status_only) > rv(replaced)


async def test_replace_status_with_a_stale_version_conflicts(store: Store) -> None:
    created = await store.create(probe("orders"))
    await store.replace_status({**created, "status": {"phase": "A"}})
    with pytest.raises(Conflict):
        await store.replace_status({**created, "status": {"phase": "B"}})
    assert (await store.get(PROBE, "default", "orders"))["status"] == {"phase": "A"}


async def test_status_is_an_ordinary_field_without_the_subresource(store: Store) -> None:
    lease = lease_object("leader", holderIdentity="a")
    lease["status"] = {"note": "kept"}
    created = await store.create(lease)
    assert created["status"] == {"note": "kept"}
    replaced = await store.replace({**created, "status": {"note": "changed"}})
    assert replaced["status"] == {"note": "changed"}
    assert replaced["metadata"]["generation"] == 1
    with pytest.raises(Invalid, match="status subresource"):
        await store.replace_status({**replaced, "status": {"note": "x"}})


# -- merge patch -----------------------------------------------------------------------------


async def test_patch_merges_and_null_deletes(store: Store) -> None:
    await store.create(
        probe("orders", labels={"a": "1", "b": "2"}, spec={"x": {"y": 1, "z": 2}, "list": [1]})
    )
    patched = await store.patch(
        PROBE,
        "default",
        "orders",
        {
            "metadata": {"labels": {"a": None, "c": "3"}},
            "spec": {"x": {"y": None, "w": 4}, "list": [2, 3]},
        },
    )
    assert patched["metadata"]["labels"] == {"b": "2", "c": "3"}
    assert patched["spec"] == {"x": {"z": 2, "w": 4}, "list": [2, 3]}
    assert patched["metadata"]["generation"] == 2
    assert await store.get(PROBE, "default", "orders") == patched


async def test_patch_ignores_status_and_patch_status_changes_only_status(store: Store) -> None:
    await store.create(probe("orders"))
    patched = await store.patch(PROBE, "default", "orders", {"status": {"phase": "Ready"}})
    assert "status" not in patched
    status = await store.patch_status(
        PROBE,
        "default",
        "orders",
        {"status": {"phase": "Ready", "n": 1}, "spec": {"partitions": 7}},
    )
    assert status["status"] == {"phase": "Ready", "n": 1}
    assert status["spec"] == {"partitions": 1}
    again = await store.patch_status(PROBE, "default", "orders", {"status": {"n": None}})
    assert again["status"] == {"phase": "Ready"}
    assert again["metadata"]["generation"] == 1


async def test_patch_preconditions(store: Store) -> None:
    created = await store.create(probe("orders"))
    old = created["metadata"]["resourceVersion"]
    await store.patch(PROBE, "default", "orders", {"spec": {"partitions": 2}}, resource_version=old)
    with pytest.raises(Conflict):
        await store.patch(
            PROBE, "default", "orders", {"spec": {"partitions": 3}}, resource_version=old
        )
    with pytest.raises(Conflict):
        await store.patch_status(
            PROBE, "default", "orders", {"status": {"p": 1}}, resource_version=old
        )
    with pytest.raises(Conflict):  # a resourceVersion inside a merge patch is a precondition too
        await store.patch(
            PROBE,
            "default",
            "orders",
            {"metadata": {"resourceVersion": old}, "spec": {"partitions": 4}},
        )
    assert (await store.get(PROBE, "default", "orders"))["spec"] == {"partitions": 2}


async def test_patch_errors(store: Store) -> None:
    with pytest.raises(NotFound):
        await store.patch(PROBE, "default", "ghost", {"spec": {}})
    await store.create(probe("orders"))
    with pytest.raises(Invalid, match=r"metadata\.name"):
        await store.patch(PROBE, "default", "orders", {"metadata": {"name": "other"}})
    with pytest.raises(Invalid, match="label"):
        await store.patch(PROBE, "default", "orders", {"metadata": {"labels": {"k": "not valid"}}})
    with pytest.raises(Invalid, match="status subresource"):
        await store.patch_status(LEASE, "default", "orders", {"status": {}})


# -- label selectors -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("selector", "expected"),
    [
        ("", ["blue-a", "green-b", "plain", "red-a"]),
        ("color=red", ["red-a"]),
        ("color==red", ["red-a"]),
        ("color!=red", ["blue-a", "green-b", "plain"]),
        ("color in (red, blue)", ["blue-a", "red-a"]),
        ("color notin (red,blue)", ["green-b", "plain"]),
        ("color", ["blue-a", "green-b", "red-a"]),
        ("!color", ["plain"]),
        ("color, tier=a", ["blue-a", "red-a"]),
        ("  tier = a ,  color in (blue)  ", ["blue-a"]),
        ("color=purple", []),
    ],
)
async def test_list_with_label_selector(store: Store, selector: str, expected: list[str]) -> None:
    await store.create(probe("red-a", labels={"color": "red", "tier": "a"}))
    await store.create(probe("blue-a", labels={"color": "blue", "tier": "a"}))
    await store.create(probe("green-b", labels={"color": "green", "tier": "b"}))
    await store.create(probe("plain"))
    listed = await store.list(PROBE, label_selector=selector)
    assert sorted(o["metadata"]["name"] for o in listed.items) == expected


async def test_malformed_selector_is_invalid(store: Store) -> None:
    with pytest.raises(Invalid, match="in"):
        await store.list(PROBE, label_selector="color in red")
    with pytest.raises(Invalid):
        store.watch(PROBE, label_selector="a=b=c")


async def test_watch_with_selector_sees_objects_enter_and_leave(store: Store) -> None:
    await store.create(probe("early", labels={"color": "red"}))
    await store.create(probe("other", labels={"color": "blue"}))
    async with store.watch(PROBE, label_selector="color=red") as events:
        initial = await next_event(events)
        assert (initial.type, initial.object["metadata"]["name"]) == (EventType.ADDED, "early")

        await store.create(probe("blue", labels={"color": "blue"}))  # never seen
        red = await store.create(probe("red", labels={"color": "red"}))
        event = await next_event(events)
        assert (event.type, event.resource_version) == (
            EventType.ADDED,
            red["metadata"]["resourceVersion"],
        )

        left = await store.patch(
            PROBE, "default", "red", {"metadata": {"labels": {"color": "blue"}}}
        )
        event = await next_event(events)
        assert (event.type, event.object["metadata"]["name"]) == (EventType.DELETED, "red")
        assert event.resource_version == left["metadata"]["resourceVersion"]

        await store.patch(PROBE, "default", "red", {"spec": {"partitions": 5}})  # outside: unseen
        await store.delete(PROBE, "default", "other")  # never matched: unseen
        entered = await store.patch(
            PROBE, "default", "blue", {"metadata": {"labels": {"color": "red"}}}
        )
        event = await next_event(events)
        assert (event.type, event.object["metadata"]["name"]) == (EventType.ADDED, "blue")
        assert event.resource_version == entered["metadata"]["resourceVersion"]

        changed = await store.patch(PROBE, "default", "blue", {"spec": {"partitions": 2}})
        event = await next_event(events)
        assert (event.type, event.object["spec"]) == (EventType.MODIFIED, changed["spec"])

        gone = await store.delete(PROBE, "default", "blue")
        event = await next_event(events)
        assert (event.type, event.resource_version) == (
            EventType.DELETED,
            gone["metadata"]["resourceVersion"],
        )


# -- finalizers ------------------------------------------------------------------------------


async def test_delete_with_finalizers_marks_then_last_finalizer_removes(store: Store) -> None:
    created = await store.create(probe("orders", finalizers=["a.io/one", "a.io/two"]))
    marked = await store.delete(PROBE, "default", "orders")
    assert "deletionTimestamp" in marked["metadata"]
    assert marked["metadata"]["generation"] == created["metadata"]["generation"] + 1
    assert await store.get(PROBE, "default", "orders") == marked

    again = await store.delete(PROBE, "default", "orders")
    assert again == marked  # deletion started once; nothing changes

    with pytest.raises(Invalid, match="finalizer"):
        await store.replace(
            {
                **marked,
                "metadata": {
                    **marked["metadata"],
                    "finalizers": ["a.io/one", "a.io/two", "a.io/new"],
                },
            }
        )

    one_left = await store.replace(
        {**marked, "metadata": {**marked["metadata"], "finalizers": ["a.io/two"]}}
    )
    assert one_left["metadata"]["finalizers"] == ["a.io/two"]
    assert one_left["metadata"]["deletionTimestamp"] == marked["metadata"]["deletionTimestamp"]

    gone = await store.replace({**one_left, "metadata": {**one_left["metadata"], "finalizers": []}})
    assert rv(gone) > rv(one_left)
    with pytest.raises(NotFound):
        await store.get(PROBE, "default", "orders")


async def test_delete_marks_with_the_clock_time(store_backend: Backend) -> None:
    clock = ManualClock()
    store = await store_backend.new_store(clock=clock)
    await store.create(probe("orders", finalizers=["a.io/x"]))
    clock.advance(12.5)
    marked = await store.delete(PROBE, "default", "orders")
    assert_stamped(store_backend, marked["metadata"]["deletionTimestamp"], clock)


async def test_patch_removing_finalizers_completes_deletion(store: Store) -> None:
    await store.create(probe("orders", finalizers=["a.io/x"]))
    async with store.watch(PROBE) as events:
        assert (await next_event(events)).type is EventType.ADDED
        await store.delete(PROBE, "default", "orders")
        marked = await next_event(events)
        assert marked.type is EventType.MODIFIED
        assert "deletionTimestamp" in marked.object["metadata"]
        await store.patch(PROBE, "default", "orders", {"metadata": {"finalizers": None}})
        gone = await next_event(events)
        assert gone.type is EventType.DELETED
        assert "finalizers" not in gone.object["metadata"]
    with pytest.raises(NotFound):
        await store.get(PROBE, "default", "orders")


async def test_finalizers_without_deletion_do_not_delete(store: Store) -> None:
    created = await store.create(probe("orders", finalizers=["a.io/x"]))
    cleared = await store.replace(
        {**created, "metadata": {**created["metadata"], "finalizers": []}}
    )
    assert cleared["metadata"]["finalizers"] == []
    assert await store.get(PROBE, "default", "orders") == cleared


# -- concurrency -----------------------------------------------------------------------------


async def test_concurrent_writers_get_exactly_one_winner_per_version(
    store_backend: Backend,
) -> None:
    stores = [await store_backend.new_store() for _ in range(3)]
    await stores[0].create(probe("contended", spec={"winner": None}))

    async def attempt(store: Store, read: Object, spec: dict[str, int]) -> str | None:
        try:
            written = await store.replace({**read, "spec": spec})
            return str(written["metadata"]["resourceVersion"])
        except Conflict:
            return None

    for round_ in range(8):
        reads = [await s.get(PROBE, "default", "contended") for s in stores]
        assert len({o["metadata"]["resourceVersion"] for o in reads}) == 1
        async with asyncio.timeout(30):
            results = await asyncio.gather(
                *(
                    attempt(stores[w % 3], reads[w % 3], {"winner": w, "round": round_})
                    for w in range(12)
                )
            )
        winners = [w for w, result in enumerate(results) if result is not None]
        assert len(winners) == 1, results
        final = await stores[1].get(PROBE, "default", "contended")
        assert final["spec"] == {"winner": winners[0], "round": round_}
        assert final["metadata"]["resourceVersion"] == results[winners[0]]


async def test_concurrent_creates_of_one_name_have_one_winner(store_backend: Backend) -> None:
    stores = [await store_backend.new_store() for _ in range(3)]

    async def attempt(writer: int) -> bool:
        try:
            await stores[writer % 3].create(probe("once", spec={"by": writer}))
        except AlreadyExists:
            return False
        return True

    results = await asyncio.gather(*(attempt(w) for w in range(9)))
    assert results.count(True) == 1
    winner = results.index(True)
    assert (await stores[2].get(PROBE, "default", "once"))["spec"] == {"by": winner}


# -- watch -----------------------------------------------------------------------------------


async def test_watch_without_version_lists_then_follows(store: Store) -> None:
    await store.create(probe("a"))
    await store.create(probe("b"))
    await store.create(probe("c", "elsewhere"))
    async with store.watch(PROBE, namespace="default") as events:
        initial = await take(events, 2)
        assert sorted(names(initial)) == [("ADDED", "a"), ("ADDED", "b")]
        await store.create(probe("d", "elsewhere"))  # another namespace: unseen
        deleted = await store.delete(PROBE, "default", "a")
        event = await next_event(events)
        assert (event.type, event.object["metadata"]["name"]) == (EventType.DELETED, "a")
        assert event.resource_version == deleted["metadata"]["resourceVersion"]


async def test_watch_all_namespaces_and_only_its_kind(store: Store) -> None:
    start = (await store.list(PROBE)).resource_version
    async with store.watch(PROBE, resource_version=start) as events:
        await store.create(probe("a", "ns-1"))
        await store.create(lease_object("lease", "ns-1"))
        last = await store.create(probe("b", "ns-2"))
        seen = await events_through(events, rv(last))
    assert [(e.type.value, e.object["metadata"]["namespace"]) for e in seen] == [
        ("ADDED", "ns-1"),
        ("ADDED", "ns-2"),
    ]


async def test_watch_events_carry_the_object_as_written(store: Store) -> None:
    start = (await store.list(PROBE)).resource_version
    async with store.watch(PROBE, resource_version=start) as events:
        created = await store.create(probe("a"))
        replaced = await store.replace({**created, "spec": {"partitions": 2}})
        deleted = await store.delete(PROBE, "default", "a")
        seen = await events_through(events, rv(deleted))
    assert [(e.type, e.object) for e in seen] == [
        (EventType.ADDED, created),
        (EventType.MODIFIED, replaced),
        (EventType.DELETED, deleted),
    ]


async def test_no_op_writes_produce_no_events(store: Store) -> None:
    created = await store.create(probe("a"))
    async with store.watch(
        PROBE, resource_version=created["metadata"]["resourceVersion"]
    ) as events:
        await store.replace(copy.deepcopy(created))
        await store.patch(PROBE, "default", "a", {"metadata": {"labels": None}})
        marker = await store.create(probe("marker"))
        event = await next_event(events)
        assert (event.type, event.resource_version) == (
            EventType.ADDED,
            marker["metadata"]["resourceVersion"],
        )


async def test_watch_resumes_without_gaps(store_backend: Backend) -> None:
    writer = await store_backend.new_store()
    reader = await store_backend.new_store()
    start = (await writer.list(PROBE)).resource_version
    written: list[str] = []
    for i in range(10):
        written.append(
            (await writer.create(probe(f"obj-{i}", labels={"i": str(i)})))["metadata"][
                "resourceVersion"
            ]
        )
    for i in range(0, 10, 2):
        written.append(
            (await writer.patch(PROBE, "default", f"obj-{i}", {"spec": {"round": 2}}))["metadata"][
                "resourceVersion"
            ]
        )
    for i in range(0, 10, 3):
        written.append(
            (await writer.delete(PROBE, "default", f"obj-{i}"))["metadata"]["resourceVersion"]
        )

    seen: list[str] = []
    cursor = start
    for chunk in (3, 5, 1, 100):  # close midway, resume from the last revision seen
        async with reader.watch(PROBE, resource_version=cursor) as events:
            if chunk == 100:
                batch = await events_through(events, int(written[-1]))
            else:
                batch = await take(events, chunk)
        seen += [e.resource_version for e in batch]
        cursor = seen[-1]
    assert seen == written
    assert [int(r) for r in seen] == sorted({int(r) for r in seen})


async def test_watch_from_a_version_keeps_following(store_backend: Backend) -> None:
    writer = await store_backend.new_store()
    reader = await store_backend.new_store()
    created = await writer.create(probe("a"))
    async with reader.watch(
        PROBE, resource_version=created["metadata"]["resourceVersion"]
    ) as events:
        for n in range(2, 7):
            updated = await writer.patch(PROBE, "default", "a", {"spec": {"partitions": n}})
            event = await next_event(events)
            assert (event.type, event.object) == (EventType.MODIFIED, updated)


async def test_watchers_in_other_instances_see_changes(store_backend: Backend) -> None:
    writer = await store_backend.new_store()
    readers = [await store_backend.new_store() for _ in range(2)]
    watches = [r.watch(PROBE) for r in readers]
    for watch in watches:
        await watch.__aenter__()
    try:
        created = await writer.create(probe("shared"))
        for watch in watches:
            event = await next_event(watch)
            assert (event.type, event.object) == (EventType.ADDED, created)
    finally:
        for watch in watches:
            await watch.aclose()


async def test_watch_from_compacted_history_raises_expired(store_backend: Backend) -> None:
    if not store_backend.compacts_on_request:
        pytest.skip(f"{store_backend.name} keeps history its own way")
    store = await store_backend.new_store(history_limit=5)
    revisions = [rv(await store.create(probe(f"o-{i}"))) for i in range(12)]
    last = revisions[-1]

    with pytest.raises(Expired) as caught:
        async with store.watch(PROBE, resource_version=str(revisions[0])) as events:
            await next_event(events)
    assert caught.value.resource_version == str(revisions[0])

    with pytest.raises(Expired):
        async with store.watch(PROBE, resource_version=str(last - 6)) as events:
            await next_event(events)

    async with store.watch(PROBE, resource_version=str(last - 5)) as events:
        seen = await events_through(events, last)
    assert [int(e.resource_version) for e in seen] == list(range(last - 4, last + 1))


async def test_calls_after_close_raise_store_closed(store_backend: Backend) -> None:
    store = await store_backend.new_store()
    created = await store.create(probe("a"))
    await store.close()
    with pytest.raises(StoreClosed):
        await store.get(PROBE, "default", "a")
    with pytest.raises(StoreClosed):
        await store.replace(created)
    with pytest.raises(StoreClosed):
        store.watch(PROBE)
    await store.close()  # closing twice is harmless
    other = await store_backend.new_store()
    assert await other.get(PROBE, "default", "a") == created


async def test_a_bookmark_tells_a_quiet_watch_where_to_resume(store_backend: Backend) -> None:
    """Writes of another kind move the history on; the bookmarks a topic watch gets keep a
    place to resume from that is still in it."""
    if not store_backend.compacts_on_request:
        pytest.skip(f"{store_backend.name} keeps history its own way")
    store = await store_backend.new_store(history_limit=5)
    start = (await store.list(PROBE)).resource_version
    bookmark: str | None = None
    async with store.watch(PROBE, resource_version=start, allow_bookmarks=True) as events:
        async with asyncio.timeout(TIMEOUT):
            for i in itertools.count():
                written = rv(await store.create(lease_object(f"l-{i}")))
                with contextlib.suppress(TimeoutError):
                    event = await next_event(events, 0.02)
                    assert event.type is EventType.BOOKMARK
                    assert set(event.object["metadata"]) == {"resourceVersion"}
                    if int(event.resource_version) >= int(start) + 6:
                        assert int(event.resource_version) <= written
                        bookmark = event.resource_version
                        break
    assert bookmark is not None
    with pytest.raises(Expired):
        async with store.watch(PROBE, resource_version=start) as events:
            await next_event(events)
    after = await store.create(probe("after"))
    async with store.watch(PROBE, resource_version=bookmark) as events:
        event = await next_event(events)
    assert (event.type, event.object) == (EventType.ADDED, after)
