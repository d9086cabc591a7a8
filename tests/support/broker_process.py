"""A real broker process on loopback that tests can kill and restart on the same data."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path

import aiohttp

from .child_process import kill, terminate
from .ports import reported_address

STARTUP_TIMEOUT = 30.0


class BrokerProcess:
    """A ``stctl broker`` child process that tests can kill and restart on the same data.

    Without a port it binds a free one itself (``--port 0``) and reports it in its address
    file; a restart keeps that port, so the broker keeps its identity and URL."""

    def __init__(self, root: Path, store_url: str, port: int | None = None, *extra: str) -> None:
        self.extra = list(extra)
        self.data_dir = root / "broker"
        self.store_url = store_url
        self.port = port or 0  # known once the first start has reported it
        self.address_file = root / "broker.address"
        self.log_path = root / "broker.log"
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        assert self.port, "the broker has not started yet"
        return f"http://127.0.0.1:{self.port}"

    @property
    def ws_url(self) -> str:
        assert self.port, "the broker has not started yet"
        return f"ws://127.0.0.1:{self.port}"

    async def start(self) -> None:
        self.address_file.unlink(missing_ok=True)
        log = open(self.log_path, "ab")  # noqa: SIM115 - the child owns it
        self.process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "scalable_topics.cli",
                "broker",
                "--data-dir",
                str(self.data_dir),
                "--store",
                self.store_url,
                "--port",
                str(self.port),
                "--address-file",
                str(self.address_file),
                *self.extra,
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        log.close()
        _, self.port = await reported_address(self.address_file, self.process, self.log_path)
        async with aiohttp.ClientSession() as http, asyncio.timeout(STARTUP_TIMEOUT):
            while True:
                if self.process.poll() is not None:
                    raise RuntimeError(f"broker exited at start:\n{self.log_path.read_text()}")
                try:
                    async with http.get(self.url + "/healthz") as response:
                        if response.status == 200:
                            return
                except aiohttp.ClientError:
                    pass
                await asyncio.sleep(0.05)

    def kill(self) -> None:
        kill(self.process)

    def stop(self) -> None:
        terminate(self.process)

    async def admin(
        self,
        method: str,
        path: str,
        body: object | None = None,
        headers: dict[str, str] | None = None,
    ) -> tuple[int, object]:
        async with (
            aiohttp.ClientSession() as http,
            http.request(
                method, self.url + "/admin/v1/segments" + path, json=body, headers=headers
            ) as response,
        ):
            payload = await response.json() if response.content_type == "application/json" else None
            return response.status, payload
