"""What the namespace consumers share: one consumer per topic of a namespace watch's set,
opened and closed as the set changes, all feeding one receive queue.

Each topic of the set has a *member*: a task that opens the topic's consumer (the
single-topic one, its messages going to the shared queue through a :class:`Feed`) and keeps
it open. A failure to subscribe (the topic is being deleted, its brokers are down, its
subscription refused) or a consumer that stops for good is retried with backoff, 100 ms
doubling up to 30 min, until the topic leaves the set or the consumer closes; meanwhile the
other topics carry on. A change of the set closes the members of removed names first, then
opens the added ones; a name in both (deleted and created again) is closed, then opened anew
once the old consumer has closed.

Messages handed out are :class:`RoutedMessage`: a ReceivedMessage that remembers the
per-topic consumer it came from, so that its acknowledgement goes back there. A bare
MessageId cannot say which topic it belongs to and is refused.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import AsyncIterator, Callable, Coroutine, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar

from ..protocol import MessageId
from ..tasks import TaskOwner, report_failure
from .backoff import Backoff
from .consumer_message import ReceivedMessage, until_closed
from .errors import ClientClosed, ClientError, Timeout
from .namespace_set import TopicSetChange
from .receive_queue import QueuedMessage
from .topic_mux import Feed, MuxQueue
from .topic_watcher import TopicWatcher

if TYPE_CHECKING:
    from .client import Client

log = logging.getLogger(__name__)

# A topic's consumer that cannot subscribe is tried again after this, doubling up to the cap.
RETRY_INITIAL_SECONDS = 0.1
RETRY_MAXIMUM_SECONDS = 30 * 60.0

T = TypeVar("T")


class TopicSet(Protocol):
    """What a namespace consumer uses of its NamespaceWatcher."""

    @property
    def namespace(self) -> str: ...

    @property
    def filters(self) -> Mapping[str, str]: ...

    @property
    def topics(self) -> frozenset[str]: ...

    def listen(
        self,
        on_change: Callable[[TopicSetChange], None],
        on_end: Callable[[ClientError], None] | None = None,
    ) -> Callable[[], None]: ...

    async def close(self) -> None: ...


class TopicConsumer(Protocol):
    """What a namespace consumer needs of a per-topic consumer."""

    @property
    def topic(self) -> str: ...

    async def close(self) -> None: ...


C = TypeVar("C", bound=TopicConsumer)


@dataclass(frozen=True, slots=True)
class RoutedMessage(ReceivedMessage):
    """A message a namespace consumer handed out: the feed (the per-topic consumer) it came
    through, and its number in the order of delivery (for a stream consumer's cumulative
    acknowledgement; -1 for a queue consumer)."""

    feed: Feed[Any] = field(repr=False, compare=False, kw_only=True)
    number: int = field(default=-1, repr=False, compare=False, kw_only=True)

    @classmethod
    def routed(cls, message: ReceivedMessage, feed: Feed[Any], number: int = -1) -> RoutedMessage:
        return cls(
            message.payload,
            message.key,
            message.properties,
            message.event_time_ms,
            message.publish_time_ms,
            message.message_id,
            message.redelivery_count,
            message.topic,
            feed=feed,
            number=number,
        )


class _Member(Generic[C]):
    """One topic of the set: the task keeping its consumer open, and that consumer's feed
    while it is open."""

    def __init__(self, topic: str) -> None:
        self.topic = topic
        self.feed: Feed[C] | None = None
        self.error: ClientError | None = None  # why the last attempt failed, while retrying
        self.settled = asyncio.Event()  # subscribed, or failed once and retrying
        self.task: asyncio.Task[None] | None = None


class NamespaceConsumer(Generic[C]):
    def __init__(self, client: Client, topic_set: TopicSet, subscription: str) -> None:
        self.namespace = topic_set.namespace
        self.filters = dict(topic_set.filters)
        self.subscription = subscription
        self._client = client
        self._topic_set = topic_set
        self._mux: MuxQueue[C] = MuxQueue()
        self._members: dict[str, _Member[C]] = {}
        # Per name, the member tasks not finished yet. A member opened for a name waits for
        # all of them (a topic deleted and created again): waiting for the newest alone is not
        # enough, as a member cancelled while it waited ends before the one it waited for.
        self._running: dict[str, set[asyncio.Task[None]]] = {}
        self._tasks = TaskOwner(f"the consumer of namespace {self.namespace}", log)
        self._stop_listening: Callable[[], None] | None = None
        self._closed = False
        self._unsubscribing = False
        self._close_errors: list[ClientError] = []

    # -- what the subclasses provide ------------------------------------------------------------

    def _make(self, feed: Feed[C], watcher: TopicWatcher) -> C:
        """The consumer of ``feed.topic``, not started, putting its messages into ``feed``."""
        raise NotImplementedError

    async def _start_consumer(self, consumer: C) -> None:
        raise NotImplementedError

    async def _close_consumer(self, consumer: C, *, unsubscribe: bool) -> None:
        raise NotImplementedError

    def _deliver(self, feed: Feed[C], item: QueuedMessage) -> ReceivedMessage | None:
        """The message of ``item`` as the application gets it; None to skip it."""
        raise NotImplementedError

    # -- the set --------------------------------------------------------------------------------

    @property
    def topics(self) -> frozenset[str]:
        """The topics followed now (qualified names), attached or retrying."""
        return frozenset(self._members)

    @property
    def attached_topics(self) -> frozenset[str]:
        """The topics whose consumer is open now."""
        return frozenset(t for t, m in self._members.items() if m.feed is not None)

    @property
    def retrying_topics(self) -> dict[str, ClientError]:
        """The topics whose consumer could not subscribe (or stopped) and is tried again
        with backoff, with the last reason."""
        return {t: m.error for t, m in self._members.items() if m.feed is None and m.error}

    async def _start(self) -> None:
        """Open a consumer for each topic of the set; return once each has subscribed or
        failed once (it is then retried in the background)."""
        self._stop_listening = self._topic_set.listen(self._on_change, self._on_end)
        # Read with no await since listen(): no change can fall between the two.
        for topic in sorted(self._topic_set.topics):
            self._attach(topic)
        await asyncio.gather(*(m.settled.wait() for m in list(self._members.values())))

    def _on_change(self, change: TopicSetChange) -> None:
        if self._closed:
            return
        for topic in sorted(change.removed):
            self._detach(topic)
        for topic in sorted(change.added):
            self._attach(topic)
        # Whatever the diff said, follow exactly the set the watcher holds now.
        for topic in sorted(self._members.keys() - change.topics):
            self._detach(topic)
        for topic in sorted(change.topics - self._members.keys()):
            self._attach(topic)

    def _on_end(self, error: ClientError) -> None:
        if not isinstance(error, ClientClosed):  # closed: by this consumer or its client
            log.warning("the watch of namespace %s ended: %s", self.namespace, error)
        self._mux.fail(error)

    def _attach(self, topic: str) -> None:
        if self._closed or topic in self._members:
            return
        member: _Member[C] = _Member(topic)
        task = self._tasks.spawn(
            self._follow(member, set(self._running.get(topic, ()))),
            f"consume {topic} of namespace {self.namespace}",
            on_done=functools.partial(self._member_done, member),
        )
        member.task = task
        self._members[topic] = member
        self._running.setdefault(topic, set()).add(task)

    def _detach(self, topic: str) -> None:
        member = self._members.pop(topic, None)
        if member is not None and member.task is not None:
            member.task.cancel()  # its consumer is closed as the task ends

    def _member_done(self, member: _Member[C], task: asyncio.Task[None]) -> None:
        running = self._running.get(member.topic)
        if running is not None:
            running.discard(task)
            if not running:
                del self._running[member.topic]
        member.settled.set()
        if not task.cancelled() and task.exception() is not None:
            report_failure(task, log, f"the consumer of {member.topic}")
            # A bug, not a refusal: say so rather than carry on without the topic.
            self._mux.fail(ClientError(f"consuming {member.topic} failed: {task.exception()!r}"))

    async def _follow(self, member: _Member[C], previous: set[asyncio.Task[None]]) -> None:
        """Keep a consumer of ``member.topic`` open until cancelled."""
        if previous:
            await asyncio.wait(previous)  # the topic's previous consumers have closed
        backoff = Backoff(initial=RETRY_INITIAL_SECONDS, maximum=RETRY_MAXIMUM_SECONDS)
        loop = asyncio.get_running_loop()
        while True:
            failed: asyncio.Future[ClientError] = loop.create_future()
            feed: Feed[C] = Feed(self._mux, member.topic, functools.partial(_settle, failed))
            try:
                await self._open(feed)
            except (ClientError, TimeoutError) as error:
                feed.close()
                member.error = _client_error(error, member.topic)
                member.settled.set()
                delay = backoff.next_delay()
                log.warning(
                    "cannot consume %s (%s): trying again in %.1f s", member.topic, error, delay
                )
                await asyncio.sleep(delay)
                continue
            backoff.reset()
            member.error = None
            member.feed = feed
            member.settled.set()
            try:
                member.error = await failed
            finally:
                member.feed = None
                await _completed(self._retire(feed))
            delay = backoff.next_delay()
            log.warning(
                "the consumer of %s stopped (%s): subscribing again in %.1f s",
                member.topic,
                member.error,
                delay,
            )
            await asyncio.sleep(delay)

    async def _open(self, feed: Feed[C]) -> None:
        watcher = await self._client.watch(feed.topic)
        consumer: C | None = None
        try:
            consumer = feed.consumer = self._make(feed, watcher)
            await self._start_consumer(consumer)
        except BaseException:
            feed.close()
            if consumer is not None:
                await _completed(self._quietly(consumer.close()))
            await _completed(self._quietly(self._client.release_watch(feed.topic)))
            raise

    async def _retire(self, feed: Feed[C]) -> None:
        """Stop taking the consumer's messages, then close it and let go of its topic's
        DAG watch."""
        feed.close()
        consumer = feed.consumer
        if consumer is None:
            return
        try:
            await self._close_consumer(consumer, unsubscribe=self._unsubscribing)
        except ClientError as error:
            if self._unsubscribing:
                self._close_errors.append(error)
            else:
                log.warning("closing the consumer of %s: %s", feed.topic, error)
        await self._quietly(self._client.release_watch(feed.topic))

    @staticmethod
    async def _quietly(closing: Coroutine[Any, Any, None]) -> None:
        try:
            await closing
        except ClientError as error:
            log.debug("closing after a failure: %s", error)

    # -- receiving ------------------------------------------------------------------------------

    async def receive(self, wait_seconds: float | None = None) -> ReceivedMessage:
        """The next message of any topic of the set (``message.topic`` says which); Timeout
        if none came within ``wait_seconds`` (None: wait on), ClientClosed once the consumer
        is closed, and the watch's error once the namespace watch ended for good."""
        try:
            async with asyncio.timeout(wait_seconds):
                while True:
                    feed, item = await self._mux.get()
                    message = self._deliver(feed, item)
                    if message is not None:
                        return message
        except TimeoutError:
            raise Timeout(
                f"no message from namespace {self.namespace} within {wait_seconds:g} s"
            ) from None

    def __aiter__(self) -> AsyncIterator[ReceivedMessage]:
        return until_closed(self.receive)

    def _routed(self, message: ReceivedMessage | MessageId) -> RoutedMessage:
        """The message as this consumer handed it out; ValueError for anything else."""
        if not isinstance(message, RoutedMessage) or message.feed.mux is not self._mux:
            raise ValueError(
                "a namespace consumer acknowledges the messages it handed out: pass the "
                "message itself (a MessageId cannot say which topic it belongs to)"
            )
        return message

    def _open_feeds(self) -> list[Feed[C]]:
        return [m.feed for m in self._members.values() if m.feed is not None]

    # -- closing --------------------------------------------------------------------------------

    async def close(self) -> None:
        """Close every topic's consumer (acknowledgements made durable first) and the
        namespace watch."""
        await self._shut(unsubscribe=False)

    async def _shut(self, *, unsubscribe: bool) -> None:
        if self._closed:
            return
        self._closed = True
        self._unsubscribing = unsubscribe
        self._client.untrack(self)
        if self._stop_listening is not None:
            self._stop_listening()
        self._mux.fail(ClientClosed(f"the consumer of namespace {self.namespace} was closed"))
        self._members.clear()
        await self._tasks.close()  # each member closes its consumer as it ends
        await self._topic_set.close()
        if self._close_errors:
            raise self._close_errors[0]


def _settle(failed: asyncio.Future[ClientError], error: ClientError) -> None:
    if not failed.done():
        failed.set_result(error)


def _client_error(error: ClientError | TimeoutError, topic: str) -> ClientError:
    if isinstance(error, ClientError):
        return error
    return Timeout(f"subscribing to {topic} did not complete in time")


async def _completed(work: Coroutine[Any, Any, T]) -> T:
    """Run ``work`` to its end even if the caller is cancelled meanwhile, then raise that
    cancellation: a consumer left half-closed would keep its segments from the others."""
    task = asyncio.get_running_loop().create_task(work)
    try:
        return await asyncio.shield(task)
    except asyncio.CancelledError:
        await asyncio.wait({task})
        report_failure(task, log, "closing a topic's consumer")
        raise
