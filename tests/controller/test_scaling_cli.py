"""``stctl topics split/merge`` end to end: a broker and a controller process, the CLI as a
user runs it."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path

import pytest

from scalable_topics.model.layout import ChangeKind, SegmentLayout
from scalable_topics.model.resources import ScalableTopic
from scalable_topics.model.scale_request import request_annotations
from scalable_topics.store import EmbeddedStore
from support.broker_process import BrokerProcess
from support.controller_process import ControllerProcess

pytestmark = pytest.mark.slow


def stctl(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "scalable_topics.cli", *args],
        capture_output=True,
        text=True,
        timeout=120,
    )


async def test_split_and_merge_from_the_command_line(tmp_path: Path) -> None:
    store_url = f"embedded://{tmp_path / 'store.db'}"
    broker = BrokerProcess(tmp_path, store_url)
    await broker.start()
    controller = ControllerProcess(tmp_path, store_url, "controller-0")
    controller.start()
    try:
        async with await EmbeddedStore.open(tmp_path / "store.db") as store:
            await store.create(
                ScalableTopic.model_validate(
                    {"metadata": {"name": "orders", "namespace": "default"}}
                ).to_wire()
            )
            async with asyncio.timeout(60):
                while (
                    ScalableTopic.model_validate(
                        await store.get(ScalableTopic.KIND, "default", "orders")
                    ).status.phase
                    != "Ready"
                ):
                    await asyncio.sleep(0.05)

            split = await asyncio.to_thread(
                stctl, "topics", "split", "orders", "0", "--url", broker.ws_url
            )
            assert split.returncode == 0, split.stderr
            assert split.stdout.strip() == (
                "segment 0 split into 1 (0000-7fff), 2 (8000-ffff) at epoch 1"
            )

            # Impossible: refused before anything is written, with the reason.
            before = ScalableTopic.model_validate(
                await store.get(ScalableTopic.KIND, "default", "orders")
            )
            refused = await asyncio.to_thread(
                stctl, "topics", "merge", "orders", "1", "1", "--url", broker.ws_url
            )
            assert refused.returncode == 1
            assert refused.stderr.strip() == (
                "stctl topics merge: cannot merge segment 1 with itself"
            )
            topic = ScalableTopic.model_validate(
                await store.get(ScalableTopic.KIND, "default", "orders")
            )
            assert not topic.metadata.annotations
            assert topic.status.last_operation == before.status.last_operation

            merge = await asyncio.to_thread(
                stctl, "topics", "merge", "orders", "2", "1", "--url", broker.ws_url, "-o", "json"
            )
            assert merge.returncode == 0, merge.stderr
            assert '"result": "Succeeded"' in merge.stdout
            topic = ScalableTopic.model_validate(
                await store.get(ScalableTopic.KIND, "default", "orders")
            )
            layout = SegmentLayout.from_status(topic.status.to_wire())
            assert [(s.segment_id, s.parent_ids) for s in layout.active] == [(3, (1, 2))]

            missing = await asyncio.to_thread(
                stctl, "topics", "split", "nope", "0", "--url", broker.ws_url
            )
            assert missing.returncode == 1
            assert missing.stderr.strip() == "stctl topics split: topic default/nope not found"

            # Another request holds the topic (no controller answers it now): refused at once.
            controller.kill()
            await store.patch(
                ScalableTopic.KIND,
                "default",
                "orders",
                {"metadata": {"annotations": request_annotations(ChangeKind.SPLIT, (3,), "ops")}},
            )
            busy = await asyncio.to_thread(
                stctl, "topics", "merge", "orders", "1", "3", "--url", broker.ws_url
            )
            assert busy.returncode == 1
            assert busy.stderr.strip() == (
                "stctl topics merge: an operation is in progress on topic default/orders: split "
                "of segment 3 (requested by ops) is waiting for the topic's controller; ask "
                "again when it is over"
            )
    finally:
        controller.kill()
        broker.stop()
