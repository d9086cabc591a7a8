"""Random writes through several store instances: the watch streams replay to the final lists."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from dataclasses import dataclass

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from store_testkit import PROBE, Backend, events_through, probe

from scalable_topics.store import (
    AlreadyExists,
    Conflict,
    EventType,
    NotFound,
    Object,
    Store,
    WatchEvent,
)

NAMES = [f"obj-{i}" for i in range(4)]
COLORS = ["red", "blue", None]
FINALIZER = "example.com/hold"
SELECTOR = "color=red"


@dataclass(frozen=True)
class Op:
    action: str
    name: str
    writer: int
    color: str | None
    value: int


ops_strategy = st.lists(
    st.builds(
        Op,
        action=st.sampled_from(
            ["create", "replace", "relabel", "status", "delete", "hold", "release", "stale"]
        ),
        name=st.sampled_from(NAMES),
        writer=st.integers(0, 2),
        color=st.sampled_from(COLORS),
        value=st.integers(0, 3),
    ),
    max_size=24,
)


@pytest.fixture
async def trio(store_backend: Backend) -> list[Store]:
    return [await store_backend.new_store() for _ in range(3)]


async def apply(store: Store, other: Store, namespace: str, op: Op) -> None:
    """One write; the errors a racing writer can meet are part of the game."""
    with contextlib.suppress(NotFound, AlreadyExists, Conflict):
        match op.action:
            case "create":
                labels = {"color": op.color} if op.color else None
                await store.create(probe(op.name, namespace, labels=labels, spec={"v": op.value}))
            case "replace":
                current = await store.get(PROBE, namespace, op.name)
                await store.replace({**current, "spec": {"v": op.value}})
            case "relabel":
                relabel = {"metadata": {"labels": {"color": op.color}}}
                await store.patch(PROBE, namespace, op.name, relabel)
            case "status":
                await store.patch_status(PROBE, namespace, op.name, {"status": {"v": op.value}})
            case "delete":
                await store.delete(PROBE, namespace, op.name)
            case "hold":
                hold = {"metadata": {"finalizers": [FINALIZER]}}
                await store.patch(PROBE, namespace, op.name, hold)
            case "release":
                await store.patch(PROBE, namespace, op.name, {"metadata": {"finalizers": None}})
            case "stale":  # a writer that lost the race gets Conflict
                read = await store.get(PROBE, namespace, op.name)
                await other.patch(PROBE, namespace, op.name, {"spec": {"moved": uuid.uuid4().hex}})
                with pytest.raises(Conflict):
                    await store.replace({**read, "spec": {"stale": True}})


def replay(events: list[WatchEvent]) -> dict[str, Object]:
    state: dict[str, Object] = {}
    for event in events:
        name = event.object["metadata"]["name"]
        if event.type is EventType.ADDED:
            assert name not in state, f"ADDED for {name}, which exists"
            state[name] = event.object
        elif event.type is EventType.MODIFIED:
            assert name in state, f"MODIFIED for {name}, which does not exist"
            state[name] = event.object
        else:
            assert state.pop(name, None) is not None, f"DELETED for {name}, which does not exist"
    return state


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(ops=ops_strategy)
async def test_watch_streams_replay_to_the_final_list(trio: list[Store], ops: list[Op]) -> None:
    namespace = f"ns-{uuid.uuid4().hex[:12]}"  # examples share the backend, not namespaces
    start = (await trio[0].list(PROBE, namespace)).resource_version
    all_events = trio[1].watch(PROBE, namespace, resource_version=start)
    red_events = trio[2].watch(PROBE, namespace, label_selector=SELECTOR)
    async with all_events, red_events:
        for i in range(0, len(ops), 3):  # a few writers at a time, through different instances
            await asyncio.gather(
                *(
                    apply(trio[op.writer], trio[(op.writer + 1) % 3], namespace, op)
                    for op in ops[i : i + 3]
                )
            )
        final = await trio[0].list(PROBE, namespace)
        final_red = await trio[0].list(PROBE, namespace, label_selector=SELECTOR)
        marker = await trio[0].create(probe("marker", namespace, labels={"color": "red"}))
        seen_all = await events_through(all_events, int(marker["metadata"]["resourceVersion"]))
        seen_red = await events_through(red_events, int(marker["metadata"]["resourceVersion"]))

    revisions = [int(e.resource_version) for e in seen_all]
    assert revisions == sorted(set(revisions))
    assert seen_all[-1].object == marker
    assert seen_red[-1].object == marker
    expected = {o["metadata"]["name"]: o for o in final.items}
    assert replay(seen_all[:-1]) == expected
    assert replay(seen_red[:-1]) == {o["metadata"]["name"]: o for o in final_red.items}
