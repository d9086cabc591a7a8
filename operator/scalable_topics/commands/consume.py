"""``stctl consume``: read messages of a subscription and print them: of one topic, or of
every topic of a namespace (``-n NS`` without a TOPIC, ``--filter KEY=VALUE`` to select
topics by property), each line then naming its topic."""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import socket
from collections.abc import Callable

from ..client import Client
from ..client.consumer_message import ReceivedMessage
from ..client.errors import Timeout
from ..client.namespace_queue_consumer import NamespaceQueueConsumer
from ..client.namespace_stream_consumer import NamespaceStreamConsumer
from ..client.queue_consumer import QueueConsumer
from ..client.stream_consumer import StreamConsumer
from ..client.topic_layout import DEFAULT_NAMESPACE
from ..tasks import cancel_and_wait
from .admin_call import add_connection_arguments, add_output_argument, topic_of
from .client_call import run_client
from .output import fail
from .progress import Progress
from .topics_watch import filter_pair, filters_of

COMMAND = "stctl consume"
DEFAULT_TIMEOUT = 10.0
KINDS = ("auto", "queue", "key-shared", "stream")


Consumer = QueueConsumer | StreamConsumer | NamespaceQueueConsumer | NamespaceStreamConsumer


def message_text(message: ReceivedMessage) -> str:
    segment, entry, index = message.message_id
    key = "-" if message.key is None else message.key
    return f"{segment}:{entry}:{index} key={key} {message.payload.decode(errors='replace')}"


def message_text_with_topic(message: ReceivedMessage) -> str:
    """A namespace's messages come from several topics: each line starts with its own."""
    return f"{message.topic} {message_text(message)}"


def message_json(message: ReceivedMessage) -> str:
    return json.dumps(
        {
            "topic": message.topic,
            "id": list(message.message_id),
            "key": message.key,
            "payload": message.payload.decode(errors="replace"),
            "properties": dict(message.properties),
            "eventTimeMs": message.event_time_ms,
            "publishTimeMs": message.publish_time_ms,
            "redeliveryCount": message.redelivery_count,
        }
    )


async def _declared_type(client: Client, topic: str, subscription: str) -> str | None:
    async with client.admin() as admin:
        for entry in (await admin.describe_topic(topic))["subscriptions"]:
            if entry["name"] == subscription and entry["declared"]:
                return entry["type"]
    return None


def _run(args: argparse.Namespace) -> int:
    if args.count < 0:
        return fail(COMMAND, "--count must be 0 (until interrupted) or more", exit_code=2)
    if args.follow and (args.count or args.timeout is not None):
        return fail(
            COMMAND,
            "--follow reads until interrupted (Ctrl-C or SIGTERM): it takes no --count or "
            "--timeout",
            exit_code=2,
        )
    if args.timeout is not None and args.timeout <= 0:
        return fail(COMMAND, "--timeout must be positive (seconds)", exit_code=2)
    if args.topic is None and args.namespace is None:
        return fail(
            COMMAND,
            "give the TOPIC to consume, or -n NAMESPACE (without a TOPIC) to consume every "
            "topic of a namespace",
            exit_code=2,
        )
    if args.topic is not None and args.filter:
        return fail(
            COMMAND,
            "--filter selects topics of a namespace: give -n NAMESPACE and no TOPIC",
            exit_code=2,
        )
    if args.output == "json":
        render = message_json
    elif args.topic is None:
        render = message_text_with_topic
    else:
        render = message_text
    consumer_name = args.consumer_name or f"stctl-{socket.gethostname()}-{os.getpid()}"

    async def work(client: Client) -> int:
        consumer: Consumer
        if args.topic is None:
            consumer = await _subscribe_namespace(client, args, consumer_name)
        else:
            consumer = await _subscribe_topic(client, args, consumer_name)
        if args.follow:
            return await _follow(consumer, render, args.ack)
        timeout = DEFAULT_TIMEOUT if args.timeout is None else args.timeout
        progress = Progress("consumed", args.count or None)
        try:
            while not args.count or progress.done < args.count:
                try:
                    message = await consumer.receive(wait_seconds=timeout)
                except Timeout:
                    break
                if not args.quiet:
                    print(render(message), flush=True)
                if args.ack:
                    await _acknowledge(consumer, message)
                progress.advance()
        finally:
            if args.quiet:
                progress.finish()
            await consumer.close()
        if args.count and progress.done < args.count:
            return fail(
                COMMAND,
                f"received {progress.done} of {args.count} messages; none came for {timeout:g} s",
            )
        if args.quiet:
            print(f"consumed {progress.done} messages in {progress.elapsed:.2f} s")
        return 0

    return run_client(args, COMMAND, work)


async def _subscribe_topic(client: Client, args: argparse.Namespace, name: str) -> Consumer:
    topic = topic_of(args)
    kind = args.type
    if kind == "auto":
        declared = await _declared_type(client, topic, args.subscription)
        kind = "stream" if declared in ("Stream", "Checkpoint") else "queue"
    if kind == "stream":
        return await client.subscribe_stream(topic, args.subscription, name)
    return await client.subscribe_queue(
        topic,
        args.subscription,
        consumer_name=name,
        key_ordered=kind == "key-shared",
        initial_position=args.initial_position,
    )


async def _subscribe_namespace(client: Client, args: argparse.Namespace, name: str) -> Consumer:
    """Every topic of -n's namespace matching the filters; ``auto`` is a queue consumer (the
    topics may declare the subscription differently, or not at all): -t stream for a Stream
    subscription."""
    filters = filters_of(args.filter)
    if args.type == "stream":
        return await client.subscribe_stream(
            subscription=args.subscription,
            consumer_name=name,
            namespace=args.namespace,
            filters=filters,
        )
    return await client.subscribe_queue(
        subscription=args.subscription,
        namespace=args.namespace,
        filters=filters,
        consumer_name=name,
        key_ordered=args.type == "key-shared",
        initial_position=args.initial_position,
    )


async def _acknowledge(consumer: Consumer, message: ReceivedMessage) -> None:
    if isinstance(consumer, StreamConsumer | NamespaceStreamConsumer):
        await consumer.acknowledge_cumulative(message)
    else:
        await consumer.acknowledge(message)


async def _follow(
    consumer: Consumer,
    render: Callable[[ReceivedMessage], str],
    ack: bool,
) -> int:
    """Print (and acknowledge) every message as it comes, until SIGINT or SIGTERM; then close
    the consumer, which makes the acknowledgements durable, and exit 0. A message is printed
    only once taken, and taken only while no signal came: what was printed is acknowledged,
    what was not is delivered again to the next consumer."""
    loop = asyncio.get_running_loop()
    stopping = asyncio.Event()
    signals = (signal.SIGINT, signal.SIGTERM)
    for signum in signals:
        loop.add_signal_handler(signum, stopping.set)
    stop = loop.create_task(stopping.wait(), name="wait for a signal")
    try:
        while not stopping.is_set():
            receiving = loop.create_task(consumer.receive(), name="receive")
            try:
                await asyncio.wait({receiving, stop}, return_when=asyncio.FIRST_COMPLETED)
            finally:
                if not receiving.done():
                    await cancel_and_wait(receiving)  # nothing taken: nothing lost
            if receiving.cancelled():
                break
            message = receiving.result()  # ClientClosed and the like end the command
            print(render(message), flush=True)
            if ack:
                await _acknowledge(consumer, message)
    finally:
        await cancel_and_wait(stop)
        for signum in signals:
            loop.remove_signal_handler(signum)
        await consumer.close()
    return 0


def add_consume(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    consume = commands.add_parser(
        "consume",
        help="read messages of a subscription and print them",
        description="Read messages of a subscription, print one per line "
        "(SEGMENT:ENTRY:INDEX key=KEY PAYLOAD, or JSON) and acknowledge them. Without a "
        "TOPIC, -n NAMESPACE reads every topic of the namespace (those matching every "
        "--filter), following topics as they are created and deleted; each line then starts "
        "with its topic (NAMESPACE/NAME).",
    )
    consume.add_argument(
        "topic",
        metavar="TOPIC",
        nargs="?",
        default=None,
        help="the topic: NAME (in the namespace -n gives) or NAMESPACE/NAME; leave it out "
        "to read every topic of -n's namespace",
    )
    consume.add_argument(
        "-n",
        "--namespace",
        default=None,
        help="the namespace of a bare TOPIC (default: the context's, else "
        f"{DEFAULT_NAMESPACE}); without a TOPIC, the namespace whose topics to read",
    )
    consume.add_argument(
        "--filter",
        type=filter_pair,
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="without a TOPIC: only topics with property KEY set to VALUE; repeatable, all "
        "must hold (at most 64)",
    )
    consume.add_argument("-s", "--subscription", required=True, help="the subscription's name")
    consume.add_argument(
        "-t",
        "--type",
        choices=KINDS,
        default="auto",
        help="stream for a declared Stream subscription, queue (any order) or key-shared "
        "(per-key order) otherwise; auto (default) picks by the declared type (without a "
        "TOPIC: queue)",
    )
    consume.add_argument(
        "--name",
        dest="consumer_name",
        metavar="NAME",
        default=None,
        help="the consumer's name: a stream subscription deals its segments by name, one name "
        "one consumer (default stctl-HOST-PID, unique to this run)",
    )
    consume.add_argument(
        "-c", "--count", type=int, default=0, help="stop after this many (default 0: no limit)"
    )
    consume.add_argument(
        "--timeout",
        type=float,
        default=None,
        help=f"stop when no message came for this many seconds (default {DEFAULT_TIMEOUT:g})",
    )
    consume.add_argument(
        "-f",
        "--follow",
        action="store_true",
        help="keep reading until Ctrl-C or SIGTERM (no --count or --timeout), printing and "
        "acknowledging each message as it comes; then close cleanly (acknowledgements "
        "made durable) and exit 0",
    )
    consume.add_argument(
        "--no-ack", dest="ack", action="store_false", help="do not acknowledge what is read"
    )
    consume.add_argument(
        "--initial-position",
        choices=["Earliest", "Latest"],
        default="Earliest",
        help="where a new queue subscription starts (default Earliest)",
    )
    consume.add_argument(
        "-q", "--quiet", action="store_true", help="print a count and a progress bar only"
    )
    add_output_argument(consume)
    add_connection_arguments(consume)
    consume.set_defaults(run=_run)
