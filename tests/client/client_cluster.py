"""Real ``stctl broker`` and ``stctl controller`` processes on loopback around one embedded
store, for end-to-end tests of the client: topics are created by writing a ScalableTopic into
the store, splits and merges are asked for as ``stctl topics split/merge`` does."""

from __future__ import annotations

import asyncio
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from scalable_topics.admin.scale_requests import request_scaling
from scalable_topics.client import Client
from scalable_topics.model.layout import ChangeKind
from scalable_topics.model.resources import ScalableTopic
from scalable_topics.store import EmbeddedStore
from support.broker_process import BrokerProcess
from support.controller_process import ControllerProcess

NAMESPACE = "default"
GRACE_SECONDS = 3.0


@dataclass
class ClientCluster:
    root: Path
    store: EmbeddedStore
    brokers: list[BrokerProcess]
    controller: ControllerProcess

    @property
    def service_url(self) -> str:
        return ",".join(broker.ws_url for broker in self.brokers)

    def client(self, **options: float) -> Client:
        return Client(self.service_url, client_name="tests", **options)  # type: ignore[arg-type]

    async def create_topic(
        self, name: str, initial: int = 2, subscriptions: Sequence[tuple[str, str]] = ()
    ) -> None:
        topic = ScalableTopic.model_validate(
            {
                "metadata": {"name": name, "namespace": NAMESPACE},
                "spec": {
                    "initialSegments": initial,
                    "subscriptions": [{"name": n, "type": t} for n, t in subscriptions],
                },
            }
        )
        await self.store.create(topic.to_wire())
        async with asyncio.timeout(20):
            while (await self.read_topic(name)).status.phase != "Ready":
                await asyncio.sleep(0.05)

    async def read_topic(self, name: str) -> ScalableTopic:
        raw = await self.store.get(ScalableTopic.KIND, NAMESPACE, name)
        return ScalableTopic.model_validate(raw)

    async def split(self, name: str, segment_id: int) -> None:
        outcome = await request_scaling(
            self.store, NAMESPACE, name, ChangeKind.SPLIT, (segment_id,), 20
        )
        assert outcome.result == "Succeeded", outcome.message

    async def merge(self, name: str, first: int, second: int) -> None:
        outcome = await request_scaling(
            self.store, NAMESPACE, name, ChangeKind.MERGE, (first, second), 20
        )
        assert outcome.result == "Succeeded", outcome.message

    async def active_ids(self, name: str) -> list[int]:
        """Active segments in hash-range order."""
        segments = (await self.read_topic(name)).status.segments
        active = [s for s in segments if s.state == "Active"]
        return [s.id for s in sorted(active, key=lambda s: s.hash_range.start)]


async def start_cluster(root: Path, store: EmbeddedStore, brokers: int) -> ClientCluster:
    store_url = f"embedded://{root / 'store.db'}"
    processes = []
    for index in range(brokers):
        broker_root = root / f"b{index}"
        broker_root.mkdir()
        processes.append(BrokerProcess(broker_root, store_url))
    controller = ControllerProcess(
        root,
        store_url,
        "controller-0",
        listen=True,
        extra=("--consumer-grace-period", str(GRACE_SECONDS)),
    )
    controller.start()
    await asyncio.gather(*(broker.start() for broker in processes))
    return ClientCluster(root, store, processes, controller)


async def stop_cluster(cluster: ClientCluster) -> None:
    for broker in cluster.brokers:
        broker.stop()
    cluster.controller.stop()


def by_key(received: Sequence[tuple[str, int]]) -> dict[str, list[int]]:
    grouped: dict[str, list[int]] = defaultdict(list)
    for key, sequence in received:
        grouped[key].append(sequence)
    return dict(grouped)


def payload(key: str, sequence: int) -> bytes:
    return f"{key}:{sequence}".encode()


def parse(data: bytes) -> tuple[str, int]:
    key, sequence = data.decode().rsplit(":", 1)
    return key, int(sequence)


async def produce(
    client: Client, topic: str, keys: Sequence[str], rounds: range
) -> list[tuple[str, int]]:
    """Send ``key:n`` for every round n and key (keys interleaved), waiting for each receipt."""
    producer = await client.create_producer(topic)
    sent = []
    try:
        for sequence in rounds:
            for key in keys:
                await producer.send(payload(key, sequence), key=key)
                sent.append((key, sequence))
    finally:
        await producer.close()
    return sent
