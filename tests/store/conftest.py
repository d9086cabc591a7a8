"""Fixtures of the store tests: the contract suite runs once per adapter in ADAPTERS.

"kubeapi" is the Kubernetes adapter through our own API server (scalable_topics.kubeapi);
"cluster", the Kubernetes adapter on a real cluster, runs only when CLUSTER_KUBECONFIG_ENV names
its kubeconfig (``make test-kubernetes-store``; see tests/store/api_targets.py).
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from api_targets import cluster_backend, kubeapi_backend
from store_testkit import TEST_KINDS, Backend

from scalable_topics.model.clock import Clock
from scalable_topics.store import BudgetedStore, BudgetSettings, EmbeddedStore, Store
from support.memory_store import MemoryBackend, MemoryStore

# A later adapter (e.g. a Kubernetes API server in a test cluster) adds its name here and a
# branch in store_backend. "memory" is the tests' own in-memory store (tests/support): the
# fake-time tests run on it, so it must keep the same contract. "budgeted" is the embedded
# store behind a request budget tight enough that the suite's bursts wait for tokens, as
# open_store hands it to every component.
ADAPTERS = ["embedded", "memory", "budgeted", "kubeapi"]
CLUSTER_KUBECONFIG_ENV = "ST_STORE_CONTRACT_KUBECONFIG"
CLUSTER_CONTEXT_ENV = "ST_STORE_CONTRACT_CONTEXT"  # optional: a context other than the current
if os.environ.get(CLUSTER_KUBECONFIG_ENV):
    ADAPTERS.append("cluster")
CONTRACT_BUDGET = BudgetSettings(qps=500, burst=10)


def embedded_backend(path: Path) -> Backend:
    async def opener(clock: Clock | None, history_limit: int | None) -> Store:
        # No fallback poll: a watch sees another instance's writes only if their commits
        # wake its feed (store/embedded_wake.py), so a lost wakeup fails the suite.
        options: dict[str, Any] = {
            "clock": clock,
            "poll_interval": 0.01,
            "fallback_poll_interval": 3600.0,
            "kinds": TEST_KINDS,
        }
        if history_limit is not None:
            options["history_limit"] = history_limit
        return await EmbeddedStore.open(path, **options)

    return Backend("embedded", f"embedded://{path}", opener, compacts_on_request=True)


def budgeted_backend(path: Path) -> Backend:
    embedded = embedded_backend(path)

    async def opener(clock: Clock | None, history_limit: int | None) -> Store:
        return BudgetedStore(await embedded.opener(clock, history_limit), CONTRACT_BUDGET)

    return Backend("budgeted", embedded.url, opener, compacts_on_request=True)


def memory_backend() -> Backend:
    shared = MemoryBackend()

    async def opener(clock: Clock | None, history_limit: int | None) -> Store:
        if history_limit is not None:
            shared.history_limit = history_limit
        return MemoryStore(shared, clock=clock, kinds=TEST_KINDS)

    return Backend("memory", "memory:", opener, compacts_on_request=True)


@pytest.fixture(params=ADAPTERS)
async def store_backend(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Backend]:
    """Several store instances on one backend; each test gets a fresh, empty backend."""
    if request.param == "embedded":
        backend = embedded_backend(tmp_path / "store.db")
    elif request.param == "memory":
        backend = memory_backend()
    elif request.param == "budgeted":
        backend = budgeted_backend(tmp_path / "store.db")
    elif request.param == "kubeapi":
        backend = kubeapi_backend(tmp_path)
    elif request.param == "cluster":
        backend = cluster_backend(
            os.environ[CLUSTER_KUBECONFIG_ENV], os.environ.get(CLUSTER_CONTEXT_ENV) or None
        )
    else:
        raise AssertionError(f"no fixture for adapter {request.param!r}")
    yield backend
    await backend.close_all()


@pytest.fixture
async def store(store_backend: Backend) -> Store:
    return await store_backend.new_store()
