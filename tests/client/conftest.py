"""A cluster of real broker and controller processes per test, for the client's e2e tests."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from client_cluster import ClientCluster, start_cluster, stop_cluster

from scalable_topics.store import EmbeddedStore


@pytest.fixture
async def cluster(tmp_path: Path) -> AsyncIterator[ClientCluster]:
    """Two brokers and a controller serving consumer sessions."""
    async with await EmbeddedStore.open(tmp_path / "store.db") as store:
        running = await start_cluster(tmp_path, store, brokers=2)
        try:
            yield running
        finally:
            await stop_cluster(running)
