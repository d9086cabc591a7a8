"""A DAG watch served by a real `stctl broker` process, while another process (this test)
writes the store file: the broker sees those commits through its store watches."""

from __future__ import annotations

from typing import Any

import pytest
from dag_objects import AT, create_topic, put_segments, write_layout
from dag_watch_client import DagWatchClient

from scalable_topics.model.layout import SegmentLayout
from scalable_topics.model.resources import ScalableTopic
from scalable_topics.protocol import ErrorCode, TopicUpdate, WatchClosed
from scalable_topics.store import EmbeddedStore
from support.broker_process import BrokerProcess
from support.leases import put_lease

pytestmark = pytest.mark.slow

NS, TOPIC = "shop", "orders"


async def test_a_broker_process_serves_the_dag_pushes_a_split_and_closes_on_delete(
    broker: BrokerProcess, store: EmbeddedStore
) -> None:
    layout = SegmentLayout.initial(2, AT)
    await create_topic(store, NS, TOPIC, layout)
    await put_segments(store, NS, TOPIC, layout, {0: "ws://b0", 1: "ws://b1"})
    await put_lease(store, "controller-0", "http://c0")

    client = await DagWatchClient.connect(broker.url)
    try:
        # The broker answers from its informers, which may be a moment behind the writes
        # above: whatever the first answer missed is pushed right after it.
        view: Any = await client.watch(1, "shop/orders")
        while (view.controller_endpoint, [n.broker_url for n in view.segments]) != (
            "http://c0",
            ["ws://b0", "ws://b1"],
        ):
            assert view.epoch == 0
            view = await client.next_push(1)
            assert isinstance(view, TopicUpdate)

        after = layout.split(0, AT)
        await put_segments(store, NS, TOPIC, after, {2: "ws://b1", 3: "ws://b0"})
        await write_layout(store, NS, TOPIC, after)
        push = await client.next_push(1)
        assert isinstance(push, TopicUpdate)
        assert (push.request_id, push.epoch) == (None, 1)
        assert [(n.segment_id, n.broker_url) for n in push.segments] == [
            (0, "ws://b0"),
            (1, "ws://b1"),
            (2, "ws://b1"),
            (3, "ws://b0"),
        ]

        await store.delete(ScalableTopic.KIND, NS, TOPIC)
        closed = await client.next_push(1)
        assert isinstance(closed, WatchClosed) and closed.code is ErrorCode.TOPIC_NOT_FOUND
    finally:
        await client.close()
