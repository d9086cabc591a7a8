"""A blocking facade over the asyncio client, for scripts and notebooks.

with SyncClient("ws://127.0.0.1:6650") as client:
    producer = client.create_producer("orders")
    producer.send(b"order 1", key="customer-17")

The client's event loop runs in a thread of its own; each call hands its coroutine to that loop
and blocks the caller until it is answered. Everything the asyncio client does in the
background (batching, reconnecting, following the DAG, acknowledgement groups) goes on between
calls. The methods are the asyncio ones, with the same arguments and documentation.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import functools
import os
import threading
from collections.abc import AsyncGenerator, Awaitable, Callable, Coroutine, Iterator, Mapping
from types import TracebackType
from typing import Any, Concatenate, Generic, ParamSpec, Protocol, Self, TypeVar, overload

from ..protocol import MessageId
from .admin import Admin
from .checkpoint_consumer import CheckpointConsumer
from .client import Client
from .client_settings import ClientSettings
from .consumer_message import ReceivedMessage
from .errors import ClientClosed, ClientError
from .namespace_consumer import NamespaceConsumer
from .namespace_queue_consumer import NamespaceQueueConsumer
from .namespace_stream_consumer import NamespaceStreamConsumer
from .namespace_watcher import NamespaceWatcher, TopicSetChange
from .ordered_consumer import OrderedTopicConsumer
from .producer import Producer
from .queue_consumer import QueueConsumer
from .stream_consumer import StreamConsumer

P = ParamSpec("P")
R = TypeVar("R")
T = TypeVar("T")
Ordered = TypeVar("Ordered", bound=OrderedTopicConsumer)
Several = TypeVar("Several", bound=NamespaceConsumer[Any])


class _LoopThread:
    """An event loop serving one SyncClient from a daemon thread."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._serve, name="scalable-topics", daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.run_forever()
        leftover = asyncio.all_tasks(self.loop)
        for task in leftover:
            task.cancel()
        self.loop.run_until_complete(asyncio.gather(*leftover, return_exceptions=True))
        self.loop.run_until_complete(self.loop.shutdown_asyncgens())
        self.loop.close()

    def run(self, work: Awaitable[R]) -> R:
        """Wait for ``work`` on the loop; an interrupt of the waiting caller cancels it."""
        refusal: Exception | None = None
        if threading.current_thread() is self._thread:
            refusal = RuntimeError(
                "a blocking call from a SyncClient's own callbacks would wait forever; "
                "use scalable_topics.client.Client in async code"
            )
        elif not self._thread.is_alive():
            refusal = ClientClosed("the client is closed")
        if refusal is not None:
            if isinstance(work, Coroutine):
                work.close()  # never to be awaited
            raise refusal
        answer = asyncio.run_coroutine_threadsafe(_awaited(work), self.loop)
        try:
            return answer.result()
        except BaseException:
            answer.cancel()
            raise

    def call(self, function: Callable[[], R]) -> R:
        """``function()`` run on the loop, where the client's state is changed."""

        async def called() -> R:
            return function()

        return self.run(called())

    def stop(self) -> None:
        if self._thread.is_alive():
            self.loop.call_soon_threadsafe(self.loop.stop)
            self._thread.join()


async def _awaited(work: Awaitable[R]) -> R:
    return await work


class _Facade(Generic[T]):
    """The blocking face of one asyncio object."""

    def __init__(self, target: T, runner: _LoopThread) -> None:
        self._target = target
        self._runner = runner

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        raise NotImplementedError


def _blocking(
    method: Callable[Concatenate[T, P], Awaitable[R]],
) -> Callable[Concatenate[_Facade[T], P], R]:
    """The blocking form of an asyncio method."""

    @functools.wraps(method)
    def call(self: _Facade[T], /, *args: P.args, **kwargs: P.kwargs) -> R:
        return self._runner.run(method(self._target, *args, **kwargs))

    return call


def _opening(
    method: Callable[Concatenate[Client, P], Awaitable[T]],
    facade: Callable[[T, _LoopThread], R],
) -> Callable[Concatenate[SyncClient, P], R]:
    """The blocking form of a method of Client that opens something, wrapped in ``facade``."""

    @functools.wraps(method)
    def call(self: SyncClient, /, *args: P.args, **kwargs: P.kwargs) -> R:
        opened = self._runner.run(method(self._target, *args, **kwargs))
        return facade(opened, self._runner)

    return call


class _OnTopic(Protocol):
    @property
    def topic(self) -> str: ...


OnTopic = TypeVar("OnTopic", bound=_OnTopic)


class _TopicFacade(_Facade[OnTopic]):
    @property
    def topic(self) -> str:
        return self._target.topic


class SyncProducer(_TopicFacade[Producer]):
    send = _blocking(Producer.send)
    flush = _blocking(Producer.flush)
    close = _blocking(Producer.close)

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self._runner.run(self._target.__aexit__(kind, error, traceback))

    @property
    def epoch(self) -> int | None:
        return self._runner.call(lambda: self._target.epoch)

    def send_async(
        self,
        payload: bytes,
        *,
        key: str | None = None,
        properties: Mapping[str, str] | None = None,
        event_time_ms: int | None = None,
    ) -> concurrent.futures.Future[MessageId | None]:
        """Queue one message and return the future of its id; blocks only while
        ``max_pending_messages`` are unanswered. Messages go in the order they were queued."""

        async def queue() -> concurrent.futures.Future[MessageId | None]:
            sent = await self._target.send_async(
                payload, key=key, properties=properties, event_time_ms=event_time_ms
            )
            answer: concurrent.futures.Future[MessageId | None] = concurrent.futures.Future()
            sent.add_done_callback(functools.partial(_settle, answer))
            return answer

        return self._runner.run(queue())


def _settle(answer: concurrent.futures.Future[R], sent: asyncio.Future[R]) -> None:
    if sent.cancelled():
        answer.cancel()
    elif (error := sent.exception()) is not None:
        answer.set_exception(error)
    else:
        answer.set_result(sent.result())


class _Receiving:
    def __iter__(self) -> Iterator[ReceivedMessage]:
        """Every message, until the consumer is closed."""
        while True:
            try:
                yield self.receive()
            except ClientClosed:
                return

    def receive(self, wait_seconds: float | None = None) -> ReceivedMessage:
        raise NotImplementedError


class _SyncConsumer(_Receiving, _TopicFacade[OnTopic]):
    pass


class SyncQueueConsumer(_SyncConsumer[QueueConsumer]):
    receive = _blocking(QueueConsumer.receive)
    acknowledge = _blocking(QueueConsumer.acknowledge)
    flush_acknowledgements = _blocking(QueueConsumer.flush_acknowledgements)
    negative_acknowledge = _blocking(QueueConsumer.negative_acknowledge)
    close = _blocking(QueueConsumer.close)
    unsubscribe = _blocking(QueueConsumer.unsubscribe)


class _SyncOrderedConsumer(_SyncConsumer[Ordered]):
    @property
    def assigned_segments(self) -> list[int]:
        """The segments this consumer reads now."""
        return self._runner.call(lambda: self._target.assigned_segments)


class SyncStreamConsumer(_SyncOrderedConsumer[StreamConsumer]):
    receive = _blocking(StreamConsumer.receive)
    acknowledge_cumulative = _blocking(StreamConsumer.acknowledge_cumulative)
    acknowledge_cumulative_vector = _blocking(StreamConsumer.acknowledge_cumulative_vector)
    flush_acknowledgements = _blocking(StreamConsumer.flush_acknowledgements)
    close = _blocking(StreamConsumer.close)

    def positions(self) -> dict[int, MessageId]:
        return self._runner.call(self._target.positions)


class SyncCheckpointConsumer(_SyncOrderedConsumer[CheckpointConsumer]):
    receive = _blocking(CheckpointConsumer.receive)
    checkpoint = _blocking(CheckpointConsumer.checkpoint)
    seek = _blocking(CheckpointConsumer.seek)
    close = _blocking(CheckpointConsumer.close)


class _OnNamespace(Protocol):
    @property
    def namespace(self) -> str: ...

    @property
    def filters(self) -> Mapping[str, str]: ...

    @property
    def topics(self) -> frozenset[str]: ...


OnNamespace = TypeVar("OnNamespace", bound=_OnNamespace)


class _NamespaceFacade(_Facade[OnNamespace]):
    @property
    def namespace(self) -> str:
        return self._target.namespace

    @property
    def filters(self) -> Mapping[str, str]:
        return self._target.filters

    @property
    def topics(self) -> frozenset[str]:
        """The topics followed now (a consumer's: attached or retrying)."""
        return self._runner.call(lambda: self._target.topics)


class _SyncNamespaceConsumer(_Receiving, _NamespaceFacade[Several]):
    @property
    def attached_topics(self) -> frozenset[str]:
        """The topics whose consumer is open now."""
        return self._runner.call(lambda: self._target.attached_topics)

    @property
    def retrying_topics(self) -> dict[str, ClientError]:
        """The topics whose consumer is tried again with backoff, with the last reason."""
        return self._runner.call(lambda: self._target.retrying_topics)


class SyncNamespaceQueueConsumer(_SyncNamespaceConsumer[NamespaceQueueConsumer]):
    receive = _blocking(NamespaceQueueConsumer.receive)
    acknowledge = _blocking(NamespaceQueueConsumer.acknowledge)
    flush_acknowledgements = _blocking(NamespaceQueueConsumer.flush_acknowledgements)
    negative_acknowledge = _blocking(NamespaceQueueConsumer.negative_acknowledge)
    close = _blocking(NamespaceQueueConsumer.close)
    unsubscribe = _blocking(NamespaceQueueConsumer.unsubscribe)


class SyncNamespaceStreamConsumer(_SyncNamespaceConsumer[NamespaceStreamConsumer]):
    receive = _blocking(NamespaceStreamConsumer.receive)
    acknowledge_cumulative = _blocking(NamespaceStreamConsumer.acknowledge_cumulative)
    flush_acknowledgements = _blocking(NamespaceStreamConsumer.flush_acknowledgements)
    close = _blocking(NamespaceStreamConsumer.close)

    def positions(self) -> dict[str, dict[int, MessageId]]:
        return self._runner.call(self._target.positions)

    @property
    def assigned_segments(self) -> dict[str, list[int]]:
        """Per topic attached now, the segments this consumer reads."""
        return self._runner.call(lambda: self._target.assigned_segments)


class SyncNamespaceWatcher(_NamespaceFacade[NamespaceWatcher]):
    """A namespace watch, blocking: ``topics`` is the set now; iterating blocks for each
    change (from the iteration's first step on), ends when the watch is closed and raises the
    error it ended with otherwise."""

    close = _blocking(NamespaceWatcher.close)

    def __iter__(self) -> Iterator[TopicSetChange]:
        """Every change from this call on (``iter(watcher)`` starts listening at once)."""
        return self._iterate(self._runner.call(self._target.__aiter__))

    def _iterate(self, changes: AsyncGenerator[TopicSetChange, None]) -> Iterator[TopicSetChange]:
        try:
            while True:
                try:
                    yield self._runner.run(anext(changes))
                except StopAsyncIteration:
                    return
        finally:
            # The iteration stops listening (a caller that broke out of its loop included);
            # a closed client has ended it already.
            with contextlib.suppress(ClientClosed):
                self._runner.run(changes.aclose())


class SyncAdmin(_Facade[Admin]):
    create_topic = _blocking(Admin.create_topic)
    list_topics = _blocking(Admin.list_topics)
    describe_topic = _blocking(Admin.describe_topic)
    delete_topic = _blocking(Admin.delete_topic)
    create_subscription = _blocking(Admin.create_subscription)
    delete_subscription = _blocking(Admin.delete_subscription)
    list_subscriptions = _blocking(Admin.list_subscriptions)
    split = _blocking(Admin.split)
    merge = _blocking(Admin.merge)
    stats = _blocking(Admin.stats)
    close = _blocking(Admin.close)


class SyncClient(_Facade[Client]):
    """The blocking client: ``SyncClient(service_url, auth_token=None, ...)`` takes the
    arguments of :class:`Client`; close it (or use ``with``) to stop its thread."""

    def __init__(self, service_url: str, auth_token: str | None = None, **options: Any) -> None:
        client = Client(service_url, auth_token, **options)
        super().__init__(client, _LoopThread())

    @classmethod
    def from_config(
        cls, path: str | os.PathLike[str] | None = None, context: str | None = None, **options: Any
    ) -> SyncClient:
        """A blocking client on the settings of the client configuration file, as
        :meth:`Client.from_config` (``options``: the Client's keyword arguments)."""
        settings = ClientSettings.load(path, context)
        return cls(settings.service_url, settings.auth_token, **options)

    create_producer = _opening(Client.create_producer, SyncProducer)

    @overload
    def subscribe_queue(
        self, topic: str, subscription: str, **options: Any
    ) -> SyncQueueConsumer: ...

    @overload
    def subscribe_queue(
        self, topic: None = None, subscription: str | None = None, **options: Any
    ) -> SyncNamespaceQueueConsumer: ...

    def subscribe_queue(
        self, *args: Any, **options: Any
    ) -> SyncQueueConsumer | SyncNamespaceQueueConsumer:
        """:meth:`Client.subscribe_queue`, blocking (the same arguments): a topic's consumer,
        or with ``namespace=`` (and ``filters=``) a namespace's."""
        opened = self._runner.run(self._target.subscribe_queue(*args, **options))
        if isinstance(opened, NamespaceQueueConsumer):
            return SyncNamespaceQueueConsumer(opened, self._runner)
        return SyncQueueConsumer(opened, self._runner)

    @overload
    def subscribe_stream(
        self, topic: str, subscription: str, consumer_name: str, **options: Any
    ) -> SyncStreamConsumer: ...

    @overload
    def subscribe_stream(
        self,
        topic: None = None,
        subscription: str | None = None,
        consumer_name: str | None = None,
        **options: Any,
    ) -> SyncNamespaceStreamConsumer: ...

    def subscribe_stream(
        self, *args: Any, **options: Any
    ) -> SyncStreamConsumer | SyncNamespaceStreamConsumer:
        """:meth:`Client.subscribe_stream`, blocking (the same arguments): a topic's consumer,
        or with ``namespace=`` (and ``filters=``) a namespace's."""
        opened = self._runner.run(self._target.subscribe_stream(*args, **options))
        if isinstance(opened, NamespaceStreamConsumer):
            return SyncNamespaceStreamConsumer(opened, self._runner)
        return SyncStreamConsumer(opened, self._runner)

    subscribe_checkpoint = _opening(Client.subscribe_checkpoint, SyncCheckpointConsumer)
    watch_namespace = _opening(Client.watch_namespace, SyncNamespaceWatcher)

    def admin(self) -> SyncAdmin:
        """Topic administration through the same brokers (the caller closes it)."""
        return SyncAdmin(self._target.admin(), self._runner)

    def close(self) -> None:
        """Close every producer and consumer, every connection, and the client's thread;
        SendFailed as :meth:`Client.close` raises it."""
        self._stop(self._target.close())

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self._stop(self._target.__aexit__(kind, error, traceback))

    def _stop(self, closing: Coroutine[Any, Any, None]) -> None:
        try:
            if self._runner.loop.is_running():
                self._runner.run(closing)
            else:
                closing.close()  # never to be awaited
        finally:
            self._runner.stop()
