"""The pieces of ``stctl produce`` that need no service: reading stdin as it comes, and the
tally of what became of each message."""

from __future__ import annotations

import array
import asyncio
import contextlib
import fcntl
import os
import random
import termios
from collections.abc import Iterator

import pytest
from hypothesis import given
from hypothesis import strategies as st

from scalable_topics.client import ClientClosed, MessageTooLarge, Timeout
from scalable_topics.commands.send_tally import SendTally
from scalable_topics.commands.stdin_lines import stdin_lines
from scalable_topics.protocol import MessageId


@pytest.fixture
def pipe() -> Iterator[tuple[int, int]]:
    read, write = os.pipe()
    yield read, write
    for fd in (read, write):
        with contextlib.suppress(OSError):  # the write end may be closed by the test already
            os.close(fd)


async def drained(fd: int) -> None:
    """Until the reader thread has taken everything written to the pipe ``fd`` reads."""
    unread = array.array("i", [0])
    async with asyncio.timeout(10):
        while True:
            fcntl.ioctl(fd, termios.FIONREAD, unread)
            if unread[0] == 0:
                return
            await asyncio.sleep(0.01)


async def test_a_line_is_read_when_it_arrives_not_when_the_next_one_does(
    pipe: tuple[int, int],
) -> None:
    read, write = pipe
    lines = stdin_lines(read)
    os.write(write, b"first\nsec")
    assert await anext(lines) == "first"  # while the pipe stays open and idle
    os.write(write, b"ond\r\nthird")
    assert await anext(lines) == "second"
    os.close(write)
    assert [line async for line in lines] == ["third"]  # the last line needs no newline


async def test_input_that_is_not_utf8_is_a_value_error(pipe: tuple[int, int]) -> None:
    read, write = pipe
    os.write(write, b"ok\n\xff\xfe\n")
    os.close(write)
    lines = stdin_lines(read)
    assert await anext(lines) == "ok"
    with pytest.raises(ValueError, match="not UTF-8"):
        await anext(lines)


async def test_a_multibyte_character_split_between_reads_is_kept(pipe: tuple[int, int]) -> None:
    read, write = pipe
    encoded = "naïve\n".encode()
    lines = stdin_lines(read)
    reading = asyncio.ensure_future(anext(lines))
    os.write(write, encoded[:3])  # ends inside the two bytes of "ï"
    await drained(read)
    os.write(write, encoded[3:])
    assert await reading == "naïve"
    os.close(write)
    assert [line async for line in lines] == []


def answered(future: asyncio.Future[MessageId | None], outcome: int) -> None:
    if outcome == 0:
        future.set_result(MessageId(0, 1, 0))
    else:
        future.set_exception(Timeout("not acknowledged in time"))


@given(
    outcomes=st.lists(st.integers(0, 1), min_size=1, max_size=40),
    order=st.randoms(use_true_random=False),
)
def test_every_message_tried_is_acknowledged_failed_or_unanswered(
    outcomes: list[int], order: random.Random
) -> None:
    async def run() -> None:
        loop = asyncio.get_running_loop()
        acknowledged_calls = []
        tally = SendTally(window=len(outcomes), acknowledged=lambda: acknowledged_calls.append(1))
        futures = [loop.create_future() for _ in outcomes]
        for future in futures:
            tally.track(future)
        pending = list(zip(futures, outcomes, strict=True))
        order.shuffle(pending)
        for future, outcome in pending:
            answered(future, outcome)
            await asyncio.sleep(0)  # the tally's callback
            assert tally.acknowledged + tally.failed + tally.unanswered == tally.tried
        assert (tally.acknowledged, tally.failed) == (outcomes.count(0), outcomes.count(1))
        assert len(acknowledged_calls) == tally.acknowledged
        if 1 in outcomes:
            assert str(tally.first_error) == "not acknowledged in time"

    asyncio.run(run())


async def test_the_first_error_and_ids_follow_send_order_not_answer_order() -> None:
    loop = asyncio.get_running_loop()
    tally = SendTally(window=10)
    futures = [loop.create_future() for _ in range(4)]
    for future in futures:
        tally.track(future)
    futures[3].set_exception(ClientClosed("late"))
    futures[2].set_result(MessageId(0, 9, 0))
    futures[1].set_exception(Timeout("early"))
    futures[0].set_result(MessageId(0, 8, 0))
    await asyncio.sleep(0)
    assert str(tally.first_error) == "early"
    assert (tally.first_id, tally.last_id) == (MessageId(0, 8, 0), MessageId(0, 9, 0))
    tally.refused(MessageTooLarge("too big"))
    assert (tally.tried, tally.failed) == (5, 3)


async def test_room_waits_for_an_answer_and_failure_for_a_failed_one() -> None:
    loop = asyncio.get_running_loop()
    tally = SendTally(window=2)
    futures = [loop.create_future() for _ in range(2)]
    for future in futures:
        tally.track(future)
    room = asyncio.ensure_future(tally.room())
    failure = asyncio.ensure_future(tally.failure())
    await asyncio.sleep(0)
    assert not room.done()
    futures[0].set_result(MessageId(0, 0, 0))
    await room  # one answered: room for one more
    assert not failure.done()
    futures[1].set_exception(Timeout("gone"))
    await failure
    await tally.room()  # nothing unanswered
