"""Topic creation and split latency through the kopf operator and the Kubernetes API, as ratios
to the same on the embedded store.

Two systems, each with one broker process:
- operator: ``stctl kube-api`` over an embedded store file, two ``stctl operator`` replicas
  (kopf and the controller) and a broker, all through the Kubernetes API, as in a cluster;
- embedded: one ``stctl controller`` and a broker on the embedded store file, as standalone.

For each, ``--topics`` topics of one segment are created one after another the way
``kubectl apply`` creates them (a POST of the object; on the embedded store, a create), and
the figure is the time from the create to the Ready condition, seen through a watch. Then each
topic's segment is split while a producer (the Python client) writes to it; the figure is the
time from the split request (the annotation ``kubectl annotate`` writes) to the producer's first
durable receipt from a child segment. Prints p50 and p99 of both, and the operator's as ratios
to the embedded store's. Figures only: nothing here asserts on timing.

    python benchmarks/bench_operator_path.py [--topics 50]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import sys
import tempfile
import time
from collections import Counter
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1] / "tests"
if str(TESTS) not in sys.path:
    sys.path.insert(0, str(TESTS))

from scalable_topics.client import Client  # noqa: E402
from scalable_topics.model.ownership import (  # noqa: E402
    DEFAULT_SHARD_COUNT,
    SHARD_LEASE_PREFIX,
)
from scalable_topics.model.resources import API_VERSION, ScalableTopic  # noqa: E402
from scalable_topics.model.scale_request import SPLIT_ANNOTATION  # noqa: E402
from scalable_topics.store import Object, Store, open_store  # noqa: E402
from scalable_topics.store.kinds import LEASE  # noqa: E402
from support.broker_process import BrokerProcess  # noqa: E402
from support.controller_process import ControllerProcess  # noqa: E402
from support.kubeapi_process import KubeApiProcess  # noqa: E402
from support.operator_process import OperatorProcess  # noqa: E402

NAMESPACE = "default"
SYSTEM_NAMESPACE = "scalable-topics"
KEY = "hot-key"
STEP_SECONDS = 120.0  # bounds a stuck step only


@dataclass
class Figures:
    ready: list[float]
    split: list[float]


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


@contextlib.asynccontextmanager
async def operator_system(root: Path) -> AsyncIterator[tuple[str, str]]:
    """(the store URL clients of the system use, a broker's URL)."""
    api = KubeApiProcess(root, f"embedded://{root / 'store.db'}", namespaces=(SYSTEM_NAMESPACE,))
    # The default lease timing, as deployed (the tests' faster one renews four times as often).
    operators = [OperatorProcess(root, api.kubeconfig, f"operator-{i}", timing=()) for i in (1, 2)]
    broker = BrokerProcess(root, api.adapter_url)
    try:
        await api.start()
        for operator in operators:
            await operator.start()
        for operator in operators:
            await operator.wait_ready()
        await broker.start()
        await balanced(api.adapter_url, [operator.identity for operator in operators])
        yield api.adapter_url, broker.ws_url
    finally:
        broker.stop()
        for operator in operators:
            operator.stop()
        api.stop()


async def balanced(store_url: str, identities: list[str]) -> None:
    """Return once the replicas hold equal shares of the shards: a replica that started first
    holds them all and hands the surplus over one per retry period, and a topic of a shard in
    handover waits for it. The figures are of the steady state."""
    store = open_store(store_url)
    try:
        async with asyncio.timeout(STEP_SECONDS):
            while True:
                leases = (await store.list(LEASE.kind, SYSTEM_NAMESPACE)).items
                holders = Counter(
                    lease["spec"].get("holderIdentity")
                    for lease in leases
                    if lease["metadata"]["name"].startswith(SHARD_LEASE_PREFIX)
                )
                if sum(holders.values()) == DEFAULT_SHARD_COUNT and all(
                    holders[identity] == DEFAULT_SHARD_COUNT // len(identities)
                    for identity in identities
                ):
                    return
                await asyncio.sleep(0.2)
    finally:
        await store.close()


@contextlib.asynccontextmanager
async def embedded_system(root: Path) -> AsyncIterator[tuple[str, str]]:
    url = f"embedded://{root / 'store.db'}"
    controller = ControllerProcess(root, url, "controller-1", listen=True)
    broker = BrokerProcess(root, url)
    try:
        controller.start()
        await controller.listening_port()
        await broker.start()
        yield url, broker.ws_url
    finally:
        broker.stop()
        controller.stop()


def is_ready(topic: Object) -> bool:
    conditions = (topic.get("status") or {}).get("conditions") or ()
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


async def create_until_ready(store: Store, name: str) -> float:
    started = time.perf_counter()
    created = await store.create(
        {
            "apiVersion": API_VERSION,
            "kind": ScalableTopic.KIND,
            "metadata": {"name": name, "namespace": NAMESPACE},
            "spec": {"initialSegments": 1},
        }
    )
    version = created["metadata"]["resourceVersion"]
    async with (
        asyncio.timeout(STEP_SECONDS),
        store.watch(ScalableTopic.KIND, NAMESPACE, resource_version=version) as events,
    ):
        async for event in events:
            if event.object["metadata"]["name"] == name and is_ready(event.object):
                return time.perf_counter() - started
    raise RuntimeError(f"the watch ended before {name} was Ready")


async def split_until_children_written(store: Store, client: Client, name: str) -> float:
    producer = await client.create_producer(f"{NAMESPACE}/{name}")
    try:
        first = await producer.send(b"before", key=KEY)
        assert first is not None and first.segment_id == 0
        started = time.perf_counter()
        await store.patch(
            ScalableTopic.KIND,
            NAMESPACE,
            name,
            {"metadata": {"annotations": {SPLIT_ANNOTATION: "0"}}},
        )
        async with asyncio.timeout(STEP_SECONDS):
            while True:
                receipt = await producer.send(b"during", key=KEY)
                if receipt is not None and receipt.segment_id != 0:
                    return time.perf_counter() - started
    finally:
        await producer.close()


async def measure(system: str, topics: int) -> Figures:
    start = operator_system if system == "operator" else embedded_system
    with tempfile.TemporaryDirectory(prefix=f"bench-operator-path-{system}-") as root:
        async with start(Path(root)) as (store_url, broker_url):
            store = open_store(store_url)
            try:
                names = [f"bench-{i}" for i in range(topics)]
                ready = [await create_until_ready(store, name) for name in names]
                async with Client(broker_url) as client:
                    split = [await split_until_children_written(store, client, n) for n in names]
            finally:
                await store.close()
    return Figures(ready, split)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--topics", type=int, default=50)
    args = parser.parse_args()
    results = {
        system: asyncio.run(measure(system, args.topics)) for system in ("embedded", "operator")
    }
    for system, figures in results.items():
        print(
            f"operator path ({system}): apply to Ready p50 {percentile(figures.ready, 0.5) * 1000:.0f} ms, "
            f"p99 {percentile(figures.ready, 0.99) * 1000:.0f} ms; split request to producer on the "
            f"children p50 {percentile(figures.split, 0.5) * 1000:.0f} ms, "
            f"p99 {percentile(figures.split, 0.99) * 1000:.0f} ms ({args.topics} topics)"
        )
    embedded, operator = results["embedded"], results["operator"]
    print(
        "operator path, kopf + kube-api / embedded store: apply to Ready "
        f"p50 {percentile(operator.ready, 0.5) / percentile(embedded.ready, 0.5):.2f}x, "
        f"p99 {percentile(operator.ready, 0.99) / percentile(embedded.ready, 0.99):.2f}x; "
        "split to children "
        f"p50 {percentile(operator.split, 0.5) / percentile(embedded.split, 0.5):.2f}x, "
        f"p99 {percentile(operator.split, 0.99) / percentile(embedded.split, 0.99):.2f}x"
    )


if __name__ == "__main__":
    main()
