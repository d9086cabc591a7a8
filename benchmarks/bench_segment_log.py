"""Throughput of SegmentLog appends under the default policy (fsync per batch, group commit).

    python benchmarks/bench_segment_log.py [--seconds 2] [--directory DIR]

For 100 B and 1 KiB records and 1, 16 and 128 concurrent appenders, prints appends/s, MB/s of
payload, and how many appends shared each fsync. Each run uses a fresh log in a temporary
directory (under --directory when given: put it on the disk you want to measure).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import tempfile
import threading
import time
from pathlib import Path

from scalable_topics.broker.storage import SegmentLog, durable_fs

RECORD_SIZES = (100, 1024)
CONCURRENCY = (1, 16, 128)


class FsyncCounter:
    def __init__(self) -> None:
        self.calls = 0
        self._real = durable_fs.flush_to_disk
        self._lock = threading.Lock()

    def __call__(self, fd: int) -> None:
        self._real(fd)
        with self._lock:
            self.calls += 1


async def run(directory: Path, record_size: int, appenders: int, seconds: float) -> str:
    counter = FsyncCounter()
    durable_fs.flush_to_disk = counter  # count the fsyncs
    payload = os.urandom(record_size)
    log = await SegmentLog.open(directory)
    deadline = time.monotonic() + seconds
    appended = 0

    async def appender() -> None:
        nonlocal appended
        while time.monotonic() < deadline:
            await log.append(payload, int(time.time() * 1000))
            appended += 1

    started = time.monotonic()
    fsyncs_before = counter.calls
    await asyncio.gather(*(appender() for _ in range(appenders)))
    elapsed = time.monotonic() - started
    fsyncs = counter.calls - fsyncs_before
    await log.delete()
    durable_fs.flush_to_disk = counter._real
    rate = appended / elapsed
    return (
        f"{record_size:>7} B {appenders:>10} {rate:>12,.0f} {rate * record_size / 1e6:>8.2f}"
        f" {appended / max(fsyncs, 1):>16.1f}"
    )


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=2.0, help="duration of each run")
    parser.add_argument("--directory", type=Path, default=None, help="where the logs go")
    args = parser.parse_args()
    print(f"{'record':>9} {'appenders':>10} {'appends/s':>12} {'MB/s':>8} {'appends/fsync':>16}")
    with tempfile.TemporaryDirectory(dir=args.directory, prefix="bench-log-") as root:
        for record_size in RECORD_SIZES:
            for appenders in CONCURRENCY:
                directory = Path(root) / f"log-{record_size}-{appenders}"
                print(await run(directory, record_size, appenders, args.seconds), flush=True)


if __name__ == "__main__":
    asyncio.run(main())
