"""``stctl operator`` as a process: ready once its caches are synced, unready while it cannot
reach the Kubernetes API, ready again when the API is back; kopf's liveness endpoint reports
the replica's shards and its store health throughout, and SIGTERM ends it cleanly with its
shard Leases released."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from support.eventually import eventually
from support.kubeapi_process import KubeApiProcess
from support.kubectl import Kubectl, find_kubectl
from support.operator_process import OperatorProcess
from support.ports import port_below_the_ephemeral_range

pytestmark = pytest.mark.slow

SYSTEM_NAMESPACE = "scalable-topics"


async def liveness(port: int) -> dict[str, Any]:
    async with (
        aiohttp.ClientSession() as http,
        http.get(f"http://127.0.0.1:{port}/healthz") as answer,
    ):
        assert answer.status == 200
        result: dict[str, Any] = await answer.json()
        return result


async def following(operator: OperatorProcess) -> dict[str, float]:
    """The st_informer_following gauge of each kind, from the operator's /metrics."""
    async with aiohttp.ClientSession() as http, http.get(operator.url + "/metrics") as answer:
        text = await answer.text()
    found = {}
    for line in text.splitlines():
        if line.startswith("st_informer_following{"):
            labels, value = line.rsplit(" ", 1)
            found[labels.split('"')[1]] = float(value)
    return found


async def led_shards(operator: OperatorProcess) -> float:
    async with aiohttp.ClientSession() as http, http.get(operator.url + "/metrics") as answer:
        text = await answer.text()
    for line in text.splitlines():
        if line.startswith("st_controller_led_shards "):
            return float(line.split()[1])
    return -1.0


async def test_ready_while_it_follows_the_api_and_unready_while_it_cannot_reach_it(
    tmp_path: Path,
) -> None:
    api = KubeApiProcess(
        tmp_path, f"embedded://{tmp_path / 'store.db'}", namespaces=(SYSTEM_NAMESPACE,)
    )
    health_port = port_below_the_ephemeral_range()
    operator = OperatorProcess(
        tmp_path, api.kubeconfig, "op-a", extra=("--health-listen", f"127.0.0.1:{health_port}")
    )
    try:
        await api.start()
        await operator.start()
        await operator.wait_ready()
        assert await operator.readiness() == (200, "ok\n")
        assert await following(operator) == {
            "ScalableTopic": 1,
            "Segment": 1,
            "Lease": 1,
            "ConfigMap": 1,
        }

        async def holds_every_shard() -> bool:
            report = await liveness(health_port)
            return len(report["leadership"]["shards"]) == 16 and report["store"]["following"]

        # kopf keeps a probe's answer for 10 s: the first answers may predate the shards.
        await eventually(holds_every_shard, "the liveness report to show all 16 shards held")

        api.kill()

        async def unready() -> bool:
            return (await operator.readiness())[0] == 503

        await eventually(unready, "the operator to report unready without its API")
        status, reason = await operator.readiness()
        assert status == 503 and "not watching" in reason, reason
        assert 0 in (await following(operator)).values()
        # Alive all the same: restarting it would not bring the API back.
        report = await liveness(health_port)
        assert "leadership" in report

        await api.start()  # the same port, certificates and token

        async def ready() -> bool:
            return (await operator.readiness())[0] == 200

        await eventually(ready, "the operator to be ready again once the API is back")

        # An outage that outlasts the renew deadline gives the shards up, to be taken again.
        # Stop only once they all are, or a take still in flight when SIGTERM comes is one the
        # operator never learns it won (and so cannot release). A shorter outage keeps them;
        # a renewal cancelled mid-request by SIGTERM then leaves the cache behind the Lease,
        # and the release must still get through.
        async def leads_every_shard_again() -> bool:
            return await led_shards(operator) == 16

        await eventually(leads_every_shard_again, "the operator to hold all 16 shards again")
        operator.stop()
        assert operator.exit_code == 0, operator.log()
        kubectl = find_kubectl()
        assert kubectl is not None
        (tmp_path / "kubectl").mkdir()
        leases = json.loads(
            await Kubectl(kubectl, api.kubeconfig, tmp_path / "kubectl")(
                "get", "leases", "-n", SYSTEM_NAMESPACE, "-o", "json"
            )
        )["items"]
        holders = {
            lease["metadata"]["name"]: lease["spec"].get("holderIdentity")
            for lease in leases
            if lease["metadata"]["name"].startswith("scalabletopics-shard-")
        }
        assert len(holders) == 16
        assert not any(holders.values()), f"SIGTERM releases every shard Lease: {holders}"
    finally:
        operator.stop()
        api.stop()
