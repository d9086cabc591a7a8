"""A separate OS process that writes to an embedded store, for the multi-process tests.

writer_process.py cas PATH NAME COUNT
    Increment spec.count of the ScalableTopic default/NAME COUNT times by compare-and-swap,
    retrying on Conflict; print ``ok <resourceVersion> <count>`` after each committed write.
writer_process.py churn PATH PREFIX
    Create and replace ScalableTopics churn/PREFIX-<n> as fast as possible, forever; print
    ``<name> <resourceVersion> <sha256 of the payload>`` after each write has returned.
writer_process.py create PATH NAME
    Create the ScalableTopic default/NAME and exit.
writer_process.py watch PATH NAME
    Watch ScalableTopics with the fallback poll off, create default/NAME and print ``ready``
    once the watch has delivered it (its feed's wake pipe is in place by then), then print the
    name of every object the watch delivers after it, until killed.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import sys

from scalable_topics.model.resources import API_VERSION
from scalable_topics.store import Conflict, EmbeddedStore, Object

CHURN_NAMESPACE = "churn"
CHURN_OBJECTS = 20


def emit(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


async def cas(path: str, name: str, count: int) -> None:
    store = await EmbeddedStore.open(path, poll_interval=0.01)
    done = 0
    while done < count:
        current = await store.get("ScalableTopic", "default", name)
        value = current["spec"]["count"] + 1
        try:
            written = await store.replace({**current, "spec": {"count": value}})
        except Conflict:
            continue
        done += 1
        emit(f"ok {written['metadata']['resourceVersion']} {value}")
    await store.close()


def churn_object(name: str, sequence: int) -> Object:
    payload = os.urandom(16 + sequence % 200).hex()
    return {
        "apiVersion": API_VERSION,
        "kind": "ScalableTopic",
        "metadata": {"name": name, "namespace": CHURN_NAMESPACE},
        "spec": {
            "sequence": sequence,
            "payload": payload,
            "sha": hashlib.sha256(payload.encode()).hexdigest(),
        },
    }


async def churn(path: str, prefix: str) -> None:
    store = await EmbeddedStore.open(path)
    latest: dict[str, Object] = {}
    sequence = 0
    while True:  # until killed
        name = f"{prefix}-{sequence % CHURN_OBJECTS}"
        wanted = churn_object(name, sequence)
        if name in latest:
            wanted["metadata"]["resourceVersion"] = latest[name]["metadata"]["resourceVersion"]
            written = await store.replace(wanted)
        else:
            written = await store.create(wanted)
        latest[name] = written
        emit(f"{name} {written['metadata']['resourceVersion']} {written['spec']['sha']}")
        sequence += 1


def named(name: str) -> Object:
    return {
        "apiVersion": API_VERSION,
        "kind": "ScalableTopic",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {},
    }


async def create(path: str, name: str) -> None:
    async with await EmbeddedStore.open(path) as store:
        await store.create(named(name))


async def watch(path: str, name: str) -> None:
    # Neither poll: only a wake pipe brings another process's write.
    store = await EmbeddedStore.open(path, poll_interval=3600, fallback_poll_interval=3600)
    start = (await store.list("ScalableTopic")).resource_version
    async with store.watch("ScalableTopic", resource_version=start) as events:
        await store.create(named(name))
        async for event in events:
            seen = event.object["metadata"]["name"]
            emit("ready" if seen == name else seen)


def main(argv: list[str]) -> None:
    mode, path, *rest = argv
    if mode == "cas":
        asyncio.run(cas(path, rest[0], int(rest[1])))
    elif mode == "churn":
        asyncio.run(churn(path, rest[0]))
    elif mode == "create":
        asyncio.run(create(path, rest[0]))
    elif mode == "watch":
        asyncio.run(watch(path, rest[0]))
    else:
        raise SystemExit(f"unknown mode {mode!r}")


if __name__ == "__main__":
    main(sys.argv[1:])
