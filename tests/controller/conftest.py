"""Broker applications on loopback for controller tests."""

from __future__ import annotations

import socket
from collections.abc import Callable
from pathlib import Path

import pytest
from aiohttp.test_utils import TestServer

from scalable_topics.broker.app import build_app
from scalable_topics.broker.config import BrokerConfig
from scalable_topics.store import Store

BrokerFactory = Callable[[Store, str], TestServer]


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture
def make_broker(tmp_path: Path) -> BrokerFactory:
    """A broker application (not yet started) that advertises the port it will listen on."""

    def make(store: Store, name: str) -> TestServer:
        port = _free_port()
        config = BrokerConfig(data_dir=tmp_path / name, store_url="embedded:unused.db", port=port)
        return TestServer(build_app(config, store=store), host="127.0.0.1", port=port)

    return make
