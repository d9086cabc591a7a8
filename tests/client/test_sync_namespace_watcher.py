"""The blocking namespace watch: a plain script in a thread of its own, against a scripted
broker (namespace_fake_broker.py) in the test's loop."""

from __future__ import annotations

import asyncio
import threading

from namespace_fake_broker import WAIT, fake_broker

from scalable_topics.client import SyncClient, TopicSetChange
from support.eventually import eventually


def qualified(*names: str) -> frozenset[str]:
    return frozenset(f"team/{name}" for name in names)


async def test_a_script_reads_the_set_iterates_changes_and_closes() -> None:
    listening = threading.Event()
    seen: dict[str, object] = {}

    def script(url: str) -> None:
        with SyncClient(url) as client:
            watcher = client.watch_namespace("team", {"tier": "gold"})
            seen["namespace"], seen["filters"] = watcher.namespace, dict(watcher.filters)
            seen["initial"] = watcher.topics
            changes = iter(watcher)
            listening.set()
            got: list[TopicSetChange] = []
            for change in changes:
                got.append(change)
                if len(got) == 2:
                    break
            seen["changes"], seen["after"] = got, watcher.topics
            watcher.close()
            seen["after close"] = list(watcher)  # ends at once, quietly

    async with fake_broker(topics={"a"}) as broker:
        running = asyncio.ensure_future(asyncio.to_thread(script, broker.url))
        await broker.next_watch()
        await eventually(listening.is_set, "the script listening")
        await broker.diff(added=("b",))
        await broker.diff(removed=("a",))
        async with asyncio.timeout(WAIT):
            await running
        closed = await asyncio.wait_for(broker.closes.get(), WAIT)
    assert closed.watch_id == 1
    assert seen == {
        "namespace": "team",
        "filters": {"tier": "gold"},
        "initial": qualified("a"),
        "changes": [
            TopicSetChange(qualified("b"), frozenset(), qualified("a", "b")),
            TopicSetChange(frozenset(), qualified("a"), qualified("b")),
        ],
        "after": qualified("b"),
        "after close": [],
    }
