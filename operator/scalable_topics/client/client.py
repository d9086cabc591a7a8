"""The client: the entry point of an application, owning the connections every producer and
consumer it creates share.

``service_url`` names one broker or several (comma-separated): any broker serves DAG watches
and relays consumer registrations and exclusive grants, and the DAG says which broker serves
each segment. One connection per broker, one DAG watch per topic, however many producers and
consumers use them.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
from collections import Counter
from collections.abc import Awaitable, Mapping
from types import TracebackType
from typing import Protocol, TypeVar, overload

import aiohttp

from ..model.resources import ProducerAccessMode
from ..protocol import InitialPosition
from .admin import DEFAULT_CONNECT_TIMEOUT, Admin
from .checkpoint_consumer import CheckpointConsumer
from .client_settings import ClientSettings
from .errors import ClientClosed, FailedSend, SendFailed
from .names import check_namespace_watch, check_subscription_name
from .namespace_queue_consumer import NamespaceQueueConsumer
from .namespace_stream_consumer import NamespaceStreamConsumer
from .namespace_watcher import NamespaceWatcher
from .ordered_consumer import check_ordered_options
from .pool import ConnectionPool
from .producer import Producer
from .queue_consumer import QueueConsumer, check_queue_options
from .segment_writer import DEFAULT_MAX_PENDING_BATCHES, Batching
from .service_urls import parse_service_urls
from .stream_consumer import StreamConsumer
from .topic_layout import qualified_topic
from .topic_watcher import TopicWatcher

log = logging.getLogger(__name__)


class _Closable(Protocol):
    async def close(self) -> None: ...


_Opened = TypeVar("_Opened", bound=_Closable)


class Client:
    def __init__(
        self,
        service_url: str,
        auth_token: str | None = None,
        *,
        client_name: str | None = None,
        operation_timeout: float = 30.0,
        connect_timeout: float = DEFAULT_CONNECT_TIMEOUT,
    ) -> None:
        """``connect_timeout``: seconds connecting to a broker may take (TCP, TLS, the
        WebSocket upgrade and the handshake); opening a producer or consumer gives up at once
        with ConnectionFailed, naming each URL and why, when no broker of ``service_url`` can
        be connected to. ``operation_timeout``: seconds any other request may take."""
        if connect_timeout <= 0 or operation_timeout <= 0:
            raise ValueError("connect_timeout and operation_timeout must be positive (seconds)")
        self.service_urls = parse_service_urls(service_url)
        self.auth_token = auth_token
        self.client_name = client_name or f"{socket.gethostname()}-client"
        self.operation_timeout = operation_timeout
        self.connect_timeout = connect_timeout
        self._session: aiohttp.ClientSession | None = None
        self._pool: ConnectionPool | None = None
        self._watchers: dict[str, asyncio.Task[TopicWatcher]] = {}
        self._watch_users: Counter[str] = Counter()
        self._closables: set[_Closable] = set()
        self._closed = False

    @classmethod
    def from_config(
        cls,
        path: str | os.PathLike[str] | None = None,
        context: str | None = None,
        *,
        client_name: str | None = None,
        operation_timeout: float = 30.0,
        connect_timeout: float = DEFAULT_CONNECT_TIMEOUT,
    ) -> Client:
        """A client on the service URL and token of the client configuration file ``path``
        (else $STCTL_CONFIG's, else ~/.config/stctl/config) and its ``context`` (else the
        current one), under $STCTL_URL and $STCTL_AUTH_TOKEN: ClientSettings.load. The token
        file is read now, once: a client made later reads a rotated token. The context's
        namespace is not applied to bare topic names (they stay in ``default``, as with the
        constructor): ``ClientSettings.load(...).topic(name)`` qualifies a name with it.
        ClientConfigError naming the file and the field when the file cannot be used."""
        settings = ClientSettings.load(path, context)
        return cls(
            settings.service_url,
            settings.auth_token,
            client_name=client_name,
            operation_timeout=operation_timeout,
            connect_timeout=connect_timeout,
        )

    async def __aenter__(self) -> Client:
        return self

    async def __aexit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        """Close; failed sends are raised when the block ended normally, and logged when it
        raised (its own error is the one to see)."""
        try:
            await self.close()
        except SendFailed as failed:
            if error is None:
                raise
            log.warning("%s", failed.message)

    @property
    def pool(self) -> ConnectionPool:
        if self._closed:
            raise ClientClosed("the client is closed")
        if self._pool is None:
            self._session = aiohttp.ClientSession()
            self._pool = ConnectionPool(
                self._session,
                client_name=self.client_name,
                auth_token=self.auth_token,
                connect_seconds=self.connect_timeout,
            )
        return self._pool

    def admin(self) -> Admin:
        """Topic administration through the same brokers (the caller closes it)."""
        return Admin(
            ",".join(self.service_urls), self.auth_token, connect_timeout=self.connect_timeout
        )

    async def watch(self, topic: str) -> TopicWatcher:
        """The topic's DAG watch, shared by everything this client opens on the topic;
        NotFound when the topic does not exist. A watch that ended (its topic was deleted) is
        replaced by a new one, for a topic created again under the same name. Each call is a
        user of the watch until :meth:`release_watch`; one never released (producers and
        single-topic consumers do not) stays open until the client closes."""
        topic = qualified_topic(topic)
        starting = self._watchers.get(topic)
        if (
            starting is None
            or (starting.done() and starting.exception() is not None)
            or (starting.done() and starting.result().ended)
        ):
            starting = asyncio.get_running_loop().create_task(self._start_watch(topic))
            self._watchers[topic] = starting
        self._watch_users[topic] += 1
        try:
            return await asyncio.shield(starting)
        except BaseException:
            self._drop_watch_user(topic)  # a start that failed has nothing to close
            raise

    async def release_watch(self, topic: str) -> None:
        """One user of the topic's watch less (a namespace consumer's topic left its set):
        the watch closes once nobody uses it, so following a namespace whose topics come and
        go does not keep a DAG watch open per topic ever seen."""
        watcher = self._drop_watch_user(qualified_topic(topic))
        if watcher is not None:
            await watcher.close()

    def _drop_watch_user(self, topic: str) -> TopicWatcher | None:
        """Count one user less; at none, forget the watch and return it when it is open."""
        left = self._watch_users[topic] - 1
        if left > 0:
            self._watch_users[topic] = left
            return None
        self._watch_users.pop(topic, None)
        starting = self._watchers.get(topic)
        if starting is None or not starting.done():
            return None  # still starting: whoever comes next uses it, or the client closes it
        del self._watchers[topic]
        if starting.cancelled() or starting.exception() is not None:
            return None
        return starting.result()

    async def _start_watch(self, topic: str) -> TopicWatcher:
        watcher = TopicWatcher(topic, self.pool, self.service_urls)
        await watcher.start(self.operation_timeout)
        return watcher

    async def watch_namespace(
        self, namespace: str, filters: Mapping[str, str] | None = None
    ) -> NamespaceWatcher:
        """A started watch of the set of topics of ``namespace`` whose properties hold every
        ``filters`` pair (every topic of the namespace without filters): ``topics`` is the set
        (qualified names) and follows every change; ``listen()`` or ``async for`` hear each
        change. Closed with the client; close it when done. ValueError for a namespace that
        cannot be one or filters that cannot be sent; the errors of NamespaceWatcher.start
        (NotAuthorized for a token without a role on the namespace, UnsupportedVersion when
        every broker is too old to serve it, Timeout after ``operation_timeout``)."""
        filters = check_namespace_watch(namespace, filters)
        watcher = NamespaceWatcher(namespace, filters, self.pool, self.service_urls)
        # Untracked once over, so that a client opening many in turn does not hold them all.
        watcher.listen(_ignore, lambda _: self.untrack(watcher))
        self.track(watcher)
        try:
            await watcher.start(self.operation_timeout)
        except BaseException:
            self.untrack(watcher)
            raise
        return watcher

    async def _started(self, opened: _Opened, start: Awaitable[None]) -> _Opened:
        """Track what was opened and start it; closed again when starting fails."""
        self.track(opened)
        try:
            await start
        except BaseException:
            await opened.close()
            raise
        return opened

    def track(self, closable: _Closable) -> None:
        """Close ``closable`` with the client."""
        self._closables.add(closable)

    def untrack(self, closable: _Closable) -> None:
        self._closables.discard(closable)

    async def close(self) -> None:
        """Close every producer and consumer, every watch and connection; then raise
        SendFailed if a producer closed here had messages queued with ``send_async`` since its
        last flush that failed (all of them, across producers, in one error)."""
        if self._closed:
            return
        failures: list[FailedSend] = []
        for closable in list(self._closables):
            try:
                await closable.close()
            except SendFailed as failed:
                failures.extend(failed.failures)
        self._closed = True
        for starting in self._watchers.values():
            if not starting.done():
                starting.cancel()
            elif starting.exception() is None:
                await starting.result().close()
        if self._pool is not None:
            await self._pool.close()
        if self._session is not None:
            await self._session.close()
        if failures:
            raise SendFailed(failures) from failures[0].error

    # -- producers ------------------------------------------------------------------------------

    async def create_producer(
        self,
        topic: str,
        *,
        name: str | None = None,
        access_mode: ProducerAccessMode | str = ProducerAccessMode.SHARED,
        batching_max_messages: int = 1000,
        batching_max_bytes: int = 128 * 1024,
        batching_max_delay: float = 0.001,
        send_timeout: float = 30.0,
        max_pending_messages: int = 10_000,
        max_pending_batches: int = DEFAULT_MAX_PENDING_BATCHES,
    ) -> Producer:
        """A producer of ``topic`` (``name`` or ``namespace/name``).

        ``name`` identifies the producer to the brokers' deduplication and to exclusive
        access; a unique one is made up when it is None. ``access_mode`` Shared lets many
        producers write; Exclusive, WaitForExclusive and ExclusiveWithFencing take the whole
        topic (every segment, present and future) for this producer alone. Batches close at
        ``batching_max_messages`` or ``batching_max_bytes``, or ``batching_max_delay``
        seconds after their first message. A message unacknowledged after ``send_timeout``
        seconds fails with Timeout, and so does every message waiting behind it for the same
        segment; ``send_async`` waits while ``max_pending_messages`` are unanswered, and
        ``flush()`` and ``close()`` raise SendFailed for the ones it queued that failed.
        At most ``max_pending_batches`` batches per segment are sent and unanswered: keep it
        at or under the brokers' ``--max-pending-publishes-per-producer`` (500 by default),
        past which a broker closes the producer (it then reopens and resends, slower).
        """
        batching = Batching(batching_max_messages, batching_max_bytes, batching_max_delay)
        if batching_max_messages < 1 or batching_max_bytes < 1 or batching_max_delay < 0:
            raise ValueError("batching limits must be positive (the delay may be 0)")
        watcher = await self.watch(topic)
        producer = Producer(
            self,
            watcher,
            name=name,
            access_mode=ProducerAccessMode(access_mode),
            batching=batching,
            send_timeout=send_timeout,
            max_pending_messages=max_pending_messages,
            max_pending_batches=max_pending_batches,
        )
        return await self._started(producer, producer._start())

    # -- consumers ------------------------------------------------------------------------------

    @overload
    async def subscribe_queue(
        self,
        topic: str,
        subscription: str,
        *,
        consumer_name: str | None = None,
        key_ordered: bool = False,
        initial_position: str = "Earliest",
        receive_queue_size: int = 1000,
        ack_timeout: float | None = None,
        nack_redelivery_delay: float = 1.0,
        dead_letter_topic: str | None = None,
        max_redeliveries: int | None = None,
    ) -> QueueConsumer: ...

    @overload
    async def subscribe_queue(
        self,
        topic: None = None,
        subscription: str | None = None,
        *,
        namespace: str,
        filters: Mapping[str, str] | None = None,
        consumer_name: str | None = None,
        key_ordered: bool = False,
        initial_position: str = "Earliest",
        receive_queue_size: int = 1000,
        ack_timeout: float | None = None,
        nack_redelivery_delay: float = 1.0,
        dead_letter_topic: str | None = None,
        max_redeliveries: int | None = None,
    ) -> NamespaceQueueConsumer: ...

    async def subscribe_queue(
        self,
        topic: str | None = None,
        subscription: str | None = None,
        *,
        namespace: str | None = None,
        filters: Mapping[str, str] | None = None,
        consumer_name: str | None = None,
        key_ordered: bool = False,
        initial_position: str = "Earliest",
        receive_queue_size: int = 1000,
        ack_timeout: float | None = None,
        nack_redelivery_delay: float = 1.0,
        dead_letter_topic: str | None = None,
        max_redeliveries: int | None = None,
    ) -> QueueConsumer | NamespaceQueueConsumer:
        """A queue consumer of ``subscription`` on every segment of ``topic``; or, with
        ``namespace`` in place of a topic, on every topic of the namespace whose properties
        hold every ``filters`` pair (every topic without filters), following the set as topics
        come and go (a NamespaceQueueConsumer: one queue consumer per topic with these
        options, one receive queue; ``message.topic`` names each message's topic).

        Messages are unordered and acknowledged one by one, unless ``key_ordered``: then each
        key is delivered to one consumer at a time, in order, across splits and merges.
        ``initial_position`` (Earliest or Latest) applies where the subscription does not exist
        yet. Up to ``receive_queue_size`` messages per segment are fetched ahead. A message
        not acknowledged within ``ack_timeout`` seconds is delivered again; a negatively
        acknowledged one after ``nack_redelivery_delay`` seconds, doubled with each
        redelivery. With ``max_redeliveries``, a message delivered that often is published to
        ``dead_letter_topic`` (default ``<topic>-dlq``, if that topic exists) and acknowledged.
        ValueError for a topic and a namespace both or neither, or filters without a namespace.
        """
        subscription = _checked_source(topic, subscription, namespace, filters)
        position = InitialPosition(initial_position)
        if namespace is not None:
            # Before the watch opens: nothing to close when an option is refused.
            check_queue_options(receive_queue_size, nack_redelivery_delay, max_redeliveries)
            several = NamespaceQueueConsumer(
                self,
                await self.watch_namespace(namespace, filters),
                subscription,
                consumer_name=consumer_name,
                key_ordered=key_ordered,
                initial_position=position,
                receive_queue_size=receive_queue_size,
                ack_timeout=ack_timeout,
                nack_redelivery_delay=nack_redelivery_delay,
                max_redeliveries=max_redeliveries,
                dead_letter_topic=dead_letter_topic,
            )
            return await self._started(several, several._start())
        assert topic is not None
        watcher = await self.watch(topic)
        consumer = QueueConsumer(
            self,
            watcher,
            subscription,
            consumer_name=consumer_name,
            key_ordered=key_ordered,
            initial_position=position,
            receive_queue_size=receive_queue_size,
            ack_timeout=ack_timeout,
            nack_redelivery_delay=nack_redelivery_delay,
            max_redeliveries=max_redeliveries,
        )
        return await self._started(consumer, consumer._start(dead_letter_topic))

    @overload
    async def subscribe_stream(
        self,
        topic: str,
        subscription: str,
        consumer_name: str,
        *,
        receive_queue_size: int = 1000,
    ) -> StreamConsumer: ...

    @overload
    async def subscribe_stream(
        self,
        topic: None = None,
        subscription: str | None = None,
        consumer_name: str | None = None,
        *,
        namespace: str,
        filters: Mapping[str, str] | None = None,
        receive_queue_size: int = 1000,
    ) -> NamespaceStreamConsumer: ...

    async def subscribe_stream(
        self,
        topic: str | None = None,
        subscription: str | None = None,
        consumer_name: str | None = None,
        *,
        namespace: str | None = None,
        filters: Mapping[str, str] | None = None,
        receive_queue_size: int = 1000,
    ) -> StreamConsumer | NamespaceStreamConsumer:
        """A stream consumer of ``subscription`` (declared with type Stream in the topic's
        spec), reading the segments the topic's controller assigns to ``consumer_name``: each
        key in order, acknowledged cumulatively. Consumers of one subscription share the
        segments; the name keeps a consumer's segments across reconnects.

        With ``namespace`` in place of a topic: on every topic of the namespace whose
        properties hold every ``filters`` pair, following the set as topics come and go (a
        NamespaceStreamConsumer: one stream consumer per topic, one receive queue, each key in
        order within its topic; acknowledging a message cumulatively acknowledges everything
        received before it on every topic). ValueError for a topic and a namespace both or
        neither, or filters without a namespace."""
        subscription = _checked_source(topic, subscription, namespace, filters)
        if consumer_name is None:
            raise ValueError("stream consumers need a consumer_name")
        if namespace is not None:
            check_ordered_options(receive_queue_size, consumer_name)
            streams = NamespaceStreamConsumer(
                self,
                await self.watch_namespace(namespace, filters),
                subscription,
                consumer_name,
                receive_queue_size=receive_queue_size,
            )
            return await self._started(streams, streams._start())
        assert topic is not None
        watcher = await self.watch(topic)
        consumer = StreamConsumer(
            self, watcher, subscription, consumer_name, receive_queue_size=receive_queue_size
        )
        return await self._started(consumer, consumer._start())

    async def subscribe_checkpoint(
        self,
        topic: str,
        subscription: str,
        consumer_name: str,
        *,
        receive_queue_size: int = 1000,
    ) -> CheckpointConsumer:
        """A checkpoint consumer of ``subscription`` (declared with type Checkpoint): segments
        assigned as for a stream consumer, positions kept by the application with
        ``checkpoint()`` and ``seek()``. One topic only: a checkpoint names its segments."""
        check_subscription_name(subscription, "subscription")
        watcher = await self.watch(topic)
        consumer = CheckpointConsumer(
            self, watcher, subscription, consumer_name, receive_queue_size=receive_queue_size
        )
        return await self._started(consumer, consumer._start())


def _checked_source(
    topic: str | None,
    subscription: str | None,
    namespace: str | None,
    filters: Mapping[str, str] | None,
) -> str:
    """The subscription, once the consumer has exactly one source: a topic, or a namespace
    (with its filters); ValueError naming the problem otherwise."""
    if topic is not None and namespace is not None:
        raise ValueError(
            f"consume topic {topic!r} or namespace {namespace!r}, not both: a namespace "
            "consumer reads every topic of the namespace (that its filters select)"
        )
    if topic is None and namespace is None:
        raise ValueError("give the topic to consume, or namespace= for every topic of one")
    if filters is not None and namespace is None:
        raise ValueError("filters select topics of a namespace: give namespace= with them")
    if subscription is None:
        raise ValueError("give the subscription to consume")
    check_subscription_name(subscription, "subscription")
    return subscription


def _ignore(change: object) -> None:
    """A listener that hears only the end."""
