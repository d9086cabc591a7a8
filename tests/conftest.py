"""Fixtures for every test folder; what they share beyond fixtures is in tests/support."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from scalable_topics.store import EmbeddedStore


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[EmbeddedStore]:
    """An embedded store on a fresh file (folders with a store of their own override it)."""
    async with await EmbeddedStore.open(tmp_path / "store.db") as opened:
        yield opened
