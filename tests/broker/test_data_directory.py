"""One broker per data directory: a second one is refused before it touches a segment, and the
segments of the one that holds it keep no per-directory locks (three open files each)."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path

import aiohttp

from scalable_topics.admin.broker_admin import BrokerAdmin
from scalable_topics.broker.open_files import FILES_PER_SEGMENT
from scalable_topics.store import EmbeddedStore
from support.broker_process import BrokerProcess


def open_files(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


async def test_a_second_broker_on_the_same_data_directory_is_refused(tmp_path: Path) -> None:
    store_url = f"embedded://{tmp_path / 'store.db'}"
    first = BrokerProcess(tmp_path, store_url)
    await first.start()
    try:
        second = await asyncio.to_thread(
            subprocess.run,
            [
                sys.executable,
                "-m",
                "scalable_topics.cli",
                "broker",
                "--data-dir",
                str(first.data_dir),
                "--store",
                store_url,
                "--port",
                "0",
            ],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert second.returncode == 1
        assert f"the data directory {first.data_dir} is in use by another broker" in second.stderr
        assert "Traceback" not in second.stderr
    finally:
        first.stop()


async def test_a_hosted_segment_keeps_three_files_open(tmp_path: Path) -> None:
    async with await EmbeddedStore.open(tmp_path / "store.db"):
        broker = BrokerProcess(tmp_path, f"embedded://{tmp_path / 'store.db'}")
        await broker.start()
        try:
            assert broker.process is not None
            counts = []
            async with aiohttp.ClientSession() as http:  # one connection, kept alive throughout
                admin = BrokerAdmin(http)
                for index in range(40):
                    if index in (20, 39):
                        counts.append(open_files(broker.process.pid))
                    await admin.create_segment(broker.ws_url, "default", f"t{index}", "0000-ffff-0")
            assert counts[1] - counts[0] == 19 * FILES_PER_SEGMENT == 57
        finally:
            broker.stop()
