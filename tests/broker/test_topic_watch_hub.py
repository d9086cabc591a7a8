"""The topic watch hub on its own, over informers of the embedded store: gaps in their store
watches, store failures, corrupt layouts, and what one client watch sends."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest
from dag_objects import AT, create_topic, write_layout

from scalable_topics.broker.topic_view import TopicView, build_view
from scalable_topics.broker.topic_watch import TopicWatch, TopicWatchHub
from scalable_topics.model.layout import SegmentLayout
from scalable_topics.model.resources import ScalableTopic
from scalable_topics.protocol import Command, Error, ErrorCode, TopicUpdate, WatchClosed
from scalable_topics.store import EmbeddedStore, Expired, StoreError, Watch
from scalable_topics.store.informers import Informers
from scalable_topics.store.kinds import LEASE
from support.leases import SYSTEM_NAMESPACE, put_lease

NS, TOPIC = "shop", "orders"
WAIT = 20.0


class Sink:
    """What a session would send, and which watches the hub ended."""

    def __init__(self) -> None:
        self.frames: asyncio.Queue[Command] = asyncio.Queue()
        self.ended: list[TopicWatch] = []

    async def send(self, command: Command) -> None:
        self.frames.put_nowait(command)

    async def next(self) -> Command:
        async with asyncio.timeout(WAIT):
            return await self.frames.get()


class GappyStore:
    """The embedded store, except that its first Lease watch misses events and expires (a gap
    its informer closes by listing again), and that it fails every call while ``failing``."""

    def __init__(self, store: EmbeddedStore) -> None:
        self._store = store
        self.gap_over = asyncio.Event()
        self.lease_watches = 0
        self.failing = False

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)

    async def list(self, *args: Any, **kwargs: Any) -> Any:
        if self.failing:
            raise StoreError("the store is unreachable")
        return await self._store.list(*args, **kwargs)

    def watch(self, kind: str, *args: Any, **kwargs: Any) -> Watch:
        if self.failing:
            raise StoreError("the store is unreachable")
        if kind == LEASE.kind:
            self.lease_watches += 1
            if self.lease_watches == 1:
                return _StalledWatch(self.gap_over)  # type: ignore[return-value]
        return self._store.watch(kind, *args, **kwargs)


class _StalledWatch:
    """A store watch that delivers nothing until released, then raises Expired: a gap."""

    def __init__(self, released: asyncio.Event) -> None:
        self._released = released

    async def __aenter__(self) -> _StalledWatch:
        return self

    async def __aexit__(self, *exc: object) -> None:
        return None

    def __aiter__(self) -> _StalledWatch:
        return self

    async def __anext__(self) -> Any:
        await self._released.wait()
        raise Expired("1", "2")


async def started(store: Any) -> AsyncIterator[TopicWatchHub]:
    informers = Informers(store, SYSTEM_NAMESPACE)
    informers.start()
    hub = TopicWatchHub(informers)
    await hub.start()
    try:
        yield hub
    finally:
        await hub.stop()
        await informers.stop()


@pytest.fixture
async def hub(store: EmbeddedStore) -> AsyncIterator[TopicWatchHub]:
    async for hub in started(store):
        yield hub


def open_watch(
    hub: TopicWatchHub, sink: Sink, watch_id: int = 1, request_id: int = 10
) -> TopicWatch:
    return hub.watch(NS, TOPIC, watch_id, request_id, sink.send, sink.ended.append)


async def test_a_change_missed_in_a_gap_of_a_store_watch_is_pushed_after_it(
    store: EmbeddedStore,
) -> None:
    gappy = GappyStore(store)
    layout = SegmentLayout.initial(1, AT)
    await create_topic(store, NS, TOPIC, layout)
    await put_lease(store, "controller-0", "http://c0")
    async for hub in started(gappy):
        sink = Sink()
        open_watch(hub, sink)
        first = await sink.next()
        assert isinstance(first, TopicUpdate) and first.controller_endpoint == "http://c0"

        await put_lease(store, "controller-1", "http://c1", 1)  # in the gap
        gappy.gap_over.set()
        push = await sink.next()
        assert isinstance(push, TopicUpdate)
        assert (push.request_id, push.controller_endpoint) == (None, "http://c1")
        assert gappy.lease_watches == 2


async def test_watches_are_served_from_the_caches_while_the_store_is_unreachable(
    store: EmbeddedStore,
) -> None:
    gappy = GappyStore(store)
    gappy.gap_over.set()
    await create_topic(store, NS, TOPIC, SegmentLayout.initial(1, AT))
    async for hub in started(gappy):
        established = Sink()
        open_watch(hub, established, watch_id=1)
        assert isinstance(await established.next(), TopicUpdate)

        gappy.failing = True
        later = Sink()
        open_watch(hub, later, watch_id=2, request_id=20)
        answer = await later.next()
        assert isinstance(answer, TopicUpdate) and (answer.request_id, answer.epoch) == (20, 0)

        # Both catch up once the store answers again.
        await write_layout(store, NS, TOPIC, SegmentLayout.initial(1, AT).split(0, AT))
        gappy.failing = False
        for sink in (established, later):
            push = await sink.next()
            assert isinstance(push, TopicUpdate) and push.epoch == 1
            assert sink.ended == []


async def test_a_corrupt_layout_refuses_new_watches_and_keeps_established_ones(
    store: EmbeddedStore, hub: TopicWatchHub
) -> None:
    await create_topic(store, NS, TOPIC, SegmentLayout.initial(2, AT))
    established = Sink()
    open_watch(hub, established, watch_id=1)
    assert isinstance(await established.next(), TopicUpdate)

    # Segment 1 vanishes from the layout: the active ranges no longer cover the hash space.
    corrupt = SegmentLayout.initial(2, AT).to_status()
    corrupt["segments"] = corrupt["segments"][:1]
    written = await store.patch_status(ScalableTopic.KIND, NS, TOPIC, {"status": corrupt})
    async with asyncio.timeout(WAIT):  # the hub's cache has the corrupt layout
        while hub.informers.topics.get(NS, TOPIC) != written:
            await asyncio.sleep(0.01)
    refused = Sink()
    open_watch(hub, refused, watch_id=2, request_id=20)
    error = await refused.next()
    assert isinstance(error, Error)
    assert (error.request_id, error.code) == (20, ErrorCode.INTERNAL_ERROR)
    assert "layout of topic shop/orders is corrupt" in error.message

    await write_layout(store, NS, TOPIC, SegmentLayout.initial(2, AT).split(1, AT))
    push = await established.next()
    assert isinstance(push, TopicUpdate) and push.epoch == 1


async def test_stopping_the_hub_closes_answered_watches_and_refuses_waiting_ones(
    store: EmbeddedStore,
) -> None:
    await create_topic(store, NS, TOPIC, SegmentLayout.initial(1, AT))
    await create_topic(store, NS, "unplaced", None)
    informers = Informers(store, SYSTEM_NAMESPACE)
    informers.start()
    hub = TopicWatchHub(informers)
    await hub.start()
    answered, waiting = Sink(), Sink()
    open_watch(hub, answered)
    assert isinstance(await answered.next(), TopicUpdate)
    hub.watch(NS, "unplaced", 5, 50, waiting.send, waiting.ended.append)
    await hub.stop()

    closed = await answered.next()
    assert isinstance(closed, WatchClosed) and closed.code is ErrorCode.SERVICE_NOT_READY
    error = await waiting.next()
    assert isinstance(error, Error) and (error.request_id, error.code) == (
        50,
        ErrorCode.SERVICE_NOT_READY,
    )
    assert (hub.watch_count, hub.topic_count) == (0, 0)
    with pytest.raises(Exception, match="shutting down"):
        open_watch(hub, Sink())
    await informers.stop()
    assert store.open_watches == 0


# -- one watch's frames -------------------------------------------------------------------------


def view(epoch: int, endpoint: str | None = None) -> TopicView:
    layout = SegmentLayout.initial(1, AT)
    for _ in range(epoch):
        layout = layout.split(max(s.segment_id for s in layout.active), AT)
    topic = {"metadata": {"name": TOPIC, "uid": "u"}, "status": layout.to_status()}
    built = build_view(topic, [], None)
    assert built is not None
    return TopicView(built.uid, built.epoch, built.segments, endpoint)


async def test_a_watch_answers_once_then_pushes_and_never_repeats_a_view() -> None:
    sink = Sink()
    watch = TopicWatch((NS, TOPIC), 3, 30, sink.send, sink.ended.append)
    watch.offer(view(0))
    assert await sink.next() == TopicUpdate(3, 30, 0, view(0).segments, None)
    watch.offer(view(0))
    watch.offer(view(1))
    watch.offer(view(1, "http://c"))  # replaces the view not sent yet
    assert await sink.next() == TopicUpdate(3, None, 1, view(1).segments, "http://c")
    watch.offer(view(1, "http://c"))
    await watch.close()  # waits for anything in flight
    assert sink.frames.empty()


async def test_views_offered_before_the_answer_went_out_answer_with_the_newest() -> None:
    sink = Sink()
    watch = TopicWatch((NS, TOPIC), 3, 30, sink.send, sink.ended.append)
    watch.offer(view(0))
    watch.offer(view(2))
    assert await sink.next() == TopicUpdate(3, 30, 2, view(2).segments, None)
    await watch.close()
    assert sink.frames.empty()


async def test_a_watch_ended_before_its_first_update_answers_with_an_error() -> None:
    sink = Sink()
    watch = TopicWatch((NS, TOPIC), 3, 30, sink.send, sink.ended.append)
    watch.end(ErrorCode.TOPIC_NOT_FOUND, "no topic shop/orders")
    assert await sink.next() == Error(30, ErrorCode.TOPIC_NOT_FOUND, "no topic shop/orders")
    assert sink.ended == [watch]
    watch.offer(view(0))
    watch.end(ErrorCode.SERVICE_NOT_READY, "again")
    await watch.close()
    assert sink.frames.empty()


async def test_a_watch_ended_after_its_answer_is_closed_after_what_was_sent() -> None:
    sink = Sink()
    watch = TopicWatch((NS, TOPIC), 3, 30, sink.send, sink.ended.append)
    watch.offer(view(0))
    assert isinstance(await sink.next(), TopicUpdate)
    watch.offer(view(1))
    watch.end(ErrorCode.TOPIC_NOT_FOUND, "topic shop/orders was deleted")
    assert await sink.next() == WatchClosed(
        3, ErrorCode.TOPIC_NOT_FOUND, "topic shop/orders was deleted"
    )
    await watch.close()
    assert sink.frames.empty()
