"""``stctl produce``: send messages to a topic from arguments, a file or stdin, and say how
many were acknowledged and how many failed.

It never reports a message it was not told is durable: at the first failure (a message not
acknowledged within ``--send-timeout``, or refused) it stops queueing, waits for the answers to
what it sent, prints both counts and exits 1. The producer fails every message waiting behind
one that timed out, so when the service goes away this takes about one send timeout.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import sys
from collections.abc import AsyncIterator, Iterable
from dataclasses import dataclass
from pathlib import Path

from ..client import Client, ClientError, Producer, SendFailed
from ..tasks import cancel_and_wait
from .admin_call import add_connection_arguments, add_output_argument, add_topic_name, topic_of
from .client_call import run_client
from .output import fail, print_json
from .progress import Progress
from .send_tally import SendTally
from .stdin_lines import stdin_lines

COMMAND = "stctl produce"
DEFAULT_SEND_TIMEOUT = 30.0
# Messages unanswered at most: the producer's max_pending_messages too, so that send_async
# never waits and the tally decides, after every wait, whether to queue the next one.
WINDOW = 10_000


@dataclass(frozen=True)
class Line:
    key: str | None
    payload: bytes


@dataclass(frozen=True)
class Source:
    """The message texts from -m or --file (None: stdin), and how often to send them."""

    texts: list[str] | None
    count: int


def _source(args: argparse.Namespace) -> Source:
    if args.message:
        return Source(list(args.message), args.count)
    if args.file is not None:
        path = Path(args.file)
        if not path.is_file():
            raise ValueError(f"no such file: {args.file}")
        return Source(path.read_text(encoding="utf-8").splitlines(), args.count)
    if sys.stdin is None:
        raise ValueError("there is no standard input to read; give -m or --file")
    return Source(None, args.count)


async def _texts(source: Source) -> tuple[AsyncIterator[str], int | None]:
    """The texts to send and how many there are (None while stdin is read as it comes)."""
    if source.texts is None and source.count == 1:
        return stdin_lines(), None
    texts = source.texts if source.texts is not None else [t async for t in stdin_lines()]
    return _repeated(texts, source.count), len(texts) * source.count


async def _repeated(texts: Iterable[str], count: int) -> AsyncIterator[str]:
    for text in itertools.chain.from_iterable(itertools.repeat(texts, count)):
        yield text


def _parse(text: str, args: argparse.Namespace) -> Line:
    if args.key_separator is not None:
        key, separator, value = text.partition(args.key_separator)
        if not separator:
            raise ValueError(f"line {text!r} has no key separator {args.key_separator!r}")
        return Line(key, value.encode())
    return Line(args.key, text.encode())


@dataclass(frozen=True)
class Outcome:
    """How the sending ended: every text sent, or stopped early (a failure or bad input)."""

    exhausted: bool
    bad_input: ValueError | None = None


async def _send_all(
    producer: Producer, texts: AsyncIterator[str], tally: SendTally, args: argparse.Namespace
) -> Outcome:
    properties = dict(args.property)
    loop = asyncio.get_running_loop()
    started = loop.time()
    async for text in texts:
        try:
            line = _parse(text, args)
        except ValueError as error:
            return Outcome(exhausted=False, bad_input=error)
        if args.rate is not None:
            delay = started + tally.tried / args.rate - loop.time()
            if delay > 0:
                await asyncio.sleep(delay)
        await tally.room()
        if tally.failed:  # answered while this waited: queue nothing more
            return Outcome(exhausted=False)
        try:
            future = await producer.send_async(line.payload, key=line.key, properties=properties)
        except ClientError as error:
            tally.refused(error)
            return Outcome(exhausted=False)
        tally.track(future)
    return Outcome(exhausted=True)


async def _send_until_failure(
    producer: Producer, texts: AsyncIterator[str], tally: SendTally, args: argparse.Namespace
) -> Outcome:
    """Send every text, or stop at the first failure even while waiting for input."""
    sending = asyncio.create_task(_send_all(producer, texts, tally, args))
    failed = asyncio.create_task(tally.failure())
    try:
        await asyncio.wait({sending, failed}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        await cancel_and_wait(failed)
        if not sending.done():
            await cancel_and_wait(sending)
    if sending.cancelled():
        return Outcome(exhausted=False)
    try:
        return sending.result()
    except ValueError as error:  # stdin is not text
        return Outcome(exhausted=False, bad_input=error)


def _run(args: argparse.Namespace) -> int:
    if args.rate is not None and args.rate <= 0:
        return fail(COMMAND, "--rate must be positive (messages per second)", exit_code=2)
    if args.count < 1:
        return fail(COMMAND, "--count must be at least 1", exit_code=2)
    if args.send_timeout <= 0:
        return fail(COMMAND, "--send-timeout must be positive (seconds)", exit_code=2)
    try:
        source = _source(args)
    except ValueError as error:
        return fail(COMMAND, str(error), exit_code=2)

    async def work(client: Client) -> int:
        texts, total = await _texts(source)
        producer = await client.create_producer(
            topic_of(args),
            batching_max_delay=0.005,
            send_timeout=args.send_timeout,
            max_pending_messages=WINDOW,
        )
        progress = Progress("acknowledged", total)
        tally = SendTally(WINDOW, progress.advance)
        loop = asyncio.get_running_loop()
        started = loop.time()
        try:
            outcome = await _send_until_failure(producer, texts, tally, args)
        finally:
            # Waits for the answer to every message sent; the tally counted each failure.
            with contextlib.suppress(SendFailed):
                await producer.close()
            progress.finish()
        seconds = loop.time() - started
        if outcome.exhausted:
            not_sent: int | None = 0
        else:
            not_sent = None if total is None else total - tally.tried
        _print_summary(args, producer.topic, tally, not_sent, seconds)
        code = 0
        if tally.failed:
            code = fail(COMMAND, _failure_line(tally, not_sent))
        if outcome.bad_input is not None:
            code = fail(COMMAND, str(outcome.bad_input), exit_code=2)
        return code

    return run_client(args, COMMAND, work)


def _print_summary(
    args: argparse.Namespace, topic: str, tally: SendTally, not_sent: int | None, seconds: float
) -> None:
    rate = tally.acknowledged / seconds if seconds > 0 else None
    if args.output == "json":
        first, last = tally.first_id, tally.last_id
        print_json(
            {
                "topic": topic,
                "acknowledged": tally.acknowledged,
                "failed": tally.failed,
                "notSent": not_sent,
                "seconds": round(seconds, 3),
                "messagesPerSecond": round(rate) if rate is not None else None,
                "firstMessageId": list(first) if first is not None else None,
                "lastMessageId": list(last) if last is not None else None,
            }
        )
        return
    counts = f"{tally.acknowledged} acknowledged, {tally.failed} failed"
    if not_sent:
        counts += f", {not_sent} not sent"
    of = tally.tried + (not_sent or 0)
    print(
        f"{counts} of {_messages(of)} to {topic} in {seconds:.2f} s"
        + (f" ({rate:,.0f} msg/s)" if rate is not None else "")
    )


def _messages(count: int) -> str:
    return f"{count} message" if count == 1 else f"{count} messages"


def _failure_line(tally: SendTally, not_sent: int | None) -> str:
    line = (
        f"{tally.failed} of {_messages(tally.acknowledged + tally.failed)} failed; "
        f"the first: {tally.first_error}"
    )
    if not_sent is None:
        return line + "; stopped at the first failure without reading the rest of the input"
    if not_sent:
        return line + f"; stopped at the first failure, {not_sent} not sent"
    return line


def add_produce(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    produce = commands.add_parser(
        "produce",
        help="send messages to a topic (from arguments, a file or stdin)",
        description="Send messages to a topic: each -m, each line of --file, or each line of "
        "stdin (sent as it arrives) is one message. Prints how many messages were acknowledged "
        "(durable) and how many failed. Exits 0 once every message is acknowledged. At the "
        "first failure (a message not acknowledged within --send-timeout, or refused) it stops "
        "sending, waits for the answers to what it sent, prints both counts and exits 1: when "
        "the service goes away, it ends about one send timeout later. Exit 2: bad arguments "
        "or input.",
    )
    add_topic_name(produce)
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
    produce.add_argument(
        "--send-timeout",
        type=float,
        default=DEFAULT_SEND_TIMEOUT,
        metavar="SECONDS",
        help="a message not acknowledged this long after it was queued fails, and so does "
        f"the run (default {DEFAULT_SEND_TIMEOUT:g})",
    )
    add_output_argument(produce)
    add_connection_arguments(produce)
    produce.set_defaults(run=_run)


def _property(value: str) -> tuple[str, str]:
    key, equals, item = value.partition("=")
    if not key or not equals:
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, not {value!r}")
    return key, item
