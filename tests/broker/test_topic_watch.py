"""DAG watch sessions on a real broker application on loopback, over the embedded store.

The tests write ScalableTopic, Segment and Lease objects straight into the store (no
controller) and read what a watching client receives.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import aiohttp
import pytest
from dag_objects import AT, create_topic, put_segment, put_segments, write_layout
from dag_watch_client import DagWatchClient, Refused

from scalable_topics.broker.app import TOPIC_WATCHES_KEY
from scalable_topics.broker.topic_watch import TopicWatchHub
from scalable_topics.client.pool import ConnectionPool
from scalable_topics.client.topic_watcher import TopicWatcher
from scalable_topics.model.hash_range import HashRange
from scalable_topics.model.layout import SegmentLayout
from scalable_topics.model.resources import ScalableTopic, Segment, segment_object_name
from scalable_topics.model.segment import SegmentState
from scalable_topics.protocol import Command, ErrorCode, SegmentNode, TopicUpdate, WatchClosed
from scalable_topics.store import EmbeddedStore
from support.eventually import eventually
from support.leases import put_lease
from support.servers import broker_server

NS, TOPIC = "shop", "orders"
B0, B1, B2 = "ws://broker-0:6650", "ws://broker-1:6650", "ws://broker-2:6650"
CONTROLLER = "http://controller-0:8080"
WAIT = 20.0


@dataclass
class Broker:
    store: EmbeddedStore
    hub: TopicWatchHub
    url: str


@pytest.fixture
async def app_broker(tmp_path: Path) -> AsyncIterator[Broker]:
    async with await EmbeddedStore.open(tmp_path / "store.db") as store:
        server = broker_server(store, tmp_path / "broker")
        await server.start_server()
        try:
            yield Broker(store, server.app[TOPIC_WATCHES_KEY], f"http://127.0.0.1:{server.port}")
        finally:
            await server.close()


@pytest.fixture
async def client(app_broker: Broker) -> AsyncIterator[DagWatchClient]:
    client = await DagWatchClient.connect(app_broker.url)
    try:
        yield client
    finally:
        await client.close()


async def split_topic(broker: Broker) -> SegmentLayout:
    """shop/orders: two initial segments, segment 0 split into 2 and 3 (epoch 1), all placed,
    and a controller elected; returns once the broker's informers show all of it."""
    store = broker.store
    layout = SegmentLayout.initial(2, AT).split(0, AT)
    await create_topic(store, NS, TOPIC, layout)
    await put_segments(store, NS, TOPIC, layout, {0: B0, 1: B1, 2: B0, 3: B2})
    await put_lease(store, "controller-0", CONTROLLER)
    informers = broker.hub.informers

    def seen() -> bool:
        placed = [
            o for o in informers.segments_of(NS, TOPIC) if (o.get("status") or {}).get("broker")
        ]
        return (
            len(placed) == 4
            and ((informers.topics.get(NS, TOPIC) or {}).get("status") or {}).get("epoch") == 1
            and informers.leader_endpoint(NS, TOPIC) == CONTROLLER
        )

    await eventually(seen, "the broker's informers show the split topic")
    return layout


async def test_the_first_update_carries_the_whole_dag_brokers_and_controller(
    app_broker: Broker, client: DagWatchClient
) -> None:
    await split_topic(app_broker)
    update = await client.watch(1, "shop/orders")
    assert update.epoch == 1
    assert update.controller_endpoint == CONTROLLER
    assert update.segments == (
        SegmentNode(0, HashRange(0x0000, 0x7FFF), SegmentState.SEALED, (), (2, 3), B0),
        SegmentNode(1, HashRange(0x8000, 0xFFFF), SegmentState.ACTIVE, (), (), B1),
        SegmentNode(2, HashRange(0x0000, 0x3FFF), SegmentState.ACTIVE, (0,), (), B0),
        SegmentNode(3, HashRange(0x4000, 0x7FFF), SegmentState.ACTIVE, (0,), (), B2),
    )


async def test_a_split_is_pushed_once_with_the_new_epoch_and_nodes(
    app_broker: Broker, client: DagWatchClient
) -> None:
    store = app_broker.store
    layout = await split_topic(app_broker)
    await client.watch(1, "shop/orders")

    # What a controller writes for a split of segment 1: children placed first, the layout
    # next, the parent's state last. One push carries all of it.
    after = layout.split(1, AT)
    await put_segments(store, NS, TOPIC, after, {4: B1, 5: B2})
    await write_layout(store, NS, TOPIC, after)
    parent = segment_object_name(TOPIC, after.get(1).descriptor)
    await store.patch_status(Segment.KIND, NS, parent, {"status": {"state": "Terminated"}})

    push = await client.next_push(1)
    assert isinstance(push, TopicUpdate)
    assert (push.watch_id, push.request_id, push.epoch) == (1, None, 2)
    assert [
        (n.segment_id, n.state, n.parent_ids, n.child_ids, n.broker_url) for n in push.segments
    ] == [
        (0, SegmentState.SEALED, (), (2, 3), B0),
        (1, SegmentState.SEALED, (), (4, 5), B1),
        (2, SegmentState.ACTIVE, (0,), (), B0),
        (3, SegmentState.ACTIVE, (0,), (), B2),
        (4, SegmentState.ACTIVE, (1,), (), B1),
        (5, SegmentState.ACTIVE, (1,), (), B2),
    ]
    assert push.controller_endpoint == CONTROLLER

    # Writes that change nothing a watch reports push nothing: the next push is the next change.
    await store.patch_status(Segment.KIND, NS, parent, {"status": {"load": {"msgRateIn": 12.5}}})
    await store.patch_status(
        ScalableTopic.KIND, NS, TOPIC, {"status": {"phase": "Ready", "activeSegments": 4}}
    )
    await put_lease(store, "controller-0", CONTROLLER)  # a renewal
    await put_segment(store, NS, TOPIC, after.get(5), B0)  # segment 5 moved to broker 0
    push = await client.next_push(1)
    assert isinstance(push, TopicUpdate)
    assert push.epoch == 2
    assert [n.broker_url for n in push.segments] == [B0, B1, B0, B2, B1, B0]
    await client.round_trip()
    assert client.pushes[1].empty()


async def test_a_new_controller_and_a_released_lease_are_pushed(
    app_broker: Broker, client: DagWatchClient
) -> None:
    await split_topic(app_broker)
    await client.watch(1, "shop/orders")

    await put_lease(app_broker.store, "controller-1", "http://controller-1:8080", 1)
    push = await client.next_push(1)
    assert isinstance(push, TopicUpdate)
    assert (push.epoch, push.controller_endpoint) == (1, "http://controller-1:8080")

    await put_lease(app_broker.store, "", None, 1)  # released: nobody leads
    push = await client.next_push(1)
    assert isinstance(push, TopicUpdate)
    assert push.controller_endpoint is None


async def test_watch_close_stops_the_pushes_of_that_watch_only(
    app_broker: Broker, client: DagWatchClient
) -> None:
    store = app_broker.store
    layout = await split_topic(app_broker)
    await client.watch(1, "shop/orders")
    await client.watch(2, "shop/orders")
    assert app_broker.hub.watch_count == 2

    await client.close_watch(1)
    assert (app_broker.hub.watch_count, app_broker.hub.topic_count) == (1, 1)
    after = layout.split(1, AT)
    await write_layout(store, NS, TOPIC, after)
    push = await client.next_push(2)
    assert isinstance(push, TopicUpdate) and push.epoch == 2
    await client.round_trip()
    assert client.pushes[1].empty()

    # The id is free again: a new watch under it gets its own first answer.
    update = await client.watch(1, "shop/orders")
    assert update.epoch == 2
    with pytest.raises(Refused) as refused:
        await client.close_watch(7)
    assert refused.value.code is ErrorCode.UNKNOWN_WATCH


async def test_a_client_watcher_closed_releases_its_watch_at_the_broker(
    app_broker: Broker,
) -> None:
    """The client's TopicWatcher sends WatchClose: the broker lets the watch go while the
    connection, which other producers and consumers share, stays open."""
    await split_topic(app_broker)
    async with aiohttp.ClientSession() as http:
        pool = ConnectionPool(http, client_name="tests", auth_token=None, connect_seconds=WAIT)
        try:
            url = app_broker.url.replace("http://", "ws://")
            watcher = TopicWatcher(f"{NS}/{TOPIC}", pool, [url])
            await watcher.start(WAIT)
            assert app_broker.hub.watch_count == 1
            await watcher.close()
            await eventually(lambda: app_broker.hub.watch_count == 0, "the watch released")
            assert (await pool.get(url)).is_open
        finally:
            await pool.close()


async def test_deleting_the_topic_closes_its_watches(
    app_broker: Broker, client: DagWatchClient
) -> None:
    await split_topic(app_broker)
    await client.watch(1, "shop/orders")
    await app_broker.store.delete(ScalableTopic.KIND, NS, TOPIC)

    closed = await client.next_push(1)
    assert isinstance(closed, WatchClosed)
    assert (closed.watch_id, closed.code) == (1, ErrorCode.TOPIC_NOT_FOUND)
    assert "shop/orders" in closed.message
    assert (app_broker.hub.watch_count, app_broker.hub.topic_count) == (0, 0)
    with pytest.raises(Refused) as refused:
        await client.close_watch(1)
    assert refused.value.code is ErrorCode.UNKNOWN_WATCH


async def test_a_topic_created_again_under_the_same_name_closes_the_old_watch(
    app_broker: Broker, client: DagWatchClient
) -> None:
    store = app_broker.store
    await split_topic(app_broker)
    await client.watch(1, "shop/orders")
    # Deleted and created again before the broker read it in between: a new uid.
    await store.delete(ScalableTopic.KIND, NS, TOPIC)
    await create_topic(store, NS, TOPIC, SegmentLayout.initial(1, AT))

    closed = await client.next_push(1)
    assert isinstance(closed, WatchClosed) and closed.code is ErrorCode.TOPIC_NOT_FOUND
    update = await client.watch(2, "shop/orders")
    assert update.epoch == 0 and [n.segment_id for n in update.segments] == [0]


async def test_a_topic_without_a_layout_is_answered_when_its_first_layout_is_written(
    app_broker: Broker, client: DagWatchClient
) -> None:
    store = app_broker.store
    await create_topic(store, NS, TOPIC, None)
    answer = client.start_request_watch(1, "shop/orders")
    await client.round_trip()
    assert not answer.done()

    layout = SegmentLayout.initial(2, AT)
    await put_segments(store, NS, TOPIC, layout, {0: B0, 1: B1})
    await write_layout(store, NS, TOPIC, layout)
    update = await asyncio.wait_for(answer, WAIT)
    assert isinstance(update, TopicUpdate)
    assert (update.request_id is not None, update.epoch) == (True, 0)
    assert [n.broker_url for n in update.segments] == [B0, B1]
    assert update.controller_endpoint is None


@pytest.mark.parametrize(
    ("topic", "code", "names"),
    [
        ("orders", ErrorCode.INVALID_REQUEST, "namespace/name"),
        ("shop/Orders", ErrorCode.INVALID_REQUEST, "'Orders'"),
        ("/orders", ErrorCode.INVALID_REQUEST, "namespace must not be empty"),
        (f"{'n' * 64}/orders", ErrorCode.INVALID_REQUEST, "(it has 64 characters)"),
        ("shop/invoices", ErrorCode.TOPIC_NOT_FOUND, "shop/invoices"),
    ],
)
async def test_bad_watch_requests_are_refused_naming_the_problem(
    app_broker: Broker, client: DagWatchClient, topic: str, code: ErrorCode, names: str
) -> None:
    await split_topic(app_broker)
    with pytest.raises(Refused) as refused:
        await client.watch(1, topic)
    assert refused.value.code is code
    assert names in refused.value.message
    # The connection carries on, and the id was not taken.
    assert (await client.watch(1, "shop/orders")).epoch == 1


async def test_a_watch_id_in_use_is_refused(app_broker: Broker, client: DagWatchClient) -> None:
    await split_topic(app_broker)
    await client.watch(1, "shop/orders")
    with pytest.raises(Refused) as refused:
        await client.watch(1, "shop/orders")
    assert refused.value.code is ErrorCode.ID_IN_USE
    assert "watch id 1" in refused.value.message
    assert app_broker.hub.watch_count == 1


async def test_many_watches_share_the_brokers_store_watches_and_leave_none_behind(
    app_broker: Broker,
) -> None:
    store, hub = app_broker.store, app_broker.hub
    topics = [f"t{index}" for index in range(4)]
    layout = SegmentLayout.initial(2, AT)
    for name in topics:
        await create_topic(store, NS, name, layout)
        await put_segments(store, NS, name, layout, {0: B0, 1: B1})
    await create_topic(store, NS, "unplaced", None)
    first = await DagWatchClient.connect(app_broker.url)
    await first.watch(1, "shop/t0")
    # A push through each kind proves the hub's three store watches are established.
    await put_lease(store, "controller-0", CONTROLLER)
    assert isinstance(await first.next_push(1), TopicUpdate)
    await put_segment(store, NS, "t0", layout.get(0), B2)
    assert isinstance(await first.next_push(1), TopicUpdate)
    await write_layout(store, NS, "t0", layout.split(0, AT))
    assert isinstance(await first.next_push(1), TopicUpdate)
    baseline = store.open_watches

    clients = [await DagWatchClient.connect(app_broker.url) for _ in range(6)]
    unplaced: list[asyncio.Future[Command]] = []
    for client in clients:
        for watch_id, name in enumerate(topics, start=1):
            await client.watch(watch_id, f"{NS}/{name}")
        unplaced.append(client.start_request_watch(99, f"{NS}/unplaced"))  # waits for a layout
    for client in clients:
        await client.round_trip()  # its WatchTopic for the unplaced topic has been read
    assert hub.watch_count == 1 + len(clients) * (len(topics) + 1)
    assert hub.topic_count == len(topics) + 1
    assert store.open_watches == baseline

    for name in topics:
        await write_layout(store, NS, name, layout.split(1, AT))
    for client in clients:
        for watch_id in range(1, len(topics) + 1):
            push = await client.next_push(watch_id)
            assert isinstance(push, TopicUpdate) and push.epoch == 1
    assert store.open_watches == baseline

    for client in [first, *clients]:
        await client.close()
    # The watches of the topic without a layout were never answered.
    assert all(isinstance(f.exception(), ConnectionError) for f in unplaced)
    await eventually(lambda: hub.watch_count == 0, "every watch released")
    assert hub.topic_count == 0
    assert store.open_watches == baseline
    await eventually(
        lambda: not [t for t in asyncio.all_tasks() if t.get_name().startswith("topic feed ")],
        "every topic feed task ended",
    )
