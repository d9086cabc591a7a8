"""A broker's store client keeps the request budget its flags set, and ``/metrics`` shows it
with the client's requests and waits (how requests wait is tests/store/test_store_budget.py)."""

from __future__ import annotations

from pathlib import Path

import aiohttp
import pytest
from prometheus_client.parser import text_string_to_metric_families

from support.broker_process import BrokerProcess

pytestmark = pytest.mark.slow


async def scrape(url: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    async with aiohttp.ClientSession() as http, http.get(url + "/metrics") as response:
        text = await response.text()
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


async def test_a_broker_keeps_the_budget_of_its_flags_and_shows_its_requests(
    tmp_path: Path,
) -> None:
    broker = BrokerProcess(
        tmp_path,
        f"embedded://{tmp_path / 'store.db'}",
        None,
        "--store-qps",
        "20",
        "--store-burst",
        "3",
    )
    await broker.start()
    try:
        metrics = await scrape(broker.url)
    finally:
        broker.stop()
    assert (metrics[("st_store_budget_qps", ())], metrics[("st_store_budget_burst", ())]) == (20, 3)
    requests = {
        (dict(labels)["verb"], dict(labels)["kind"]): value
        for (name, labels), value in metrics.items()
        if name == "st_store_requests_total"
    }
    assert requests[("get", "Lease")] >= 1  # the heartbeat Lease: read, then written
    assert requests[("create", "Lease")] >= 1
    for name in (
        "st_store_request_waits_total",
        "st_store_request_wait_seconds_total",
        "st_store_requests_waiting",
    ):
        assert {labels for (n, labels) in metrics if n == name} == {
            (("priority", "lease"),),
            (("priority", "bulk"),),
        }


async def test_an_unlimited_broker_counts_its_requests_and_never_waits(tmp_path: Path) -> None:
    broker = BrokerProcess(tmp_path, f"embedded://{tmp_path / 'store.db'}")
    await broker.start()
    try:
        metrics = await scrape(broker.url)
    finally:
        broker.stop()
    assert (metrics[("st_store_budget_qps", ())], metrics[("st_store_budget_burst", ())]) == (0, 0)
    assert sum(v for (name, _), v in metrics.items() if name == "st_store_requests_total") > 0
    assert {
        labels: value
        for (name, labels), value in metrics.items()
        if name == "st_store_request_waits_total"
    } == {(("priority", "bulk"),): 0, (("priority", "lease"),): 0}
