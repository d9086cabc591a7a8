"""Broker applications on loopback for controller tests."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from aiohttp.test_utils import TestServer

from scalable_topics.store import Store
from support.servers import broker_server

BrokerFactory = Callable[[Store, str], TestServer]


@pytest.fixture
def make_broker(tmp_path: Path) -> BrokerFactory:
    """A broker application (not yet started) that advertises the port it will listen on."""

    def make(store: Store, name: str) -> TestServer:
        return broker_server(store, tmp_path / name)

    return make
