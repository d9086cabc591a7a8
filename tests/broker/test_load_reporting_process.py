"""A real broker process reporting load: the Segment's load record appears, every sample is
in the Parquet history (read back with pyarrow: the rates times their intervals add up to the
messages sent), and the rows of a deleted segment are removed from the history."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from pathlib import Path

import aiohttp
import pyarrow.dataset as ds
import pytest
from dag_objects import segment_object

from scalable_topics.model.autoscale_config import CLUSTER_CONFIGMAP, CLUSTER_CONFIGMAP_KEY
from scalable_topics.model.hash_range import HashRange
from scalable_topics.model.resources import Segment
from scalable_topics.model.segment import SegmentInfo, SegmentState
from scalable_topics.protocol import BatchMessage
from scalable_topics.store import EmbeddedStore
from support.broker_process import BrokerProcess
from support.eventually import eventually
from support.wire_client import WireClient

pytestmark = pytest.mark.slow

NS, TOPIC, DESCRIPTOR = "default", "orders", "0000-ffff-0"
SENT = 500


def history_rows(root: Path) -> list[dict[str, object]]:
    if not any(root.rglob("*.parquet")):
        return []
    dataset = ds.dataset(str(root), format="parquet", partitioning="hive")
    return list(dataset.to_table().to_pylist())


def messages_in(rows: list[dict[str, object]]) -> float:
    total = 0.0
    for row in rows:
        start, end, rate = row["start"], row["end"], row["msg_rate_in"]
        assert isinstance(start, datetime) and isinstance(end, datetime)
        assert isinstance(rate, float)
        total += rate * (end - start).total_seconds()
    return total


async def metric(broker: BrokerProcess, name: str) -> float:
    async with aiohttp.ClientSession() as http, http.get(broker.url + "/metrics") as response:
        text = await response.text()
    found = re.search(rf"^{name} (\S+)$", text, re.MULTILINE)
    assert found is not None, name
    return float(found.group(1))


async def test_load_records_and_history_and_removal_on_deletion(tmp_path: Path) -> None:
    history = tmp_path / "load-history"
    async with await EmbeddedStore.open(tmp_path / "store.db") as store:
        await store.create(
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": CLUSTER_CONFIGMAP, "namespace": "scalable-topics"},
                "data": {CLUSTER_CONFIGMAP_KEY: "loadReportIntervalSeconds: 0.2\n"},
            }
        )
        info = SegmentInfo(0, HashRange(0, 0xFFFF), SegmentState.ACTIVE, 0, datetime.now(UTC))
        await store.create(segment_object(NS, TOPIC, info, None))
        broker = BrokerProcess(
            tmp_path,
            f"embedded://{tmp_path / 'store.db'}",
            None,
            "--broker-id",
            "b-1",
            "--load-history",
            str(history),
            "--load-history-flush",
            "0.3",
        )
        await broker.start()
        try:
            status, payload = await broker.admin("PUT", f"/{NS}/{TOPIC}/{DESCRIPTOR}", {})
            assert status == 201, payload
            client = await WireClient.connect(broker.ws_url)
            try:
                await client.open_producer(1, f"{NS}/{TOPIC}", 0)
                for sequence in range(SENT // 10):
                    batch = [BatchMessage(b"x" * 10, f"k{i}") for i in range(10)]
                    await client.send_batch(1, sequence * 10, batch)
            finally:
                await client.close()

            async def recorded() -> bool:
                obj = await store.get(Segment.KIND, NS, f"{TOPIC}-{DESCRIPTOR}")
                load = (obj.get("status") or {}).get("load") or {}
                return bool(load.get("msgRateIn"))

            await eventually(recorded, "a load record with the messages sent")
            # Every message is in exactly one sample: the rates times the intervals (to the
            # microsecond the timestamps keep).
            await eventually(
                lambda: round(messages_in(history_rows(history))) == SENT,
                "every message sent in the history",
            )
            rows = history_rows(history)
            assert {(r["namespace"], r["topic"], r["segment_id"], r["broker"]) for r in rows} == {
                (NS, TOPIC, 0, "b-1")
            }
            assert all(path.name.startswith("b-1-") for path in history.rglob("*.parquet"))
            assert await metric(broker, "st_broker_load_record_writes_total") >= 1
            assert await metric(broker, "st_broker_load_history_rows_written_total") >= len(rows)

            # The segment is deleted (as garbage collection or a topic deletion does).
            status, payload = await broker.admin("DELETE", f"/{NS}/{TOPIC}/{DESCRIPTOR}")
            assert status in (200, 204), payload
            await store.delete(Segment.KIND, NS, f"{TOPIC}-{DESCRIPTOR}")
            await eventually(lambda: not history_rows(history), "the segment's rows removed")

            async def forgotten() -> bool:
                return await metric(broker, "st_broker_load_records_cached") == 0

            await eventually(forgotten, "the reporter's cache emptied")
        finally:
            broker.stop()
