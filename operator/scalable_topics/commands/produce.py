"""``stctl produce``: send messages to a topic from arguments, a file or stdin."""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from ..client import Client
from ..protocol import MessageId
from .admin_call import add_connection_arguments, add_output_argument
from .client_call import run_client
from .output import fail, print_json
from .progress import Progress

COMMAND = "stctl produce"


@dataclass(frozen=True)
class Line:
    key: str | None
    payload: bytes


def _lines(args: argparse.Namespace) -> tuple[Iterator[str], int | None]:
    """The message texts and how many there are (None when read from stdin)."""
    if args.message:
        texts = list(args.message)
    elif args.file is not None:
        path = Path(args.file)
        if not path.is_file():
            raise ValueError(f"no such file: {args.file}")
        texts = path.read_text(encoding="utf-8").splitlines()
    else:
        stdin = (line.rstrip("\n") for line in sys.stdin)
        if args.count == 1:
            return stdin, None
        texts = list(stdin)
    repeated = (text for _ in range(args.count) for text in texts)
    return repeated, len(texts) * args.count


def _parse(text: str, args: argparse.Namespace) -> Line:
    if args.key_separator is not None:
        key, separator, value = text.partition(args.key_separator)
        if not separator:
            raise ValueError(f"line {text!r} has no key separator {args.key_separator!r}")
        return Line(key, value.encode())
    return Line(args.key, text.encode())


def _run(args: argparse.Namespace) -> int:
    if args.rate is not None and args.rate <= 0:
        return fail(COMMAND, "--rate must be positive (messages per second)", exit_code=2)
    if args.count < 1:
        return fail(COMMAND, "--count must be at least 1", exit_code=2)
    try:
        texts, total = _lines(args)
    except ValueError as error:
        return fail(COMMAND, str(error), exit_code=2)
    properties = dict(args.property)

    async def work(client: Client) -> int:
        producer = await client.create_producer(args.topic, batching_max_delay=0.005)
        progress = Progress("produced", total)
        loop = asyncio.get_running_loop()
        started = loop.time()
        first: MessageId | None = None
        newest: asyncio.Future[MessageId | None] | None = None
        try:
            for index, text in enumerate(texts):
                line = _parse(text, args)
                if args.rate is not None:
                    delay = started + index / args.rate - loop.time()
                    if delay > 0:
                        await asyncio.sleep(delay)
                newest = await producer.send_async(
                    line.payload, key=line.key, properties=properties
                )
                newest.add_done_callback(lambda _: progress.advance())
                if first is None:
                    first = await newest  # fails fast when the first message cannot be stored
            await producer.flush()
            last = await newest if newest is not None else None
        finally:
            progress.finish()
            await producer.close()
        seconds = loop.time() - started
        summary = {
            "topic": producer.topic,
            "produced": progress.done,
            "seconds": round(seconds, 3),
            "messagesPerSecond": round(progress.done / seconds) if seconds > 0 else None,
            "firstMessageId": list(first) if first is not None else None,
            "lastMessageId": list(last) if last is not None else None,
        }
        if args.output == "json":
            print_json(summary)
        else:
            print(
                f"produced {progress.done} messages to {producer.topic} in {seconds:.2f} s"
                + (f" ({progress.done / seconds:,.0f} msg/s)" if seconds > 0 else "")
            )
        return 0

    return run_client(args, COMMAND, work)


def add_produce(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    produce = commands.add_parser(
        "produce",
        help="send messages to a topic (from arguments, a file or stdin)",
        description="Send messages to a topic: each -m, each line of --file, or each line of "
        "stdin is one message. Exits 0 once every message is durable.",
    )
    produce.add_argument("topic", metavar="TOPIC", help="NAME or NAMESPACE/NAME")
    source = produce.add_mutually_exclusive_group()
    source.add_argument("-m", "--message", action="append", help="a message (repeatable)")
    source.add_argument("-f", "--file", help="send each line of this file")
    keys = produce.add_mutually_exclusive_group()
    keys.add_argument("-k", "--key", help="the key of every message (default: none)")
    keys.add_argument(
        "--key-separator",
        metavar="SEP",
        help="each line is KEY<SEP>VALUE, e.g. --key-separator=: for 'customer-17:order 1'",
    )
    produce.add_argument(
        "-p",
        "--property",
        action="append",
        default=[],
        type=_property,
        metavar="KEY=VALUE",
        help="a property of every message (repeatable)",
    )
    produce.add_argument(
        "-c", "--count", type=int, default=1, help="send the messages this many times"
    )
    produce.add_argument("-r", "--rate", type=float, help="at most this many messages per second")
    add_output_argument(produce)
    add_connection_arguments(produce)
    produce.set_defaults(run=_run)


def _property(value: str) -> tuple[str, str]:
    key, equals, item = value.partition("=")
    if not key or not equals:
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, not {value!r}")
    return key, item
