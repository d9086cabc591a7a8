"""The scaling checker: keyed producers and ordered consumers run through random splits and
merges and random SIGKILLs of a broker and of the controller; afterwards it reports lost
acknowledged messages, per-key order violations and duplicates, each of which must be zero.

Everything goes through the public client API: the Producer, StreamConsumers (cumulative
acks) and key-ordered QueueConsumers (Key_Shared), with splits and merges asked of the Admin
API, against real ``stctl broker`` and ``stctl controller`` processes on loopback.

Definitions, per subscription:
- lost: a message whose send was acknowledged that no consumer received;
- reordered: a key whose messages were first received out of the order they were sent;
- duplicated: a message delivered again after its acknowledgement was durable. Zero is
  required of the cumulative-ack (Stream) subscription; for the individually acked Key_Shared
  one the count is reported as information (at-least-once redelivery).

    python tests/scaling/scaling_checker.py            # the CI-sized run, about a minute
    python tests/scaling/scaling_checker.py --long     # minutes, more operations and kills
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import json
import logging
import random
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
if str(HERE.parent) not in sys.path:  # run as a script: tests/support is the package support
    sys.path.insert(0, str(HERE.parent))

from scalable_topics.client import Client  # noqa: E402
from scalable_topics.client.admin import Admin  # noqa: E402
from scalable_topics.client.errors import ClientError, SendFailed  # noqa: E402
from scalable_topics.protocol import MessageId  # noqa: E402
from support.broker_process import BrokerProcess  # noqa: E402
from support.controller_process import ControllerProcess  # noqa: E402
from support.kubeapi_process import KubeApiProcess  # noqa: E402

TOPIC = "default/checked"
SYSTEM_NAMESPACE = "scalable-topics"  # where brokers and controllers keep their Leases
STREAM, KEYED = "ordered", "keyed"
log = logging.getLogger("scaling_checker")
# Consumers acknowledge without waiting and make it durable in groups, as applications do.
FLUSH_SECONDS = 0.1
FLUSH_MESSAGES = 200
CUMULATIVE = frozenset({STREAM})  # subscriptions whose duplicates count as violations
TIMEOUT = 120.0  # bounds a stuck run only


@dataclass(frozen=True)
class CheckerConfig:
    operations: int = 20
    broker_kills: int = 1
    controller_kills: int = 1
    producers: int = 3
    keys_per_producer: int = 16
    stream_consumers: int = 2
    keyed_consumers: int = 2
    seed: int = 20261122
    # "embedded": every process on the store file; "kubeapi": every process through the
    # kubernetes store adapter, against `stctl kube-api` serving that file (the Kubernetes path).
    store: str = "embedded"

    @classmethod
    def long(cls, seed: int, store: str = "embedded") -> CheckerConfig:
        return cls(operations=120, broker_kills=6, controller_kills=4, seed=seed, store=store)


@dataclass
class Ledger:
    """What was sent and what each subscription saw."""

    acked: set[tuple[str, int]] = field(default_factory=set)
    send_failures: int = 0
    started: float = field(default_factory=time.monotonic)
    # subscription -> key -> sequence numbers in the order first received
    first_seen: dict[str, dict[str, list[int]]] = field(
        default_factory=lambda: defaultdict(lambda: defaultdict(list))
    )
    seen: dict[str, set[tuple[str, int]]] = field(default_factory=lambda: defaultdict(set))
    acknowledged: dict[str, set[tuple[str, int]]] = field(default_factory=lambda: defaultdict(set))
    # subscription -> item -> when its acknowledgement was known durable: to explain a duplicate
    durable_at: dict[str, dict[tuple[str, int], float]] = field(
        default_factory=lambda: defaultdict(dict)
    )
    # subscription -> key -> (sequence, message id) as first received: to explain a violation
    first_where: dict[str, dict[str, list[tuple[int, object]]]] = field(
        default_factory=lambda: defaultdict(lambda: defaultdict(list))
    )
    duplicates: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    deliveries: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    duplicate_examples: dict[str, list[str]] = field(default_factory=lambda: defaultdict(list))

    def received(self, subscription: str, key: str, sequence: int, where: object = None) -> None:
        item = (key, sequence)
        self.deliveries[subscription] += 1
        if item in self.acknowledged[subscription]:
            self.duplicates[subscription] += 1
            if len(self.duplicate_examples[subscription]) < 5:
                first = dict(self.first_where[subscription][key]).get(sequence)
                durable = self.durable_at[subscription].get(item, 0.0)
                self.duplicate_examples[subscription].append(
                    f"{key}:{sequence} first {first}, durable at {durable:.3f} s, again {where}"
                )
        if item not in self.seen[subscription]:
            self.seen[subscription].add(item)
            self.first_seen[subscription][key].append(sequence)
            self.first_where[subscription][key].append((sequence, where))

    def acknowledge(self, subscription: str, items: list[tuple[str, int]]) -> None:
        self.acknowledged[subscription].update(items)
        now = time.monotonic() - self.started
        self.durable_at[subscription].update((item, now) for item in items)

    def where(self, consumer: str, message_id: MessageId) -> str:
        """Where and when a message was received, for the examples."""
        return f"{consumer} {tuple(message_id)} at {time.monotonic() - self.started:.3f} s"

    def lost(self, subscription: str) -> int:
        return len(self.acked - self.seen[subscription])

    def first_reordering(self, subscription: str) -> str | None:
        """The first key received out of order, with the ids around the step back."""
        for key, seen in self.first_where[subscription].items():
            for (sequence, where), (following, where_next) in itertools.pairwise(seen):
                if following < sequence:
                    return f"{key}: {sequence} from {where}, then {following} from {where_next}"
        return None

    def reordered(self, subscription: str) -> int:
        return sum(
            1
            for sequences in self.first_seen[subscription].values()
            if sequences != sorted(sequences)
        )


@dataclass
class Report:
    operations: dict[str, int]
    kills: dict[str, int]
    acked: int
    send_failures: int
    per_subscription: dict[str, dict[str, int]]
    seconds: float
    store: str = "embedded"

    @property
    def clean(self) -> bool:
        return all(
            figures["lost"] == 0
            and figures["reordered"] == 0
            and (figures["duplicated"] == 0 or subscription not in CUMULATIVE)
            for subscription, figures in self.per_subscription.items()
        )

    def render(self) -> str:
        lines = [
            f"scaling checker ({self.store} store): {self.seconds:.1f} s, {self.acked} "
            "acknowledged messages "
            f"({self.send_failures} sends failed or timed out, not counted)",
            "operations: " + ", ".join(f"{k} {v}" for k, v in sorted(self.operations.items())),
            "kills: " + ", ".join(f"{k} {v}" for k, v in sorted(self.kills.items())),
        ]
        for subscription, figures in sorted(self.per_subscription.items()):
            lines.append(
                f"{subscription}: {figures['deliveries']} deliveries, lost {figures['lost']}, "
                f"reordered {figures['reordered']}, duplicated {figures['duplicated']}"
            )
        lines.append("CLEAN" if self.clean else "VIOLATIONS FOUND")
        return "\n".join(lines)


# -- the system under test ---------------------------------------------------------------------


@dataclass
class System:
    root: Path
    brokers: list[BrokerProcess]
    controllers: list[ControllerProcess]

    @property
    def url(self) -> str:
        return ",".join(broker.ws_url for broker in self.brokers)


@asynccontextmanager
async def running_system(root: Path, store: str = "embedded") -> AsyncIterator[System]:
    store_url = f"embedded://{root / 'store.db'}"
    kube_api = None
    if store == "kubeapi":
        kube_api = KubeApiProcess(root, store_url, namespaces=(SYSTEM_NAMESPACE,))
        await kube_api.start()
        store_url = kube_api.adapter_url
    elif store != "embedded":
        raise ValueError(f"unknown store {store!r}: embedded or kubeapi")
    brokers = []
    for index in range(2):
        (root / f"b{index}").mkdir(parents=True, exist_ok=True)
        brokers.append(
            BrokerProcess(root / f"b{index}", store_url, None, "--broker-id", f"broker-{index}")
        )
    controllers = [
        ControllerProcess(
            root,
            store_url,
            f"controller-{index}",
            listen=True,
            extra=("--consumer-grace-period", "5"),
        )
        for index in range(2)
    ]
    system = System(root, brokers, controllers)
    try:
        for broker in brokers:
            await broker.start()
        for controller in controllers:
            controller.start()
        yield system
    finally:
        for controller in controllers:
            controller.stop()
        for broker in brokers:
            broker.stop()
        if kube_api is not None:
            kube_api.stop()


async def leading_controller(admin: Admin, system: System) -> ControllerProcess:
    """The controller process leading the topic now."""
    leader = (await admin.describe_topic(TOPIC))["controller"] or {}
    return next(c for c in system.controllers if c.identity == leader.get("identity"))


# -- workers ---------------------------------------------------------------------------------


async def produce(
    client: Client, name: str, keys: list[str], ledger: Ledger, stop: asyncio.Event
) -> None:
    producer = await client.create_producer(TOPIC, name=name, send_timeout=60)
    sequence = 0
    outstanding: set[asyncio.Task[None]] = set()

    async def confirm(key: str, number: int, future: asyncio.Future[object]) -> None:
        try:
            await future
            ledger.acked.add((key, number))
        except ClientError as error:
            log.debug("%s: sending %s:%d failed: %s", name, key, number, error)
            ledger.send_failures += 1

    while not stop.is_set():
        for key in keys:
            future = await producer.send_async(f"{key}:{sequence}".encode(), key=key)
            task = asyncio.create_task(confirm(key, sequence, future))  # type: ignore[arg-type]
            outstanding.add(task)
            task.add_done_callback(outstanding.discard)
        sequence += 1
        await asyncio.sleep(0.02)
    await asyncio.gather(*outstanding)
    with contextlib.suppress(SendFailed):  # each failure is counted by confirm() already
        await producer.close()


class DurableAcks:
    """Messages acknowledged but not yet known durable; a flush every ``FLUSH_SECONDS`` (or
    ``FLUSH_MESSAGES``) makes them durable, and only then do they count as acknowledged."""

    def __init__(self) -> None:
        self.pending: list[tuple[MessageId, tuple[str, int]]] = []
        self.flushed_at = time.monotonic()

    def due(self) -> bool:
        return bool(self.pending) and (
            len(self.pending) >= FLUSH_MESSAGES
            or time.monotonic() - self.flushed_at >= FLUSH_SECONDS
        )

    def settle(self, durable: Callable[[MessageId], bool]) -> list[tuple[str, int]]:
        """The items now durable; the rest are dropped (they were not acknowledged)."""
        settled = [item for message_id, item in self.pending if durable(message_id)]
        self.pending.clear()
        self.flushed_at = time.monotonic()
        return settled


async def consume_stream(client: Client, name: str, ledger: Ledger, stop: asyncio.Event) -> None:
    consumer = await client.subscribe_stream(TOPIC, STREAM, name)
    acks = DurableAcks()

    async def flush() -> None:
        vector = await consumer.flush_acknowledgements()

        def durable(message_id: MessageId) -> bool:
            floor = vector.get(message_id.segment_id)
            return floor is not None and message_id <= floor

        ledger.acknowledge(STREAM, acks.settle(durable))

    try:
        while not stop.is_set():
            if acks.due():
                await flush()
            try:
                message = await consumer.receive(wait_seconds=FLUSH_SECONDS)
            except ClientError:
                continue
            key, sequence = message.payload.decode().split(":")
            ledger.received(STREAM, key, int(sequence), ledger.where(name, message.message_id))
            if await consumer.acknowledge_cumulative(message):
                acks.pending.append((message.message_id, (key, int(sequence))))
        await flush()
    finally:
        await consumer.close()


async def consume_keyed(client: Client, name: str, ledger: Ledger, stop: asyncio.Event) -> None:
    consumer = await client.subscribe_queue(TOPIC, KEYED, consumer_name=name, key_ordered=True)
    acks = DurableAcks()

    async def flush() -> None:
        try:
            await consumer.flush_acknowledgements()
        except ClientError as error:
            log.debug("%s: flushing acknowledgements failed: %s", name, error)
            acks.settle(lambda _: False)
            return
        ledger.acknowledge(KEYED, acks.settle(lambda _: True))

    try:
        while not stop.is_set():
            if acks.due():
                await flush()
            try:
                message = await consumer.receive(wait_seconds=FLUSH_SECONDS)
            except ClientError:
                continue
            key, sequence = message.payload.decode().split(":")
            ledger.received(KEYED, key, int(sequence), ledger.where(name, message.message_id))
            await consumer.acknowledge(message)
            acks.pending.append((message.message_id, (key, int(sequence))))
        await flush()
    finally:
        await consumer.close()


async def scale_and_kill(
    system: System, config: CheckerConfig, operations: dict[str, int], kills: dict[str, int]
) -> None:
    """Random splits and merges, with the kills spread between them."""
    rng = random.Random(config.seed)
    kill_plan = ["broker"] * config.broker_kills + ["controller"] * config.controller_kills
    kill_at = sorted(rng.sample(range(1, config.operations), len(kill_plan)))
    rng.shuffle(kill_plan)
    kills_due = dict(zip(kill_at, kill_plan, strict=True))
    async with Admin(system.url) as admin:
        index = 0
        while operations["split"] + operations["merge"] < config.operations:
            index += 1
            if index in kills_due:
                await kill(admin, system, kills_due[index], rng)
                kills[kills_due[index]] += 1
            await asyncio.sleep(rng.uniform(0.05, 0.3))
            description = await admin.describe_topic(TOPIC)
            active = sorted(
                (s for s in description["segments"] if s["state"] == "Active"),
                key=lambda s: s["range"],  # 0000-7fff: fixed-width hex sorts by start
            )
            try:
                if len(active) == 1 or (len(active) < 6 and rng.random() < 0.55):
                    await admin.split(TOPIC, rng.choice(active)["id"], wait_seconds=60)
                    operations["split"] += 1
                else:
                    first = rng.randrange(len(active) - 1)
                    await admin.merge(
                        TOPIC, active[first]["id"], active[first + 1]["id"], wait_seconds=60
                    )
                    operations["merge"] += 1
            except ClientError as error:
                operations["refused"] += 1
                print(f"operation {index} refused: {error}", file=sys.stderr)


async def kill(admin: Admin, system: System, kind: str, rng: random.Random) -> None:
    if kind == "broker":
        broker = rng.choice(system.brokers)
        broker.kill()
        await asyncio.sleep(rng.uniform(0.2, 1.0))
        await broker.start()
    else:
        leader = await leading_controller(admin, system)
        leader.kill()
        await asyncio.sleep(rng.uniform(0.2, 1.0))
        leader.start()


# -- the run ---------------------------------------------------------------------------------


async def run_checker(root: Path, config: CheckerConfig) -> Report:
    started = time.monotonic()
    ledger = Ledger()
    operations: dict[str, int] = defaultdict(int)
    kills: dict[str, int] = defaultdict(int)
    async with running_system(root, config.store) as system:
        async with Admin(system.url) as admin:
            await admin.create_topic(
                TOPIC, initial_segments=2, subscriptions=[(STREAM, "Stream"), (KEYED, "Queue")]
            )
            async with asyncio.timeout(30):
                while (await admin.describe_topic(TOPIC))["phase"] != "Ready":
                    await asyncio.sleep(0.05)
        async with asyncio.timeout(TIMEOUT):
            clients = [Client(system.url, client_name=f"checker-{n}") for n in range(3)]
            producing, consuming = asyncio.Event(), asyncio.Event()
            consumers = [
                asyncio.create_task(consume_stream(clients[1], f"stream-{n}", ledger, consuming))
                for n in range(config.stream_consumers)
            ] + [
                asyncio.create_task(consume_keyed(clients[2], f"keyed-{n}", ledger, consuming))
                for n in range(config.keyed_consumers)
            ]
            producers = [
                asyncio.create_task(
                    produce(
                        clients[0],
                        f"producer-{n}",
                        [f"p{n}-key{k}" for k in range(config.keys_per_producer)],
                        ledger,
                        producing,
                    )
                )
                for n in range(config.producers)
            ]
            try:
                await scale_and_kill(system, config, operations, kills)
                producing.set()
                await asyncio.gather(*producers)
                await _caught_up(ledger, consumers)
                if any(ledger.lost(s) for s in (STREAM, KEYED)):
                    await _print_backlog(system)
            finally:
                producing.set()
                consuming.set()
                await asyncio.gather(*producers, *consumers, return_exceptions=True)
                for client in clients:
                    await client.close()
    for subscription in (STREAM, KEYED):
        reordering = ledger.first_reordering(subscription)
        if reordering is not None:
            print(f"{subscription}: first reordering: {reordering}", file=sys.stderr)
        for example in ledger.duplicate_examples[subscription]:
            print(f"{subscription}: duplicated: {example}", file=sys.stderr)
    figures = {
        subscription: {
            "deliveries": ledger.deliveries[subscription],
            "lost": ledger.lost(subscription),
            "reordered": ledger.reordered(subscription),
            "duplicated": ledger.duplicates[subscription],
        }
        for subscription in (STREAM, KEYED)
    }
    return Report(
        dict(operations),
        dict(kills),
        len(ledger.acked),
        ledger.send_failures,
        figures,
        time.monotonic() - started,
        config.store,
    )


async def _print_backlog(system: System) -> None:
    """Where the lost messages sit: the segments with a backlog, and who reads them."""
    async with Admin(system.url) as admin:
        stats = await admin.stats(TOPIC)
        description = await admin.describe_topic(TOPIC)
    print(f"segments: {json.dumps(stats.get('segments'))}", file=sys.stderr)
    print(f"subscriptions: {json.dumps(description['subscriptions'])}", file=sys.stderr)
    brokers = {broker.ws_url: broker for broker in system.brokers}
    for segment in stats.get("segments") or []:
        broker = brokers.get(segment.get("broker"))
        if broker is None or not segment.get("backlog"):
            continue
        _, state = await broker.admin("GET", f"/{TOPIC}/{segment['descriptor']}/stats")
        print(f"segment {segment['id']} dispatch: {json.dumps(state)}", file=sys.stderr)


async def _caught_up(ledger: Ledger, consumers: list[asyncio.Task[None]]) -> None:
    """Wait until every subscription saw every acknowledged message (or a consumer died),
    then a little longer, so that duplicates have a chance to show."""
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(60):
            while any(ledger.lost(s) for s in (STREAM, KEYED)):
                failed = [c for c in consumers if c.done()]
                if failed:
                    failed[0].result()
                await asyncio.sleep(0.1)
    await asyncio.sleep(1.0)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--long", action="store_true", help="minutes: more operations and kills")
    parser.add_argument("--seed", type=int, default=CheckerConfig.seed)
    parser.add_argument(
        "--store",
        choices=("embedded", "kubeapi"),
        default="embedded",
        help="kubeapi: every process reaches the store through the Kubernetes API",
    )
    parser.add_argument(
        "--keep",
        type=Path,
        metavar="DIR",
        help="run in DIR and keep it: the processes' logs, and the client's in checker.log",
    )
    args = parser.parse_args(argv)
    config = (
        CheckerConfig.long(args.seed, args.store)
        if args.long
        else CheckerConfig(seed=args.seed, store=args.store)
    )
    if args.keep is not None:
        args.keep.mkdir(parents=True, exist_ok=True)
        logging.basicConfig(
            filename=args.keep / "checker.log",
            level=logging.DEBUG,
            format="%(asctime)s %(name)s %(levelname)s %(message)s",
        )
        report = asyncio.run(run_checker(args.keep, config))
    else:
        with tempfile.TemporaryDirectory(prefix="scaling-checker-") as root:
            report = asyncio.run(run_checker(Path(root), config))
    print(report.render())
    return 0 if report.clean else 1


if __name__ == "__main__":
    raise SystemExit(main())
