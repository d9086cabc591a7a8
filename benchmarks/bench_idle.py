"""What an idle system costs, and how fast a standby takes over: the two sides of lease timing.

Idle: a real ``stctl standalone`` (no topic, no client, no load job) on a temporary data
directory, with and without its Kubernetes API, with one broker and with two (the second a
child process sharing the store file). Once it serves and has settled, the CPU time of its
whole process tree (from /proc: every live descendant's user and system time, and what the
reaped ones left in their parents) over a window, as a share of one core.

Failover: two ``stctl controller`` processes (and a broker) on one embedded store, with
standalone's lease timing and then with the default one, and ``--topics`` topics shared
between them; one controller is killed with SIGKILL, and the figure is the time until the
survivor's identity stands in every topic's status (a fresh controller then replaces the
killed one, and the next round kills the other). Renewing less often must not make this
longer: a takeover waits a lease duration after the last renewal it saw.

With ``--baseline DIR`` every figure is measured twice, alternately: with the code of this
tree and with an older ``scalable_topics`` package in DIR (the processes run with DIR first on
PYTHONPATH), e.g. ``git archive <commit> operator | tar -x -C /tmp/old`` and ``--baseline
/tmp/old/operator``. The benchmark's own watch of the topics polls every 5 ms whichever code
the controllers run, so that it sees a takeover as soon with either.

Figures only: nothing here asserts on timing.

    python benchmarks/bench_idle.py [--settle 10] [--window 30] [--topics 20] [--kills 5]
        [--only idle|failover] [--baseline DIR]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from scalable_topics.commands.standalone_system import STANDALONE_TIMING
from scalable_topics.controller.leader import ElectionTiming
from scalable_topics.model.ownership import DEFAULT_SHARD_COUNT, holder, shard_of_lease
from scalable_topics.model.resources import ScalableTopic
from scalable_topics.store import EmbeddedStore
from scalable_topics.store.informer import Informer
from scalable_topics.store.kinds import LEASE
from support.child_process import terminate

SYSTEM_NAMESPACE = "scalable-topics"
START_SECONDS = 60.0
STEP_SECONDS = 120.0  # bounds a stuck step only
TICKS = os.sysconf("SC_CLK_TCK")

Env = dict[str, str]


def environment(source: Path | None) -> Env:
    """The environment of the processes measured: this tree's code, or that in ``source``."""
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    if source is not None:
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(source), env.get("PYTHONPATH")]))
    return env


# -- CPU of a process tree, from /proc ------------------------------------------------------


def _stat(pid: int) -> tuple[int, float] | None:
    """(parent pid, CPU seconds of the process and of its reaped children); None once gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # The command name (field 2) may hold spaces and parentheses: split after its last ')'.
    fields = text[text.rindex(")") + 2 :].split()
    utime, stime, cutime, cstime = (int(value) for value in fields[11:15])
    return int(fields[1]), (utime + stime + cutime + cstime) / TICKS


def tree_cpu(root: int) -> dict[int, float]:
    """Each live process of the tree under ``root`` (included): its CPU seconds so far."""
    stats = {}
    for entry in os.listdir("/proc"):
        if entry.isdecimal():
            stat = _stat(int(entry))
            if stat is not None:
                stats[int(entry)] = stat
    tree, frontier = {root}, [root]
    while frontier:
        parent = frontier.pop()
        for pid, (ppid, _) in stats.items():
            if ppid == parent and pid not in tree:
                tree.add(pid)
                frontier.append(pid)
    return {pid: stats[pid][1] for pid in tree if pid in stats}


def cpu_between(before: dict[int, float], after: dict[int, float]) -> float:
    """CPU seconds the tree used between two samples. A process that ended in between counts
    in its parent's reaped children's time, which is in ``after``; one that started counts
    whole."""
    return sum(seconds - before.get(pid, 0.0) for pid, seconds in after.items())


# -- idle standalone ------------------------------------------------------------------------


@contextlib.asynccontextmanager
async def standalone(root: Path, env: Env, *flags: str) -> AsyncIterator[subprocess.Popen[bytes]]:
    output = root / "standalone.log"
    with output.open("wb") as log:
        process = subprocess.Popen(  # noqa: ASYNC220 - a long-lived child, started once
            [
                *(sys.executable, "-m", "scalable_topics.cli", "standalone"),
                *("--data-dir", str(root / "data"), "--port", "0", "--controller-port", "0"),
                *("--load-job-interval", "0"),
                *flags,
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            env=env,
        )
    try:
        async with asyncio.timeout(START_SECONDS):
            while "stctl standalone: serving" not in output.read_text():
                if process.poll() is not None:
                    raise RuntimeError(f"standalone did not start:\n{output.read_text()}")
                await asyncio.sleep(0.1)
        yield process
    finally:
        terminate(process, timeout=30)


async def idle_share(
    flags: tuple[str, ...], settle: float, window: float, env: Env
) -> tuple[float, int]:
    """(CPU share of one core over ``window``, processes in the tree)."""
    with tempfile.TemporaryDirectory(prefix="bench-idle-") as tmp:
        async with standalone(Path(tmp), env, *flags) as process:
            await asyncio.sleep(settle)
            before = tree_cpu(process.pid)
            started = time.monotonic()
            await asyncio.sleep(window)
            after = tree_cpu(process.pid)
            elapsed = time.monotonic() - started
    return cpu_between(before, after) / elapsed, len(after)


# -- failover between two controllers -------------------------------------------------------


def spawn(root: Path, name: str, env: Env, *args: str) -> subprocess.Popen[bytes]:
    with (root / f"{name}.log").open("ab") as log:
        return subprocess.Popen(
            [sys.executable, "-m", "scalable_topics.cli", *args],
            stdout=log,
            stderr=subprocess.STDOUT,
            env=env,
        )


def spawn_controller(
    root: Path, name: str, timing: ElectionTiming, env: Env
) -> subprocess.Popen[bytes]:
    return spawn(
        root,
        name,
        env,
        *("controller", "--store", f"embedded://{root / 'store.db'}", "--identity", name),
        *("--listen", "127.0.0.1:0"),
        *("--lease-duration", str(timing.lease_duration)),
        *("--renew-deadline", str(timing.renew_deadline)),
        *("--retry-period", str(timing.retry_period)),
    )


def spawn_broker(root: Path, env: Env) -> subprocess.Popen[bytes]:
    """One broker, so that topics get storage and become Ready (their status is written)."""
    return spawn(
        root,
        "broker",
        env,
        *("broker", "--store", f"embedded://{root / 'store.db'}", "--port", "0"),
        *("--data-dir", str(root / "broker"), "--broker-id", "broker-0"),
    )


class Watched:
    """Which controller each topic's status names, and who holds each shard Lease."""

    def __init__(self, store: EmbeddedStore) -> None:
        self.topics = Informer(store, ScalableTopic.KIND)
        self.leases = Informer(store, LEASE.kind, namespace=SYSTEM_NAMESPACE)
        self.changed = asyncio.Event()
        for informer in (self.topics, self.leases):
            informer.subscribe(lambda _: self.changed.set())

    async def __aenter__(self) -> Watched:
        for informer in (self.topics, self.leases):
            informer.start()
            await informer.wait_synced()
        return self

    async def __aexit__(self, *exc: object) -> None:
        for informer in (self.topics, self.leases):
            await informer.stop()

    def leaders(self) -> list[str | None]:
        return [
            ((topic.get("status") or {}).get("controller") or {}).get("identity")
            for topic in self.topics.list()
        ]

    def shard_holders(self) -> list[str | None]:
        return [
            holder(lease)
            for lease in self.leases.list()
            if shard_of_lease(lease["metadata"]["name"]) is not None
        ]

    async def until(self, condition: Callable[[], bool]) -> None:
        async with asyncio.timeout(STEP_SECONDS):
            while not condition():
                self.changed.clear()
                await self.changed.wait()


async def failover(topics: int, kills: int, timing: ElectionTiming, env: Env) -> list[float]:
    """Seconds from each SIGKILL of one of two balanced controllers until the survivor's
    identity stands in every topic's status; a fresh controller then replaces the killed one."""
    figures = []
    with tempfile.TemporaryDirectory(prefix="bench-failover-") as tmp:
        root = Path(tmp)
        running: dict[str, subprocess.Popen[bytes]] = {}
        try:
            async with (
                await EmbeddedStore.open(root / "store.db", fallback_poll_interval=0.005) as store,
                Watched(store) as watched,
            ):
                for index in range(topics):
                    manifest = ScalableTopic.model_validate(
                        {
                            "metadata": {"name": f"topic-{index}", "namespace": "bench"},
                            "spec": {"initialSegments": 1},
                        }
                    ).to_wire()
                    await store.create(manifest)
                running["broker"] = spawn_broker(root, env)
                for name in ("c-0", "c-1"):
                    running[name] = spawn_controller(root, name, timing, env)
                for kill in range(kills):
                    names = sorted(name for name in running if name != "broker")

                    def balanced(names: list[str] = names) -> bool:
                        """Half the shards each, and topics led by both."""
                        holders = watched.shard_holders()
                        leaders = watched.leaders()
                        return (
                            all(holders.count(n) == DEFAULT_SHARD_COUNT // 2 for n in names)
                            and len(leaders) == topics
                            and set(leaders) == set(names)
                        )

                    await watched.until(balanced)
                    victim, survivor = names
                    killed = time.monotonic()
                    running.pop(victim).send_signal(signal.SIGKILL)

                    def taken_over(survivor: str = survivor) -> bool:
                        return set(watched.leaders()) == {survivor}

                    await watched.until(taken_over)
                    figures.append(time.monotonic() - killed)
                    fresh = f"c-{kill + 2}"
                    running[fresh] = spawn_controller(root, fresh, timing, env)
        finally:
            for popen in running.values():
                popen.terminate()
            for popen in running.values():
                try:
                    popen.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    popen.kill()
                    popen.wait()
    return figures


async def run(args: argparse.Namespace) -> None:
    codes = [("this tree", environment(None))]
    if args.baseline is not None:
        codes.insert(0, ("baseline", environment(args.baseline)))
    configurations = [
        ("1 broker, Kubernetes API", ()),
        ("1 broker, --no-kube-api", ("--no-kube-api",)),
        ("2 brokers, Kubernetes API", ("--brokers", "2")),
        ("2 brokers, --no-kube-api", ("--brokers", "2", "--no-kube-api")),
    ]
    if args.only in (None, "idle"):
        print(
            f"idle stctl standalone (no topic, no load job), CPU of its process tree over "
            f"{args.window:g} s after {args.settle:g} s of settling:"
        )
        for label, flags in configurations:
            for code, env in codes:
                share, processes = await idle_share(flags, args.settle, args.window, env)
                print(
                    f"  {label:27} {code:10} {100 * share:5.1f} % of a core ({processes} processes)"
                )
    if args.only == "idle":
        return
    for label, timing, kills in [
        ("standalone's", STANDALONE_TIMING, args.kills),
        ("the default", ElectionTiming(), max(1, args.kills // 2)),
    ]:
        print(
            f"failover, 2 controllers with {label} lease timing (lease "
            f"{timing.lease_duration:g} s, renew deadline {timing.renew_deadline:g} s, retry "
            f"period {timing.retry_period:g} s), {args.topics} topics: the survivor leads every "
            f"topic after a SIGKILL in"
        )
        for code, env in codes:
            figures = await failover(args.topics, kills, timing, env)
            listed = ", ".join(f"{seconds:.2f}" for seconds in figures)
            print(
                f"  {code:10} {listed} s: mean {statistics.fmean(figures):.2f} s, "
                f"max {max(figures):.2f} s"
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--settle", type=float, default=10.0, help="seconds after serving")
    parser.add_argument("--window", type=float, default=30.0, help="seconds measured")
    parser.add_argument("--topics", type=int, default=20, help="topics in the failover")
    parser.add_argument("--kills", type=int, default=5, help="failovers measured")
    parser.add_argument(
        "--only", choices=("idle", "failover"), help="one of the two parts (default both)"
    )
    parser.add_argument(
        "--baseline",
        type=Path,
        metavar="DIR",
        help="also measure the scalable_topics package in DIR, alternately with this tree's",
    )
    args = parser.parse_args()
    asyncio.run(run(args))


if __name__ == "__main__":
    main()
