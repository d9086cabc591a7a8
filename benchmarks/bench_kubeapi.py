"""The Kubernetes API server (``stctl kube-api``) through the kubernetes store adapter.

One ``stctl kube-api`` process over a fresh embedded store; this process is the client, through
the kubernetes store adapter (kubernetes_asyncio), as the controller and brokers use it. Prints:

- creates per second (ScalableTopics, validated against the CRD schema and its CEL rules),
  with CREATE_CONCURRENCY requests in flight;
- the time to list 10,000 objects, and their size on the wire;
- watch fan-out: 1,000 status changes delivered to each of 20 open watches, and the time until
  the last watcher has seen the last change.

Figures only: nothing here asserts on timing.

    python benchmarks/bench_kubeapi.py [--objects 10000] [--changes 1000] [--watchers 20]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from scalable_topics.listening import read_address_file
from scalable_topics.model.resources import API_VERSION, ScalableTopic
from scalable_topics.store import UNLIMITED, Store, open_store

NAMESPACE = "bench"
CREATE_CONCURRENCY = 32
TIMEOUT_SECONDS = 900.0


def topic(index: int) -> dict[str, Any]:
    return {
        "apiVersion": API_VERSION,
        "kind": ScalableTopic.KIND,
        "metadata": {"name": f"t{index:05d}", "namespace": NAMESPACE, "labels": {"bench": "yes"}},
        "spec": {"initialSegments": 1, "properties": {"tier": "gold"}},
    }


def spawn_server(root: Path) -> subprocess.Popen[bytes]:
    log = open(root / "kube-api.log", "wb")  # noqa: SIM115 - lives as long as the process
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "scalable_topics.cli",
            "kube-api",
            "--store",
            f"embedded://{root / 'store.db'}",
            "--port",
            "0",
            "--address-file",
            str(root / "kube-api.address"),
            "--token-file",
            str(root / "token"),
            "--kubeconfig",
            str(root / "kubeconfig"),
            "--namespace",
            NAMESPACE,
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )


async def start_server(root: Path) -> tuple[subprocess.Popen[bytes], Path]:
    address_file = root / "kube-api.address"
    kubeconfig = root / "kubeconfig"
    process = spawn_server(root)
    async with asyncio.timeout(60):
        while read_address_file(address_file) is None or not kubeconfig.exists():
            if process.poll() is not None:
                raise SystemExit((root / "kube-api.log").read_text())
            await asyncio.sleep(0.05)
    return process, kubeconfig


async def create_many(store: Store, count: int) -> float:
    pending = iter(range(count))

    async def worker() -> None:
        for index in pending:
            await store.create(topic(index))

    started = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(CREATE_CONCURRENCY)))
    return time.perf_counter() - started


async def fan_out(store: Store, changes: int, watchers: int) -> tuple[float, int]:
    listed = await store.list(ScalableTopic.KIND, NAMESPACE, "bench=yes")
    target = listed.items[0]["metadata"]["name"]
    seen = [0] * watchers
    done = asyncio.Event()

    async def watch(slot: int, ready: asyncio.Event) -> None:
        async with store.watch(
            ScalableTopic.KIND, NAMESPACE, listed.resource_version, "bench=yes"
        ) as events:
            ready.set()
            async for _ in events:
                seen[slot] += 1
                if all(count >= changes for count in seen):
                    done.set()
                if seen[slot] >= changes:
                    return

    readies = [asyncio.Event() for _ in range(watchers)]
    tasks = [asyncio.create_task(watch(i, readies[i])) for i in range(watchers)]
    await asyncio.gather(*(ready.wait() for ready in readies))
    started = time.perf_counter()
    for number in range(changes):
        await store.patch_status(
            ScalableTopic.KIND, NAMESPACE, target, {"status": {"observedGeneration": number}}
        )
    await done.wait()
    elapsed = time.perf_counter() - started
    await asyncio.gather(*tasks)
    return elapsed, sum(seen)


async def run(objects: int, changes: int, watchers: int) -> None:
    with tempfile.TemporaryDirectory(prefix="bench-kubeapi-") as directory:
        root = Path(directory)
        process, kubeconfig = await start_server(root)
        store = open_store(f"kubernetes://{kubeconfig}", budget=UNLIMITED)
        try:
            async with asyncio.timeout(TIMEOUT_SECONDS):
                elapsed = await create_many(store, objects)
                print(
                    f"kubeapi create: {objects} ScalableTopics in {elapsed:.1f} s = "
                    f"{objects / elapsed:,.0f} creates/s ({CREATE_CONCURRENCY} in flight)"
                )
                started = time.perf_counter()
                listed = await store.list(ScalableTopic.KIND, NAMESPACE)
                list_seconds = time.perf_counter() - started
                size = len(json.dumps(listed.items))
                print(
                    f"kubeapi list: {len(listed.items)} objects in {list_seconds * 1000:.0f} ms "
                    f"({size / 1e6:.1f} MB of JSON)"
                )
                fan_seconds, delivered = await fan_out(store, changes, watchers)
                print(
                    f"kubeapi watch fan-out: {changes} changes to {watchers} watchers in "
                    f"{fan_seconds:.2f} s ({delivered:,} events, "
                    f"{delivered / fan_seconds:,.0f} events/s delivered)"
                )
        finally:
            await store.close()
            process.terminate()
            process.wait(timeout=30)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--objects", type=int, default=10_000)
    parser.add_argument("--changes", type=int, default=1_000)
    parser.add_argument("--watchers", type=int, default=20)
    args = parser.parse_args()
    asyncio.run(run(args.objects, args.changes, args.watchers))


if __name__ == "__main__":
    main()
