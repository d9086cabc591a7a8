"""What one topic admin PUT costs a real ``stctl broker`` process, and what it costs everyone
else: how long the PUT takes to be answered, and how long ``/healthz`` waits meanwhile.

Bodies (each PUT creates a topic of its own):
- ``issue``: 20,000 subscriptions ``{"name": "sub-00000", "type": "Queue"}`` (780 KB), the
  body that once took 15 to 25 s and held ``/healthz`` for 11 s; past the broker's body
  bound now, refused before it is read whole;
- ``compact``: 20,000 subscriptions ``{"name": "s0"}`` (288 KB): past the topic body's bound,
  refused unparsed;
- ``worst``: as many one-letter subscriptions as fit in the topic body's bound (256 KiB),
  the most work a body that is parsed can ask: parsed, then refused at the limit;
- ``largest``: the largest topic accepted, 1,000 subscriptions of 128 characters
  (``Checkpoint``), created.

While each PUT runs, one client polls ``/healthz`` back to back: the slowest answer is the
longest the broker's event loop was held. Prints, per body, its size, the answer's status,
the PUT's median and slowest time over ``--repeat`` runs, and ``/healthz``'s slowest answer
during them, with its idle median beside. Figures only: nothing here asserts.

    python benchmarks/bench_admin_put.py [--repeat 3] [--bodies issue,compact,worst,largest]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import aiohttp

TESTS = Path(__file__).resolve().parents[1] / "tests"
if str(TESTS) not in sys.path:
    sys.path.insert(0, str(TESTS))

from support.broker_process import BrokerProcess  # noqa: E402

TOPIC_BODY_BYTES = 256 * 1024
TIMEOUT = aiohttp.ClientTimeout(total=120)


def issue_body() -> bytes:
    subscriptions = [{"name": f"sub-{i:05}", "type": "Queue"} for i in range(20_000)]
    return json.dumps({"subscriptions": subscriptions}).encode()


def compact_body() -> bytes:
    return json.dumps({"subscriptions": [{"name": f"s{i}"} for i in range(20_000)]}).encode()


def worst_body() -> bytes:
    item = b'{"name":"a"}'
    count = (TOPIC_BODY_BYTES - len(b'{"subscriptions":[]}')) // (len(item) + 1)
    return b'{"subscriptions":[' + b",".join([item] * count) + b"]}"


def largest_body() -> bytes:
    subscriptions = [{"name": f"{i:04}" + "x" * 124, "type": "Checkpoint"} for i in range(1000)]
    return json.dumps({"subscriptions": subscriptions}).encode()


BODIES: dict[str, Callable[[], bytes]] = {
    "issue": issue_body,
    "compact": compact_body,
    "worst": worst_body,
    "largest": largest_body,
}


async def healthz_once(http: aiohttp.ClientSession, url: str) -> float:
    started = time.perf_counter()
    async with http.get(url + "/healthz") as answer:
        await answer.read()
        assert answer.status == 200, answer.status
    return time.perf_counter() - started


async def poll_healthz(
    http: aiohttp.ClientSession, url: str, stop: asyncio.Event, waits: list[float]
) -> None:
    while not stop.is_set():
        waits.append(await healthz_once(http, url))


async def put_once(
    http: aiohttp.ClientSession, url: str, name: str, body: bytes
) -> tuple[int, float, float]:
    """(status, seconds the PUT took, slowest /healthz answer meanwhile)."""
    waits: list[float] = []
    stop = asyncio.Event()
    async with aiohttp.ClientSession(timeout=TIMEOUT) as prober:
        await healthz_once(prober, url)  # its connection is open before the PUT starts
        polling = asyncio.create_task(poll_healthz(prober, url, stop, waits))
        try:
            started = time.perf_counter()
            async with http.put(
                f"{url}/admin/v1/topics/bench/{name}",
                data=body,
                headers={"Content-Type": "application/json"},
            ) as answer:
                await answer.read()
                status = answer.status
            took = time.perf_counter() - started
        finally:
            stop.set()
            await polling
    return status, took, max(waits, default=0.0)


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.1f} ms" if seconds < 1 else f"{seconds:.2f} s"


async def run(repeat: int, bodies: list[str]) -> None:
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        broker = BrokerProcess(root, f"embedded://{root / 'store.db'}")
        await broker.start()
        try:
            async with aiohttp.ClientSession(timeout=TIMEOUT) as http:
                for _ in range(50):  # warm-up: the broker's start-up work settles
                    await healthz_once(http, broker.url)
                idle = [await healthz_once(http, broker.url) for _ in range(200)]
                print(
                    f"/healthz idle: median {ms(statistics.median(idle))}, slowest {ms(max(idle))}"
                )
                for kind in bodies:
                    body = BODIES[kind]()
                    runs = [
                        await put_once(http, broker.url, f"{kind}-{index}", body)
                        for index in range(repeat)
                    ]
                    statuses = sorted({status for status, _, _ in runs})
                    took = [t for _, t, _ in runs]
                    print(
                        f"{kind:8} {len(body):>8} bytes: status {statuses}, PUT median "
                        f"{ms(statistics.median(took))}, slowest {ms(max(took))}; /healthz "
                        f"slowest meanwhile {ms(max(w for _, _, w in runs))}"
                    )
        finally:
            broker.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--bodies", default=",".join(BODIES))
    args = parser.parse_args()
    bodies = [kind for kind in args.bodies.split(",") if kind]
    unknown = [kind for kind in bodies if kind not in BODIES]
    if unknown or args.repeat < 1:
        parser.error(f"--bodies takes {', '.join(BODIES)}; --repeat at least 1")
    asyncio.run(run(args.repeat, bodies))


if __name__ == "__main__":
    main()
