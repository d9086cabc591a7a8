"""Splits and merges under load on the Kubernetes path, against the embedded store.

The scaling checker's workload (keyed producers, a Stream and a Key_Shared subscription, random
splits and merges, no kills) runs twice: every broker and controller process on the embedded
store file, then every one through the kubernetes store adapter against ``stctl kube-api``
serving that file. Prints acknowledged messages per second, the time the run took per
operation, and the Kubernetes path's figures as ratios to the embedded store's. The producers
pace themselves (a round of keys every 20 ms), so messages per second show whether the path
keeps up with that load; the time per operation shows what the path costs a split or merge. Each run must be clean (no
message lost or reordered) for its figures to count.

Figures only: nothing here asserts on timing.

    python benchmarks/bench_kube_path.py [--operations 20]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1] / "tests"
for folder in (TESTS, TESTS / "scaling"):
    if str(folder) not in sys.path:
        sys.path.insert(0, str(folder))

from scaling_checker import CheckerConfig, Report, run_checker  # noqa: E402


async def measure(store: str, operations: int) -> Report:
    config = CheckerConfig(operations=operations, broker_kills=0, controller_kills=0, store=store)
    with tempfile.TemporaryDirectory(prefix=f"bench-kube-path-{store}-") as root:
        return await run_checker(Path(root), config)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--operations", type=int, default=20)
    args = parser.parse_args()
    rates: dict[str, float] = {}
    per_operation: dict[str, float] = {}
    for store in ("embedded", "kubeapi"):
        report = asyncio.run(measure(store, args.operations))
        operations = sum(report.operations.values())
        rates[store] = report.acked / report.seconds
        per_operation[store] = report.seconds / max(operations, 1)
        print(
            f"split/merge under load ({store}): {operations} operations, {report.acked} "
            f"messages acknowledged in {report.seconds:.1f} s = {rates[store]:,.0f} msgs/s, "
            f"{per_operation[store]:.2f} s per operation, "
            f"{'clean' if report.clean else 'VIOLATIONS FOUND'}"
        )
    print(
        "split/merge under load, Kubernetes path / embedded store: throughput "
        f"{rates['kubeapi'] / rates['embedded']:.2f}x, time per operation "
        f"{per_operation['kubeapi'] / per_operation['embedded']:.2f}x"
    )


if __name__ == "__main__":
    main()
