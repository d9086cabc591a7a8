"""The wire fuzzer's CI-sized run: a fixed seed and 30,000 frames against a real broker and
controller, and the oracle (``run_fuzz.Outcome.failures``): no crash or restart, no
InternalError answer, no traceback or orphaned task failure logged, no connection left
unanswered, no answer that does not decode, and a producer/consumer round trip after it.
``make fuzz`` runs the same for a million frames."""

from __future__ import annotations

from pathlib import Path

import pytest
from run_fuzz import fuzz
from wire_fuzzer import FRAME_KINDS

pytestmark = pytest.mark.slow

SEED = 20261126
FRAMES = 30_000
PARALLEL = 16


async def test_the_broker_survives_the_wire_fuzzer(tmp_path: Path) -> None:
    outcome = await fuzz(tmp_path, SEED, FRAMES, PARALLEL)
    print(outcome.render())
    assert outcome.failures == []
    assert outcome.round_trip == 200
    tally = outcome.tally
    assert tally.frames >= FRAMES
    assert set(tally.frames_by_kind) >= set(FRAME_KINDS) - {"oversize"}  # oversize is rare
    assert any(kind.startswith("ws: ") for kind in tally.frames_by_kind)
    assert tally.connections > 500
    # The frames reached real segments: batches were stored and messages delivered.
    assert tally.answers["SendReceipt"] > 0
    assert tally.answers["Message"] > 0
    assert tally.answers["Error MalformedFrame"] > 0
