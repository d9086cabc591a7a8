"""``stctl consume``: read messages of a subscription and print them."""

from __future__ import annotations

import argparse
import json
import os
import socket

from ..client import Client
from ..client.consumer_message import ReceivedMessage
from ..client.errors import Timeout
from ..client.queue_consumer import QueueConsumer
from ..client.stream_consumer import StreamConsumer
from .admin_call import add_connection_arguments
from .client_call import run_client
from .output import fail
from .progress import Progress

COMMAND = "stctl consume"
KINDS = ("auto", "queue", "key-shared", "stream")


def message_text(message: ReceivedMessage) -> str:
    segment, entry, index = message.message_id
    key = "-" if message.key is None else message.key
    return f"{segment}:{entry}:{index} key={key} {message.payload.decode(errors='replace')}"


def message_json(message: ReceivedMessage) -> str:
    return json.dumps(
        {
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
    render = message_json if args.output == "json" else message_text
    consumer_name = args.name or f"stctl-{socket.gethostname()}-{os.getpid()}"

    async def work(client: Client) -> int:
        kind = args.type
        if kind == "auto":
            declared = await _declared_type(client, args.topic, args.subscription)
            kind = "stream" if declared in ("Stream", "Checkpoint") else "queue"
        consumer: QueueConsumer | StreamConsumer
        if kind == "stream":
            consumer = await client.subscribe_stream(args.topic, args.subscription, consumer_name)
        else:
            consumer = await client.subscribe_queue(
                args.topic,
                args.subscription,
                consumer_name=consumer_name,
                key_ordered=kind == "key-shared",
                initial_position=args.initial_position,
            )
        progress = Progress("consumed", args.count or None)
        try:
            while not args.count or progress.done < args.count:
                try:
                    message = await consumer.receive(wait_seconds=args.timeout)
                except Timeout:
                    break
                if not args.quiet:
                    print(render(message), flush=True)
                if args.ack:
                    if isinstance(consumer, StreamConsumer):
                        await consumer.acknowledge_cumulative(message)
                    else:
                        await consumer.acknowledge(message)
                progress.advance()
        finally:
            if args.quiet:
                progress.finish()
            await consumer.close()
        if args.count and progress.done < args.count:
            return fail(
                COMMAND,
                f"received {progress.done} of {args.count} messages; none came for "
                f"{args.timeout:g} s",
            )
        if args.quiet:
            print(f"consumed {progress.done} messages in {progress.elapsed:.2f} s")
        return 0

    return run_client(args, COMMAND, work)


def add_consume(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    consume = commands.add_parser(
        "consume",
        help="read messages of a subscription and print them",
        description="Read messages of a subscription, print one per line "
        "(SEGMENT:ENTRY:INDEX key=KEY PAYLOAD, or JSON) and acknowledge them.",
    )
    consume.add_argument("topic", metavar="TOPIC", help="NAME or NAMESPACE/NAME")
    consume.add_argument("-s", "--subscription", required=True, help="the subscription's name")
    consume.add_argument(
        "-t",
        "--type",
        choices=KINDS,
        default="auto",
        help="stream for a declared Stream subscription, queue (any order) or key-shared "
        "(per-key order) otherwise; auto (default) picks by the declared type",
    )
    consume.add_argument(
        "--name",
        default=None,
        help="the consumer's name: a stream subscription deals its segments by name, one name "
        "one consumer (default stctl-HOST-PID, unique to this run)",
    )
    consume.add_argument(
        "-n", "--count", type=int, default=0, help="stop after this many (default 0: no limit)"
    )
    consume.add_argument(
        "--timeout",
        type=float,
        default=10.0,
        help="stop when no message came for this many seconds (default 10)",
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
    consume.add_argument(
        "-o", "--output", choices=["text", "json"], default="text", help="text (default) or json"
    )
    add_connection_arguments(consume)
    consume.set_defaults(run=_run)
