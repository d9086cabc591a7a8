"""Broker memory across connection churn, and what held connections cost: RSS of one
``stctl broker`` process.

Churn: ``--cycles`` WebSocket connections opened and closed, mixing what clients and attackers
do, five kinds in turn: Connect and leave; leave before authenticating; a malformed frame, a
wrong token, a text message (each closed by the broker: 1002, 1008, 1003). ``--workers``
connections run at once. Prints the broker's RSS after a warm-up, after the cycles and after
the same number again, and the cycles per second. A broker that keeps nothing of a closed
connection stays flat: the aim is within 5 MiB.

Held: ``--held`` connections (the broker's ``--max-connections``, 10,000 by default as the
broker's own default) opened, authenticated and left idle: the RSS each costs; then
``--refusals`` more upgrades, each refused with 503 at the limit, per second and what they
leave; then the RSS once the held ones are closed (Python keeps the memory it had), and with as
many held again (it reuses it). Kernel socket buffers are not in the RSS.
Figures only: nothing here asserts.

    python benchmarks/bench_connections.py [--cycles 10000] [--workers 16] [--held 10000]
        [--refusals 2000]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import aiohttp

TESTS = Path(__file__).resolve().parents[1] / "tests"
if str(TESTS) not in sys.path:
    sys.path.insert(0, str(TESTS))

from scalable_topics.broker.open_files import raise_open_files_limit  # noqa: E402
from scalable_topics.protocol import PROTOCOL_VERSION, Connect, encode_frame  # noqa: E402
from support.broker_process import BrokerProcess  # noqa: E402

TOKEN = "bench-token"
WARM_UP = 5000
WAIT = 30.0  # bounds a stuck connection only
MIB = 1024 * 1024

Cycle = Callable[[aiohttp.ClientWebSocketResponse], Awaitable[None]]


async def until_closed(ws: aiohttp.ClientWebSocketResponse) -> None:
    while (await ws.receive(timeout=WAIT)).type is not aiohttp.WSMsgType.CLOSE:
        pass


async def connect_and_leave(ws: aiohttp.ClientWebSocketResponse) -> None:
    await ws.send_bytes(encode_frame(Connect(1, (PROTOCOL_VERSION,), "bench", TOKEN)))
    await ws.receive(timeout=WAIT)


async def leave_at_once(ws: aiohttp.ClientWebSocketResponse) -> None:
    pass


async def malformed(ws: aiohttp.ClientWebSocketResponse) -> None:
    await ws.send_bytes(b"\xc1")
    await until_closed(ws)


async def wrong_token(ws: aiohttp.ClientWebSocketResponse) -> None:
    await ws.send_bytes(encode_frame(Connect(1, (PROTOCOL_VERSION,), "bench", "wrong")))
    await until_closed(ws)


async def text(ws: aiohttp.ClientWebSocketResponse) -> None:
    await ws.send_str("hello")
    await until_closed(ws)


KINDS: list[Cycle] = [connect_and_leave, leave_at_once, malformed, wrong_token, text]


def rss_bytes(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError(f"no VmRSS for process {pid}")


async def churn(url: str, cycles: int, workers: int) -> float:
    """Run ``cycles`` connect/close cycles, ``workers`` at once; the seconds it took."""
    counter = iter(range(cycles))
    started = time.perf_counter()
    async with aiohttp.ClientSession() as http:

        async def work() -> None:
            for index in counter:
                async with http.ws_connect(url) as ws:
                    await KINDS[index % len(KINDS)](ws)

        await asyncio.gather(*(work() for _ in range(workers)))
    return time.perf_counter() - started


async def hold(
    http: aiohttp.ClientSession, url: str, count: int, workers: int
) -> list[aiohttp.ClientWebSocketResponse]:
    """Open ``count`` connections that authenticate and stay open, ``workers`` at a time."""
    held: list[aiohttp.ClientWebSocketResponse] = []
    counter = iter(range(count))

    async def work() -> None:
        for _ in counter:
            ws = await http.ws_connect(url)
            held.append(ws)
            await connect_and_leave(ws)  # Connect and its answer; the socket stays open

    await asyncio.gather(*(work() for _ in range(workers)))
    return held


async def refuse(url: str, attempts: int, workers: int) -> tuple[int, float]:
    """Ask for ``attempts`` upgrades of a full broker; how many it refused with 503, and the
    seconds it took."""
    counter = iter(range(attempts))
    refused = 0
    started = time.perf_counter()
    async with aiohttp.ClientSession() as http:

        async def work() -> None:
            nonlocal refused
            for _ in counter:
                try:
                    async with http.ws_connect(url):
                        pass
                except aiohttp.WSServerHandshakeError as error:
                    refused += error.status == 503

        await asyncio.gather(*(work() for _ in range(workers)))
    return refused, time.perf_counter() - started


async def measure(cycles: int, workers: int, held_count: int, refusals: int) -> None:
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        broker = BrokerProcess(
            root,
            f"embedded://{root / 'store.db'}",
            None,
            "--auth-token",
            TOKEN,
            "--max-connections",
            str(held_count),
        )
        await broker.start()
        try:
            assert broker.process is not None
            pid = broker.process.pid
            url = broker.ws_url + "/ws"
            await churn(url, WARM_UP, workers)
            await asyncio.sleep(1)  # the last closes finish on the broker
            start = rss_bytes(pid)
            seconds = await churn(url, cycles, workers)
            await asyncio.sleep(1)
            after = rss_bytes(pid)
            await churn(url, cycles, workers)
            await asyncio.sleep(1)
            again = rss_bytes(pid)
            # No pool limit: every held WebSocket keeps its own connection.
            connector = aiohttp.TCPConnector(limit=0)
            async with aiohttp.ClientSession(connector=connector) as http:
                held = await hold(http, url, held_count, workers)
                await asyncio.sleep(1)
                holding = rss_bytes(pid)
                refused, refusing_seconds = await refuse(url, refusals, workers)
                await asyncio.sleep(1)
                after_refusals = rss_bytes(pid)
                await asyncio.gather(*(ws.close() for ws in held))
                await asyncio.sleep(1)
                released = rss_bytes(pid)
                held = await hold(http, url, held_count, workers)
                await asyncio.sleep(1)
                holding_again = rss_bytes(pid)
                await asyncio.gather(*(ws.close() for ws in held))
        finally:
            broker.stop()
    print(f"broker RSS over connect/close cycles ({workers} at once, 5 kinds in turn)")
    print(f"  after {WARM_UP:,} warm-up cycles: {start / MIB:8.1f} MiB")
    print(
        f"  after {cycles:,} more:          {after / MIB:8.1f} MiB  "
        f"({(after - start) / MIB:+.1f} MiB, {(after - start) / cycles:+.0f} B per cycle)"
    )
    print(
        f"  after {cycles:,} more again:    {again / MIB:8.1f} MiB  "
        f"({(again - start) / MIB:+.1f} MiB since the warm-up)"
    )
    print(f"  {cycles / seconds:,.0f} cycles/s")
    print(
        f"broker RSS holding {held_count:,} idle authenticated connections (its --max-connections)"
    )
    print(
        f"  holding them:                   {holding / MIB:8.1f} MiB  "
        f"({(holding - again) / MIB:+.1f} MiB, {(holding - again) / held_count:,.0f} B each)"
    )
    print(
        f"  {refused:,} of {refusals:,} more upgrades refused (503), "
        f"{refusals / refusing_seconds:,.0f}/s: {after_refusals / MIB:8.1f} MiB  "
        f"({(after_refusals - holding) / MIB:+.1f} MiB)"
    )
    print(
        f"  all closed:                     {released / MIB:8.1f} MiB  "
        f"({(released - again) / MIB:+.1f} MiB since before holding them)"
    )
    print(
        f"  as many held again:             {holding_again / MIB:8.1f} MiB  "
        f"({(holding_again - holding) / MIB:+.1f} MiB since holding the first)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cycles", type=int, default=10_000)
    parser.add_argument("--workers", type=int, default=16)
    parser.add_argument("--held", type=int, default=10_000)
    parser.add_argument("--refusals", type=int, default=2_000)
    args = parser.parse_args()
    raise_open_files_limit()  # this process holds a socket per held connection too
    asyncio.run(measure(args.cycles, args.workers, args.held, args.refusals))


if __name__ == "__main__":
    main()
