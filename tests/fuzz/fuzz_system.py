"""The system the wire fuzzer attacks, and the oracle it must pass.

A real ``stctl broker`` process and a ``stctl controller`` process (so that watches, consumer
registrations and exclusive grants reach a real controller) on one embedded store, with one
topic of Queue, Stream and Checkpoint subscriptions, split once so that the broker hosts a
sealed segment and two children besides an active one: commands name those segments and
subscriptions and reach real logs, cursors and dispatchers.

The oracle, after the fuzzing: the broker process is the one started and still runs (and the
controller too); neither logged a traceback, "Task exception was never retrieved" or "Task was
destroyed but it is pending"; and a producer and a consumer of the client SDK still make a
round trip through the fuzzed topic.
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

from wire_fuzzer import Target

from scalable_topics.admin.scale_requests import request_scaling
from scalable_topics.client import Client, Producer
from scalable_topics.client.errors import ProducerBusy
from scalable_topics.model.layout import ChangeKind
from scalable_topics.model.resources import ScalableTopic
from scalable_topics.store import EmbeddedStore
from support.broker_process import BrokerProcess
from support.controller_process import ControllerProcess
from support.eventually import eventually

NAMESPACE, TOPIC = "default", "fuzzed"
SUBSCRIPTIONS = (("queue", "Queue"), ("stream", "Stream"), ("checkpoint", "Checkpoint"))
# A fuzzed AcquireExclusive may take the topic; its holder keeps it this long after its
# connection ends, and the round trip waits that out.
GRACE_SECONDS = 1.0
READY_SECONDS = 60.0  # bounds a failing start only
ROUND_TRIP_SECONDS = 120.0  # bounds a failing round trip only
BAD_LOG_LINES = (
    "Traceback",
    "Task exception was never retrieved",
    "Task was destroyed but it is pending",
)
_RECORD_START = re.compile(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d")


@dataclass
class FuzzedSystem:
    root: Path
    store: EmbeddedStore
    broker: BrokerProcess
    controller: ControllerProcess
    target: Target
    broker_pid: int

    @property
    def port(self) -> int:
        return self.broker.port

    def broker_running(self) -> bool:
        return self.broker.process is not None and self.broker.process.poll() is None

    def problems(self) -> list[str]:
        """What the oracle finds wrong with the processes and their logs (empty: nothing)."""
        found = []
        assert self.broker.process is not None
        if self.broker.process.poll() is not None:
            found.append(f"the broker exited with code {self.broker.process.returncode}")
        elif self.broker.process.pid != self.broker_pid:
            found.append("the broker was restarted")
        if self.controller.exit_code is not None:
            found.append(f"the controller exited with code {self.controller.exit_code}")
        for name, path in (
            ("broker", self.broker.log_path),
            ("controller", self.controller.log_path),
        ):
            found += [f"{name} log: {record}" for record in bad_log_records(path)]
        return found

    async def round_trip(self, messages: int = 200) -> int:
        """Produce ``messages`` keyed messages through the client SDK and receive every one
        on a new Queue subscription; returns how many came back (all of them, or it raises)."""
        async with asyncio.timeout(ROUND_TRIP_SECONDS):
            async with Client(self.broker.ws_url, client_name="fuzz-round-trip") as client:
                consumer = await client.subscribe_queue(
                    f"{NAMESPACE}/{TOPIC}", "round-trip", initial_position="Latest"
                )
                producer = await self._producer(client)
                sent = {f"round-trip-{n}".encode() for n in range(messages)}
                for n, payload in enumerate(sorted(sent)):
                    await producer.send_async(payload, key=f"key-{n % 16}")
                await producer.flush()
                received: set[bytes] = set()
                while received != sent:
                    message = await consumer.receive()
                    assert message.payload in sent, f"unexpected message {message.payload!r}"
                    received.add(message.payload)
                    await consumer.acknowledge(message)
                await producer.close()
                await consumer.close()
        return len(received)

    async def _producer(self, client: Client) -> Producer:
        """A Shared producer, once no fuzzed exclusive grant holds the topic any more."""
        created: list[Producer] = []

        async def created_now() -> bool:
            try:
                created.append(await client.create_producer(f"{NAMESPACE}/{TOPIC}"))
            except ProducerBusy:
                return False
            return True

        await eventually(created_now, "a Shared producer admitted", interval=GRACE_SECONDS / 4)
        return created[0]


def bad_log_records(path: Path) -> list[str]:
    """Every record of a log (a line opened by a timestamp, and the lines that continue it)
    that holds a traceback or an orphaned task failure."""
    if not path.exists():
        return []
    records: list[list[str]] = []
    for line in path.read_text(errors="replace").splitlines():
        if _RECORD_START.match(line) or not records:
            records.append([line])
        else:
            records[-1].append(line)
    return [
        "\n".join(record)
        for record in records
        if any(bad in line for line in record for bad in BAD_LOG_LINES)
    ]


@asynccontextmanager
async def fuzzed_system(root: Path) -> AsyncIterator[FuzzedSystem]:
    store_url = f"embedded://{root / 'store.db'}"
    controller = ControllerProcess(
        root,
        store_url,
        "fuzz-controller",
        listen=True,
        extra=("--consumer-grace-period", str(GRACE_SECONDS)),
    )
    broker = BrokerProcess(root, store_url)
    controller.start()
    try:
        await broker.start()
        async with await EmbeddedStore.open(root / "store.db") as store:
            await _create_topic(store)
            outcome = await request_scaling(
                store, NAMESPACE, TOPIC, ChangeKind.SPLIT, (0,), READY_SECONDS
            )
            assert outcome.result == "Succeeded", outcome.message
            topic = await _read_topic(store)
            target = Target(
                f"{NAMESPACE}/{TOPIC}",
                tuple(segment.id for segment in topic.status.segments),
                tuple(name for name, _ in SUBSCRIPTIONS),
                started_ms=int(time.time() * 1000),
            )
            assert broker.process is not None
            yield FuzzedSystem(root, store, broker, controller, target, broker.process.pid)
    finally:
        broker.stop()
        controller.stop()


async def _create_topic(store: EmbeddedStore) -> None:
    topic = ScalableTopic.model_validate(
        {
            "metadata": {"name": TOPIC, "namespace": NAMESPACE},
            "spec": {
                "initialSegments": 2,
                "subscriptions": [{"name": n, "type": t} for n, t in SUBSCRIPTIONS],
            },
        }
    )
    await store.create(topic.to_wire())

    async def ready() -> bool:
        return (await _read_topic(store)).status.phase == "Ready"

    await eventually(ready, f"topic {TOPIC} Ready", timeout=READY_SECONDS)


async def _read_topic(store: EmbeddedStore) -> ScalableTopic:
    return ScalableTopic.model_validate(await store.get(ScalableTopic.KIND, NAMESPACE, TOPIC))
