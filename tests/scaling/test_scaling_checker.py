"""The scaling checker's CI-sized run: 20 splits and merges, a broker and a controller killed
with SIGKILL, and nothing lost, reordered or (for cumulative acks) duplicated."""

from __future__ import annotations

from pathlib import Path

import pytest
from scaling_checker import CUMULATIVE, CheckerConfig, run_checker

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("store", ["embedded", "kubeapi"])
async def test_scaling_checker_finds_no_violation(tmp_path: Path, store: str) -> None:
    """On the embedded store, and on the Kubernetes path: every broker and controller through
    the kubernetes store adapter, against ``stctl kube-api``."""
    config = CheckerConfig(store=store)
    report = await run_checker(tmp_path, config)
    print(report.render())
    assert report.operations.get("split", 0) + report.operations.get("merge", 0) >= 20
    assert report.kills == {"broker": 1, "controller": 1}
    assert report.acked > 1000
    for subscription, figures in report.per_subscription.items():
        assert figures["lost"] == 0, (subscription, figures)
        assert figures["reordered"] == 0, (subscription, figures)
        if subscription in CUMULATIVE:
            assert figures["duplicated"] == 0, (subscription, figures)
