"""The wire fuzzer against a real broker: ``make fuzz`` (``FRAMES=1000000`` by default).

    python tests/fuzz/run_fuzz.py --frames 1000000 [--seed N] [--parallel 16]

Starts a broker and a controller on an embedded store with a fuzzed topic
(``fuzz_system.py``), sends ``--frames`` frames over ``--parallel`` connections at a time
(``fuzz_campaign.py``, frames from ``wire_fuzzer.py``), then checks the oracle: no crash or
restart, no InternalError answer, no traceback or orphaned task failure in the logs, no
stalled connection or undecodable answer, and a producer/consumer round trip through the
fuzzed topic. Prints the figures and exits 1 when anything is wrong. A run is repeatable from
its seed: connection ``n`` always plays the frames of ``random.Random(f"{seed}/{n}")``, but
for what depends on the answers it got (the ids of the producers and consumers the broker
opened, the message ids it was delivered), which timing may change.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import shutil
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
for path in (HERE, HERE.parent):  # run as a script: tests/support is the package support
    if str(path) not in sys.path:
        sys.path.insert(0, str(path))

from fuzz_campaign import Campaign, Tally  # noqa: E402
from fuzz_system import fuzzed_system  # noqa: E402

DEFAULT_FRAMES = 1_000_000
DEFAULT_PARALLEL = 16
_SHOWN_PROBLEMS = 5
# Findings that fail a run: a bug in the broker, each.
FAILING_FINDINGS = ("InternalError answer", "undecodable answer", "text answer", "stall")


@dataclass
class Outcome:
    seed: int
    tally: Tally
    problems: list[str] = field(default_factory=list)
    round_trip: int = 0

    @property
    def failures(self) -> list[str]:
        failing = [
            f"{count} {what}"
            for what, count in self.tally.finding_counts.items()
            if what in FAILING_FINDINGS and count
        ]
        return failing + self.problems

    def render(self) -> str:
        failures = self.failures
        return "\n".join(
            [
                f"wire fuzzer, seed {self.seed}",
                self.tally.render(),
                "crashes or restarts: "
                + str(sum("exited" in p or "restarted" in p for p in self.problems)),
                f"InternalError answers: {self.tally.internal_errors}",
                "orphaned task failures: "
                + str(sum("Task exception was never retrieved" in p for p in self.problems)),
                "tasks destroyed pending: "
                + str(sum("Task was destroyed but it is pending" in p for p in self.problems)),
                "tracebacks logged: " + str(sum("Traceback" in p for p in self.problems)),
                f"round trip after the fuzzing: {self.round_trip} messages produced and consumed",
                "CLEAN" if not failures else f"FAILED: {len(failures)} problems, the first ones:",
                *failures[:_SHOWN_PROBLEMS],
            ]
        )


async def fuzz(
    root: Path,
    seed: int,
    frames: int,
    parallel: int = DEFAULT_PARALLEL,
    progress: Callable[[Tally], None] | None = None,
    replay: int | None = None,
) -> Outcome:
    """Fuzz a fresh system under ``root``; with ``replay``, only that connection of the seed,
    printing its frames and answers."""
    async with fuzzed_system(root) as system:
        campaign = Campaign(
            "127.0.0.1",
            system.port,
            system.target,
            seed=seed,
            frames=frames,
            parallel=parallel,
            serving=system.broker_running,
        )
        if replay is not None:
            tally = await campaign.replay(replay, print)
        else:
            tally = await campaign.run(progress)
        outcome = Outcome(seed, tally, system.problems())
        if not outcome.problems:
            try:
                outcome.round_trip = await system.round_trip()
            except Exception as error:  # the oracle's last check: reported as a failure
                outcome.problems.append(f"the round trip after the fuzzing failed: {error!r}")
            outcome.problems += system.problems()  # anything the round trip itself logged
        return outcome


def _progress(tally: Tally) -> None:
    rate = tally.frames / tally.seconds if tally.seconds else 0.0
    findings = sum(tally.finding_counts.values())
    print(
        f"  {tally.seconds:6.0f} s: {tally.frames} frames ({rate:,.0f}/s), "
        f"{tally.connections} connections, {findings} findings",
        flush=True,
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--frames", type=int, default=DEFAULT_FRAMES)
    parser.add_argument("--seed", type=int, default=None, help="default: a random one, printed")
    parser.add_argument(
        "--parallel", type=int, default=DEFAULT_PARALLEL, help="connections at a time"
    )
    parser.add_argument("--keep", action="store_true", help="keep the data directory and logs")
    parser.add_argument(
        "--replay",
        type=int,
        metavar="N",
        help="play only connection N of --seed (a finding names it SEED/N), showing its frames",
    )
    args = parser.parse_args()
    seed = random.randrange(2**32) if args.seed is None else args.seed
    if args.replay is not None and args.seed is None:
        parser.error("--replay needs the --seed of the run that found it")
    if args.replay is None:
        print(
            f"wire fuzzer: {args.frames} frames, seed {seed}, "
            f"{args.parallel} connections at a time",
            flush=True,
        )
    else:
        print(f"wire fuzzer: connection {seed}/{args.replay} alone", flush=True)
    directory = Path(tempfile.mkdtemp(prefix="wire-fuzz-"))
    try:
        outcome = asyncio.run(
            fuzz(directory, seed, args.frames, args.parallel, _progress, args.replay)
        )
        print(outcome.render())
    finally:
        if args.keep:
            print(f"logs and data kept in {directory}")
        else:
            shutil.rmtree(directory, ignore_errors=True)
    return 0 if not outcome.failures else 1


if __name__ == "__main__":
    sys.exit(main())
