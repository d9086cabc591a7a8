"""One cluster for the whole e2e module, of the target ``--e2e-target`` names."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
import pytest_asyncio
from e2e_clusters import Cluster, KindCluster, LocalCluster


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def cluster(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[Cluster]:
    root = tmp_path_factory.mktemp("e2e")
    target = request.config.getoption("--e2e-target")
    running: LocalCluster | KindCluster = (
        LocalCluster(root) if target == "local" else KindCluster(root)
    )
    try:
        await running.start()
        yield running
    except BaseException:
        if isinstance(running, LocalCluster):
            print(running.logs())  # what each process said, with the failure
        raise
    finally:
        running.stop()
