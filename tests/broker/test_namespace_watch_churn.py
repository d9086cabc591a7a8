"""Review finding 1 of the namespace watcher (seed: PIP-468), as a test: watch sessions that
register a store listener each and never remove it leak, and every later change visits all of
them. Here 10,000 namespace watches are opened and closed in raw frames on a few connections;
the broker's registry is then back at its size before them, and a topic change costs what it
cost before: the same informer handler calls, filter sets tested and watches told."""

from __future__ import annotations

import asyncio
from pathlib import Path

from test_namespace_watch import NS, OTHER_NS, connected, diff, registry, seen, topic

from scalable_topics.broker.namespace_watch import NamespaceWatchRegistry
from scalable_topics.broker.topic_admin import INFORMERS_KEY
from scalable_topics.protocol import NamespaceWatchClose, Success, topic_set_hash
from scalable_topics.store import EmbeddedStore
from scalable_topics.store.informer import Informer
from support.eventually import eventually
from support.servers import broker_server
from support.wire_client import WireClient

SESSIONS = 10_000
CONNECTIONS = 4
BATCH = 250  # watches one connection opens, then closes, at a time
NAMESPACES = (NS, OTHER_NS, "third", "fourth")
FILTERS = ({}, {"env": "prod"}, {"env": "prod", "team": "a"})


async def cost_of_a_change(
    probe: WireClient,
    store: EmbeddedStore,
    watches: NamespaceWatchRegistry,
    topics: Informer,
    name: str,
) -> tuple[int, int, int, int]:
    """Create topic ``name`` in NS, which the probe's watch 1 follows, and return what its
    change cost once the probe has it: informer handler calls, changes the registry received,
    filter sets it tested, watches it told."""

    def counters() -> tuple[int, int, int, int]:
        return (
            topics.deliveries,
            watches.changes_received,
            watches.groups_visited,
            watches.watches_visited,
        )

    before = counters()
    await store.create(topic(name))
    assert await probe.namespace_update(1) == diff(added=(name,))
    after = counters()
    return (
        after[0] - before[0],
        after[1] - before[1],
        after[2] - before[2],
        after[3] - before[3],
    )


async def open_and_close(client: WireClient, first_id: int, hashes: dict[str, int]) -> int:
    """Open BATCH watches, some with the hash of their set (nothing is sent to them), then
    close them all; every close answered Success, no watch refused. The snapshots that went
    out before the close (the others were dropped by it)."""
    ids = range(first_id, first_id + BATCH)
    for watch_id in ids:
        namespace = NAMESPACES[watch_id % len(NAMESPACES)]
        filters = FILTERS[watch_id % len(FILTERS)]
        known = hashes[namespace] if watch_id % 2 and not filters else None
        await client.watch_namespace(watch_id, namespace, filters, known)
    closing = [
        await client.start_request(NamespaceWatchClose(client.next_id(), watch_id))
        for watch_id in ids
    ]
    answers = await asyncio.gather(*closing)
    assert all(isinstance(answer, Success) for answer in answers), answers
    updates = [queue.get_nowait() for queue in client.namespace_updates.values() if queue.qsize()]
    assert all(update.snapshot is not None for update in updates), updates
    client.namespace_updates.clear()
    return len(updates)


async def test_ten_thousand_watches_opened_and_closed_leave_nothing_behind(
    store: EmbeddedStore, tmp_path: Path
) -> None:
    for namespace in NAMESPACES:
        await store.create(topic("existing", namespace=namespace))
    server = broker_server(store, tmp_path / "broker")
    await server.start_server()
    try:
        await seen(server, store)
        watches = registry(server)
        topics = server.app[INFORMERS_KEY].topics
        assert (watches.watch_count, watches.group_count, watches.namespace_count) == (0, 0, 0)
        hashes = {namespace: topic_set_hash(["existing"]) for namespace in NAMESPACES}
        async with connected(server) as probe:
            await probe.watch_namespace(1, NS)
            assert await probe.namespace_snapshot(1) == ("existing",)
            before = await cost_of_a_change(probe, store, watches, topics, "probe-before")
            hashes[NS] = topic_set_hash(["existing", "probe-before"])

            clients = [
                await WireClient.connect(f"http://127.0.0.1:{server.port}")
                for _ in range(CONNECTIONS)
            ]
            try:
                first, snapshots = 1000, 0
                while first - 1000 < SESSIONS:
                    sent = await asyncio.gather(
                        *(
                            open_and_close(client, first + index * BATCH, hashes)
                            for index, client in enumerate(clients)
                        )
                    )
                    snapshots += sum(sent)
                    first += BATCH * CONNECTIONS
                opened = first - 1000
            finally:
                for client in clients:
                    await client.close()
            assert opened == SESSIONS and snapshots > 0
            # Only the probe's watch is left, and a change costs what it did before.
            assert (watches.watch_count, watches.group_count, watches.namespace_count) == (1, 1, 1)
            after = await cost_of_a_change(probe, store, watches, topics, "probe-after")
            assert after == before
            assert before[1:] == (1, 1, 1)  # one change, one filter set, one watch
        await eventually(lambda: watches.watch_count == 0, "the probe's watch goes")
        assert (watches.group_count, watches.namespace_count) == (0, 0)
    finally:
        await server.close()
