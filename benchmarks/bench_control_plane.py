"""The control plane at scale: N topics (one segment each) created at once.

Two broker processes and two controller processes (``stctl broker``, ``stctl controller``) on
one embedded store, as a small cluster runs them. The benchmark creates N ScalableTopics at once
through a store connection of its own and prints:

- the time until every topic is Ready, and the peak RSS of each process meanwhile;
- the store requests per second of all four processes together once everything is idle (the
  ``st_store_requests_total`` counters of their ``/metrics``; the embedded store's own polling
  of its file is how it implements watches, not a request);
- informer changes delivered per topic change in the controllers (one informer per kind per
  process, subscribers keyed by topic: a constant, where per-topic watches cost N);
- after one controller is killed with SIGKILL, the time until the survivor leads every topic,
  against the lease duration.

Figures only: nothing here asserts on timing.

    python benchmarks/bench_control_plane.py [--topics 1000 --topics 10000]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import aiohttp

from scalable_topics.model.resources import ScalableTopic
from scalable_topics.store import EmbeddedStore, EventType
from scalable_topics.store.informer import Change, Informer, key_of

LEASE_SECONDS = 15.0  # the controllers' default lease duration
CREATE_CONCURRENCY = 64
IDLE_SETTLE_SECONDS = 10.0
IDLE_WINDOW_SECONDS = 30.0
TIMEOUT_SECONDS = 900.0


@dataclass
class Process:
    name: str
    popen: subprocess.Popen[bytes]
    address_file: Path
    peak_rss: int = 0  # bytes

    @property
    def pid(self) -> int:
        return self.popen.pid

    async def address(self) -> str:
        async with asyncio.timeout(60):
            while not self.address_file.exists() or not self.address_file.read_text().strip():
                if self.popen.poll() is not None:
                    raise RuntimeError(f"{self.name} exited at start")
                await asyncio.sleep(0.05)
        return self.address_file.read_text().strip()

    def rss(self) -> int:
        """The resident set now, in bytes; 0 once the process is gone."""
        try:
            for line in Path(f"/proc/{self.pid}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
        except OSError:
            pass
        return 0


@dataclass
class Cluster:
    root: Path
    brokers: list[Process] = field(default_factory=list)
    controllers: list[Process] = field(default_factory=list)
    urls: dict[str, str] = field(default_factory=dict)  # name -> http://host:port

    @property
    def everyone(self) -> list[Process]:
        return [*self.brokers, *self.controllers]

    def sample_rss(self) -> None:
        for process in self.everyone:
            process.peak_rss = max(process.peak_rss, process.rss())


def spawn(root: Path, name: str, *args: str) -> Process:
    address_file = root / f"{name}.address"
    log = open(root / f"{name}.log", "ab")  # noqa: SIM115 - the child owns it
    popen = subprocess.Popen(
        [sys.executable, "-m", "scalable_topics.cli", *args, "--address-file", str(address_file)],
        stdout=log,
        stderr=subprocess.STDOUT,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    log.close()
    return Process(name, popen, address_file)


@contextlib.contextmanager
def cluster(root: Path) -> Iterator[Cluster]:
    store = f"embedded://{root / 'store.db'}"
    running = Cluster(root)
    try:
        for index in range(2):
            running.brokers.append(
                spawn(
                    root,
                    f"broker-{index}",
                    "broker",
                    "--data-dir",
                    str(root / f"broker-{index}"),
                    "--store",
                    store,
                    "--port",
                    "0",
                    "--broker-id",
                    f"broker-{index}",
                )
            )
        for index in range(2):
            running.controllers.append(
                spawn(
                    root,
                    f"controller-{index}",
                    "controller",
                    "--store",
                    store,
                    "--identity",
                    f"controller-{index}",
                    "--listen",
                    "127.0.0.1:0",
                )
            )
        yield running
    finally:
        for process in running.everyone:
            if process.popen.poll() is None:
                process.popen.terminate()
        for process in running.everyone:
            try:
                process.popen.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.popen.kill()


async def metrics(http: aiohttp.ClientSession, url: str) -> dict[str, float]:
    """A process's /metrics: ``name{labels}`` -> value."""
    async with http.get(url + "/metrics") as response:
        text = await response.text()
    samples = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, _, value = line.rpartition(" ")
            samples[name] = float(value)
    return samples


def total(samples: dict[str, float], prefix: str) -> float:
    return sum(value for name, value in samples.items() if name.startswith(prefix))


async def sampled_until(running: Cluster, done: asyncio.Future[float], what: str) -> float:
    """Sample every process's RSS each 0.5 s until ``done``; its result."""
    async with asyncio.timeout(TIMEOUT_SECONDS):
        while not done.done():
            running.sample_rss()
            await asyncio.wait({done}, timeout=0.5)
    running.sample_rss()
    return done.result()


async def run(topics: int) -> None:
    with tempfile.TemporaryDirectory(prefix="bench-control-plane-") as tmp:
        root = Path(tmp)
        with cluster(root) as running:
            for process in running.everyone:
                host_port = await process.address()
                running.urls[process.name] = f"http://{host_port}"
            async with (
                aiohttp.ClientSession() as http,
                await EmbeddedStore.open(root / "store.db") as store,
            ):
                controllers = [running.urls[c.name] for c in running.controllers]
                async with asyncio.timeout(120):
                    while True:
                        shards = [
                            total(await metrics(http, url), "st_controller_led_shards")
                            for url in controllers
                        ]
                        if sum(shards) == 16 and min(shards) > 0:
                            break
                        await asyncio.sleep(0.2)

                informer = Informer(store, ScalableTopic.KIND)
                ready: set[tuple[str, str]] = set()
                all_ready: asyncio.Future[float] = asyncio.get_running_loop().create_future()

                def changed(change: Change) -> None:
                    phase = ((change.new or {}).get("status") or {}).get("phase")
                    if phase == "Ready":
                        ready.add(change.key)
                        if len(ready) == topics and not all_ready.done():
                            all_ready.set_result(time.monotonic())

                informer.subscribe(changed)
                informer.start()
                await informer.wait_synced()
                gate = asyncio.Semaphore(CREATE_CONCURRENCY)

                async def create(index: int) -> None:
                    manifest = ScalableTopic.model_validate(
                        {
                            "metadata": {"name": f"topic-{index}", "namespace": "bench"},
                            "spec": {"initialSegments": 1},
                        }
                    ).to_wire()
                    async with gate:
                        await store.create(manifest)

                started = time.monotonic()
                created_at: list[float] = []
                creating = asyncio.ensure_future(
                    asyncio.gather(*(create(i) for i in range(topics)))
                )
                creating.add_done_callback(lambda _: created_at.append(time.monotonic()))
                finished = await sampled_until(running, all_ready, "every topic Ready")
                await creating
                created_in = created_at[0] - started
                ready_after = finished - started
                peak = {p.name: p.peak_rss / 2**20 for p in running.everyone}

                await asyncio.sleep(IDLE_SETTLE_SECONDS)
                urls = list(running.urls.values())
                before = [
                    total(await metrics(http, url), "st_store_requests_total") for url in urls
                ]
                await asyncio.sleep(IDLE_WINDOW_SECONDS)
                after = [total(await metrics(http, url), "st_store_requests_total") for url in urls]
                idle_rate = (sum(after) - sum(before)) / IDLE_WINDOW_SECONDS
                events = deliveries = 0.0
                for url in controllers:
                    samples = await metrics(http, url)
                    events += samples.get('st_informer_events_total{kind="ScalableTopic"}', 0)
                    deliveries += samples.get(
                        'st_informer_deliveries_total{kind="ScalableTopic"}', 0
                    )

                victim, survivor = running.controllers
                led_by_survivor: set[tuple[str, str]] = set()
                all_led: asyncio.Future[float] = asyncio.get_running_loop().create_future()

                def leader_changed(change: Change) -> None:
                    status = (change.new or {}).get("status") or {}
                    if (status.get("controller") or {}).get("identity") == survivor.name:
                        led_by_survivor.add(change.key)
                        if len(led_by_survivor) == topics and not all_led.done():
                            all_led.set_result(time.monotonic())

                for topic in informer.list():
                    leader_changed(Change(EventType.ADDED, key_of(topic), None, topic))
                informer.subscribe(leader_changed)
                killed = time.monotonic()
                victim.popen.send_signal(signal.SIGKILL)
                url = running.urls[survivor.name]
                async with asyncio.timeout(TIMEOUT_SECONDS):
                    # Another process's gauge: there is nothing to wait on but its next scrape.
                    while total(await metrics(http, url), "st_controller_led_topics") < topics:  # noqa: ASYNC110
                        await asyncio.sleep(0.1)
                holding = time.monotonic() - killed
                failover = await sampled_until(running, all_led, "the survivor in every status")
                failover -= killed
                await informer.stop()

        print(f"control plane, {topics} topics of one segment, 2 brokers, 2 controllers:")
        print(f"  all created in {created_in:.1f} s, all Ready after {ready_after:.1f} s")
        for name, mib in peak.items():
            print(f"  peak RSS {name}: {mib:.0f} MiB")
        print(f"  idle store requests: {idle_rate:.1f}/s, all four processes together")
        per_change = deliveries / events if events else float("nan")
        print(
            f"  topic informer changes in the controllers: {events:.0f}, delivered "
            f"{deliveries:.0f} times ({per_change:.2f} per change)"
        )
        print(
            f"  failover: the survivor leads all {topics} topics {holding:.1f} s after the "
            f"SIGKILL, and every topic's status names it {failover:.1f} s after it "
            f"(lease duration {LEASE_SECONDS:g} s)"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--topics", type=int, action="append", help="topics (repeatable)")
    args = parser.parse_args()
    for topics in args.topics or [1000]:
        asyncio.run(run(topics))


if __name__ == "__main__":
    main()
