"""Lines of standard input for a command running an event loop, read without blocking it.

A thread reads the file descriptor and hands over whatever has arrived: a line piped in is
handled when it arrives, not when the next one does, and the command can stop while its input
is idle. The hand-over waits while a few chunks are unread, so a fast input is not read ahead
without limit. The thread is a daemon: a command that stops before the input ends leaves it
blocked in its read until the process exits.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import os
import sys
import threading
from collections.abc import AsyncIterator

_CHUNK_BYTES = 64 * 1024
_CHUNKS_AHEAD = 8

# What the thread hands over: lines, the end of the input (None), or why reading failed.
_Chunk = list[str] | ValueError | None


async def stdin_lines(fd: int | None = None) -> AsyncIterator[str]:
    """Each line of ``fd`` (standard input by default), UTF-8, without its line ending; the
    last line needs none. A ValueError when the input is not UTF-8 or cannot be read."""
    if fd is None:
        if sys.stdin is None:  # started with stdin closed
            raise ValueError("there is no standard input to read")
        fd = sys.stdin.fileno()
    loop = asyncio.get_running_loop()
    chunks: asyncio.Queue[_Chunk] = asyncio.Queue(_CHUNKS_AHEAD)
    reader = threading.Thread(target=_read, args=(fd, chunks, loop), name="stdin", daemon=True)
    reader.start()
    while True:
        chunk = await chunks.get()
        if chunk is None:
            return
        if isinstance(chunk, ValueError):
            raise chunk
        for line in chunk:
            yield line


def _read(fd: int, chunks: asyncio.Queue[_Chunk], loop: asyncio.AbstractEventLoop) -> None:
    def hand_over(chunk: _Chunk) -> bool:
        """False once nobody takes chunks any more (the loop ended)."""
        try:
            asyncio.run_coroutine_threadsafe(chunks.put(chunk), loop).result()
        except (RuntimeError, concurrent.futures.CancelledError):
            return False
        return True

    # Split bytes, then decode each line: a newline byte is never part of a UTF-8 sequence, so
    # a character split between two reads is whole again in its line.
    partial = b""
    number = 0
    while True:
        try:
            data = os.read(fd, _CHUNK_BYTES)
        except OSError as error:
            hand_over(ValueError(f"cannot read standard input: {error.strerror or error}"))
            return
        if data:
            *raw, partial = (partial + data).split(b"\n")
        else:  # the end: the last line needs no newline
            raw, partial = ([partial] if partial else []), b""
        lines = []
        for line in raw:
            number += 1
            try:
                lines.append(line.decode("utf-8").removesuffix("\r"))
            except UnicodeDecodeError as error:
                if lines:
                    hand_over(lines)
                hand_over(ValueError(f"line {number} of standard input is not UTF-8: {error}"))
                return
        if lines and not hand_over(lines):
            return
        if not data:
            hand_over(None)
            return
