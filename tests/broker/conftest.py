"""Fixtures for broker tests: a real broker process per test."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from support.broker_process import BrokerProcess


@pytest.fixture
async def broker(tmp_path: Path) -> AsyncIterator[BrokerProcess]:
    process = BrokerProcess(tmp_path, f"embedded://{tmp_path / 'store.db'}")
    await process.start()
    try:
        yield process
    finally:
        process.stop()
