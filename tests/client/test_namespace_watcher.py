"""The client's NamespaceWatcher against scripted brokers on loopback (namespace_fake_broker.py):
what it sends when it watches and watches again, how it paces reconnects, what it makes of
snapshots in parts, diffs, reconnect snapshots and the broker's ends, and its errors."""

from __future__ import annotations

import asyncio
import gc
import logging
from dataclasses import dataclass, field

import pytest
from namespace_fake_broker import WAIT, fake_broker

from scalable_topics.client import (
    Client,
    ClientClosed,
    ClientError,
    ConnectionFailed,
    InvalidRequest,
    NotAuthorized,
    TooManyOpen,
    UnsupportedVersion,
)
from scalable_topics.client.backoff import Backoff
from scalable_topics.client.namespace_watcher import (
    NamespaceWatcher,
    TopicSetChange,
    reconnect_backoff,
)
from scalable_topics.protocol import ErrorCode, WatchEnded, topic_set_hash
from support.eventually import eventually
from support.ports import loopback_socket, port_of

NAMESPACE = "team"


def qualified(*names: str) -> frozenset[str]:
    return frozenset(f"{NAMESPACE}/{name}" for name in names)


@dataclass
class CountingBackoff(Backoff):
    """The watcher's reconnect backoff, noting the attempt number each delay was drawn at
    (0: the first step, the one a reset brings it back to)."""

    attempts: list[int] = field(default_factory=list)

    def next_delay(self) -> float:
        self.attempts.append(self._attempt)
        return super().next_delay()


@dataclass
class Heard:
    changes: list[TopicSetChange] = field(default_factory=list)
    ends: list[ClientError] = field(default_factory=list)

    def listen_to(self, watcher: NamespaceWatcher) -> None:
        watcher.listen(self.changes.append, self.ends.append)


async def test_start_returns_the_set_of_a_snapshot_sent_in_parts() -> None:
    async with fake_broker(topics={"a", "b", "c", "d", "e"}) as broker:
        broker.part_size = 2
        async with Client(broker.url) as client:
            watcher = await client.watch_namespace(NAMESPACE, {"team": "billing"})
            assert watcher.topics == qualified("a", "b", "c", "d", "e")
        watch = await broker.next_watch()
        assert (watch.namespace, watch.filters, watch.current_hash) == (
            NAMESPACE,
            {"team": "billing"},
            None,
        )
        assert [u.snapshot.complete for u in broker.sent if u.snapshot] == [False, False, True]


async def test_diffs_reach_listeners_and_iterations_as_changes() -> None:
    async with fake_broker(topics={"a", "b"}) as broker, Client(broker.url) as client:
        watcher = await client.watch_namespace(NAMESPACE)
        heard = Heard()
        heard.listen_to(watcher)
        changes = aiter(watcher)
        await broker.next_watch()
        await broker.diff(added=("c",), removed=("a",))
        first = await anext(changes)
        assert first == TopicSetChange(qualified("c"), qualified("a"), qualified("b", "c"))
        await broker.diff(added=("b",), removed=("b",))  # deleted and created again
        second = await anext(changes)
        assert second == TopicSetChange(qualified("b"), qualified("b"), qualified("b", "c"))
        assert heard.changes == [first, second]
        assert watcher.topics == qualified("b", "c")


async def test_a_reconnect_with_a_matching_hash_resets_the_backoff_and_changes_nothing() -> None:
    """Review finding 3: with a matching hash the broker sends nothing back; the backoff is
    reset when the watch frame is written, so short drops in a row each wait the first step
    (had it been reset on a snapshot only, the attempts would count up 0, 1, 2...)."""
    drops = 6
    backoff = CountingBackoff(initial=0.1, maximum=30.0)
    async with fake_broker(topics={"a", "b"}) as broker, Client(broker.url) as client:
        watcher = NamespaceWatcher(NAMESPACE, {}, client.pool, [broker.url], backoff=backoff)
        try:
            assert await watcher.start(WAIT) == qualified("a", "b")
            heard = Heard()
            heard.listen_to(watcher)
            await broker.next_watch()
            snapshots = len(broker.sent)
            for _ in range(drops):
                await broker.drop()
                again = await broker.next_watch()
                assert again.current_hash == topic_set_hash({"a", "b"})
            assert len(broker.sent) == snapshots  # the broker stayed silent every time
            assert backoff.attempts == [0] * drops
            # The watch is live after the last one: a diff still comes through.
            await broker.diff(added=("c",))
            await eventually(lambda: len(heard.changes) == 1, "the diff after the reconnects")
            assert heard.changes[0].added == qualified("c")
            assert heard.ends == []
        finally:
            await watcher.close()


async def test_a_reconnect_snapshot_that_differs_is_a_change_against_the_held_set() -> None:
    async with fake_broker(topics={"a", "b"}) as broker, Client(broker.url) as client:
        watcher = await client.watch_namespace(NAMESPACE)
        heard = Heard()
        heard.listen_to(watcher)
        await broker.next_watch()
        await broker.drop()
        broker.topics = {"b", "c"}  # changed while the client was away
        again = await broker.next_watch()
        assert again.current_hash == topic_set_hash({"a", "b"})
        await eventually(lambda: heard.changes, "the change the reconnect snapshot made")
        assert heard.changes == [
            TopicSetChange(qualified("c"), qualified("a"), qualified("b", "c"))
        ]
        assert watcher.topics == qualified("b", "c")


async def test_a_watch_ended_as_not_ready_is_opened_again_on_the_next_broker() -> None:
    async with (
        fake_broker(name="first", topics={"a"}) as first,
        fake_broker(name="second", topics={"a"}) as second,
        Client(f"{first.url},{second.url}") as client,
    ):
        watcher = await client.watch_namespace(NAMESPACE)
        await first.next_watch()
        await first.end(ErrorCode.SERVICE_NOT_READY, "stopping")
        again = await second.next_watch()
        assert again.current_hash == topic_set_hash({"a"})
        await second.diff(added=("b",))
        await eventually(lambda: watcher.topics == qualified("a", "b"), "the second's diff")


@pytest.mark.parametrize(
    ("code", "error"),
    [
        (ErrorCode.NOT_AUTHORIZED, NotAuthorized),
        (ErrorCode.INVALID_REQUEST, InvalidRequest),
        (ErrorCode.TOO_MANY_OPEN, TooManyOpen),
    ],
)
async def test_a_refusal_that_retrying_cannot_mend_fails_start(
    code: ErrorCode, error: type[ClientError]
) -> None:
    async with fake_broker() as broker, Client(broker.url) as client:
        broker.refusal = WatchEnded(code, "told so")
        with pytest.raises(error, match="told so") as refused:
            await client.watch_namespace(NAMESPACE)
        assert refused.value.code is code
        await broker.next_watch()
        assert broker.watches.empty()  # asked once, never again


async def test_an_end_for_good_after_start_reaches_listeners_and_iterations() -> None:
    async with fake_broker(topics={"a"}) as broker, Client(broker.url) as client:
        watcher = await client.watch_namespace(NAMESPACE)
        heard = Heard()
        heard.listen_to(watcher)
        changes = aiter(watcher)
        waiting = asyncio.ensure_future(anext(changes))
        await broker.next_watch()
        await broker.end(ErrorCode.NOT_AUTHORIZED, "grant revoked")
        with pytest.raises(NotAuthorized, match="grant revoked"):
            await waiting
        assert [type(end) for end in heard.ends] == [NotAuthorized]
        late = Heard()
        late.listen_to(watcher)  # a listener added after the end hears it at once
        assert late.ends == heard.ends
        assert watcher.topics == qualified("a")  # the last set known
        await watcher.close()
        assert len(heard.ends) == 1  # once
        assert broker.closes.empty()  # nothing to close: the broker had ended it


async def test_close_tells_the_broker_ends_iterations_quietly_and_listeners_hear_it() -> None:
    async with fake_broker(topics={"a"}) as broker, Client(broker.url) as client:
        watcher = await client.watch_namespace(NAMESPACE)
        heard = Heard()
        heard.listen_to(watcher)
        watch = await broker.next_watch()
        iterated: list[TopicSetChange] = []

        async def iterate() -> None:
            async for change in watcher:
                iterated.append(change)

        iterating = asyncio.ensure_future(iterate())
        await broker.diff(added=("b",))
        await eventually(lambda: iterated, "the diff, iterated")
        await watcher.close()
        async with asyncio.timeout(WAIT):
            await iterating  # ended without an error
        closed = await asyncio.wait_for(broker.closes.get(), WAIT)
        assert closed.watch_id == watch.watch_id
        assert [type(end) for end in heard.ends] == [ClientClosed]
        assert broker.open == {}


async def test_an_iteration_dropped_unfinished_stops_listening() -> None:
    async with fake_broker() as broker, Client(broker.url) as client:
        watcher = await client.watch_namespace(NAMESPACE)
        listeners = len(watcher._listeners)
        changes = aiter(watcher)
        assert len(watcher._listeners) == listeners + 1
        del changes
        gc.collect()
        assert len(watcher._listeners) == listeners
        await broker.diff(added=("a",))  # nobody left to queue it for
        await eventually(lambda: watcher.topics == qualified("a"), "the diff")


async def test_a_listener_that_raises_is_logged_and_the_others_carry_on(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async with fake_broker() as broker, Client(broker.url) as client:
        watcher = await client.watch_namespace(NAMESPACE)

        def broken(change: TopicSetChange) -> None:
            raise RuntimeError("listener bug")

        watcher.listen(broken)
        heard = Heard()
        heard.listen_to(watcher)
        await broker.next_watch()
        with caplog.at_level(logging.ERROR):
            await broker.diff(added=("a",))
            await eventually(lambda: len(heard.changes) == 1, "the first change")
            await broker.diff(added=("b",))
            await eventually(lambda: len(heard.changes) == 2, "the second change")
        assert sum("a change listener" in r.getMessage() for r in caplog.records) == 2
        assert watcher.topics == qualified("a", "b")


async def test_every_broker_at_version_1_ends_start_naming_each_broker_and_the_versions() -> None:
    async with (
        fake_broker(version=1, name="old-0") as old,
        fake_broker(version=1, name="old-1") as older,
    ):
        async with Client(old.url) as client:
            with pytest.raises(UnsupportedVersion) as one:
                await client.watch_namespace(NAMESPACE)
        assert one.value.message == (
            f"{old.url} (broker old-0) agreed on protocol version 1; a namespace watch needs "
            "version 2 (this client speaks 2, 1)"
        )
        async with Client(f"{old.url},{older.url}") as client:
            with pytest.raises(UnsupportedVersion) as both:
                await client.watch_namespace(NAMESPACE)
        assert both.value.message.startswith(
            f"no broker can serve a watch of namespace {NAMESPACE}: {old.url} (broker old-0)"
        )
        assert f"{older.url} (broker old-1) agreed on protocol version 1" in both.value.message
        assert old.watches.empty() and older.watches.empty()  # never sent to them


async def test_a_version_1_broker_is_passed_over_for_one_that_speaks_2() -> None:
    async with (
        fake_broker(version=1, name="old") as old,
        fake_broker(topics={"a"}) as new,
        Client(f"{old.url},{new.url}") as client,
    ):
        watcher = await client.watch_namespace(NAMESPACE)
        assert watcher.topics == qualified("a")
        assert old.watches.empty()


async def test_a_version_1_broker_and_one_that_is_down_fail_start_naming_both() -> None:
    down = loopback_socket()  # listening, never accepting: nothing answers the upgrade
    url = f"ws://127.0.0.1:{port_of(down)}"
    try:
        async with (
            fake_broker(version=1, name="old") as old,
            Client(f"{old.url},{url}", connect_timeout=0.5) as client,
        ):
            with pytest.raises(ConnectionFailed) as failed:
                await client.watch_namespace(NAMESPACE)
        assert failed.value.message.startswith(
            f"cannot watch namespace {NAMESPACE} on any broker: "
        )
        assert "agreed on protocol version 1" in failed.value.message
        assert url in failed.value.message
    finally:
        down.close()


@pytest.mark.parametrize(
    ("namespace", "filters", "problem"),
    [
        ("Team", None, "namespace: "),
        ("", None, "namespace: "),
        ("team", {f"k{i}": "v" for i in range(65)}, "filters: at most 64, not 65"),
        ("team", {"k": 1}, "filters: property names and values are strings"),
        ("team", [("k", "v")], "filters: expected a mapping"),
    ],
)
async def test_a_namespace_or_filters_that_cannot_be_sent_are_refused_up_front(
    namespace: str, filters: object, problem: str
) -> None:
    async with Client("ws://127.0.0.1:1") as client:
        with pytest.raises(ValueError, match=f"invalid namespace watch: {problem}"):
            await client.watch_namespace(namespace, filters)  # type: ignore[arg-type]


def test_the_reconnect_backoff_runs_from_100_ms_to_30_s() -> None:
    backoff = reconnect_backoff()
    assert (backoff.initial, backoff.maximum, backoff.multiplier) == (0.1, 30.0, 2.0)
    delays = [backoff.next_delay() for _ in range(20)]
    assert 0.05 <= delays[0] <= 0.1
    assert 15.0 <= delays[-1] <= 30.0


async def test_the_client_closes_its_namespace_watches() -> None:
    async with fake_broker(topics={"a"}) as broker:
        client = Client(broker.url)
        watcher = await client.watch_namespace(NAMESPACE)
        heard = Heard()
        heard.listen_to(watcher)
        await broker.next_watch()
        await client.close()
        assert [type(end) for end in heard.ends] == [ClientClosed]
        assert (await asyncio.wait_for(broker.closes.get(), WAIT)).watch_id == 1
