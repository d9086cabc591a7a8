"""Servers bind their port themselves, 0 for a free one, and report it: listening.py, and
``stctl broker --port 0`` / ``stctl controller --listen HOST:0`` with ``--address-file``."""

from __future__ import annotations

import errno
import socket
import subprocess
import sys
from pathlib import Path

import aiohttp
import pytest
from hypothesis import given
from hypothesis import strategies as st

from scalable_topics.listening import (
    bound_address,
    format_address,
    listening_socket,
    parse_address,
    read_address_file,
    write_address_file,
)
from scalable_topics.model.placement import BROKER_URL_ANNOTATION, broker_lease_name
from scalable_topics.model.resources import (
    CONTROLLER_ENDPOINT_ANNOTATION,
    ScalableTopic,
)
from scalable_topics.store import EmbeddedStore, NotFound
from support.broker_process import BrokerProcess
from support.controller_process import ControllerProcess
from support.eventually import eventually
from support.leases import topic_lease

hosts = st.one_of(
    st.ip_addresses().map(str),
    st.from_regex(r"[a-z][a-z0-9-]{0,20}(\.[a-z0-9-]{1,10})*", fullmatch=True),
)


@given(host=hosts, port=st.integers(0, 65535))
def test_an_address_reads_back_as_written(host: str, port: int) -> None:
    assert parse_address(format_address(host, port)) == (host, port)


@pytest.mark.parametrize("text", ["7000", ":7000", "host:", "host:http", "host:65536", "host:-1"])
def test_a_malformed_address_is_refused(text: str) -> None:
    with pytest.raises(ValueError, match="expected HOST:PORT"):
        parse_address(text)


def test_the_address_file_is_replaced_whole(tmp_path: Path) -> None:
    path = tmp_path / "run" / "broker.address"
    assert read_address_file(path) is None
    write_address_file(path, "127.0.0.1", 7000)
    write_address_file(path, "::1", 7001)
    assert path.read_text() == "[::1]:7001\n"
    assert read_address_file(path) == ("::1", 7001)
    assert [p.name for p in path.parent.iterdir()] == ["broker.address"]  # no temporary left


def test_a_free_port_stays_taken_until_the_socket_closes() -> None:
    sock = listening_socket("127.0.0.1", 0)
    host, port = bound_address(sock)
    assert (host, port != 0) == ("127.0.0.1", True)
    with socket.socket() as other:
        other.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        with pytest.raises(OSError, match="in use") as taken:
            other.bind(("127.0.0.1", port))
        assert taken.value.errno == errno.EADDRINUSE
    sock.close()
    listening_socket("127.0.0.1", port).close()


# -- the commands --------------------------------------------------------------------------------


def _stctl(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "scalable_topics.cli", *args],
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.mark.slow
@pytest.mark.parametrize("command", ["broker", "controller"])
def test_a_port_in_use_is_one_clear_error(tmp_path: Path, command: str) -> None:
    with listening_socket("127.0.0.1", 0) as taken:
        port = bound_address(taken)[1]
        store = ("--store", f"embedded://{tmp_path / 'store.db'}")
        if command == "broker":
            result = _stctl("broker", "--data-dir", str(tmp_path), *store, "--port", str(port))
        else:
            result = _stctl("controller", *store, "--listen", f"127.0.0.1:{port}")
    assert result.returncode == 1
    assert result.stderr.startswith(f"stctl {command}: cannot listen on 127.0.0.1:{port}: ")
    assert result.stderr.count("\n") == 1 and "in use" in result.stderr


@pytest.mark.slow
async def test_a_broker_on_port_0_registers_the_port_it_listens_on(
    tmp_path: Path, store: EmbeddedStore
) -> None:
    broker = BrokerProcess(tmp_path, f"embedded://{tmp_path / 'store.db'}")
    await broker.start()  # --port 0 --address-file: its port is known from here on
    try:
        identity = f"127.0.0.1:{broker.port}"

        async def registered() -> bool:
            try:
                await store.get("Lease", "scalable-topics", broker_lease_name(identity))
            except NotFound:
                return False
            return True

        await eventually(registered, f"the Lease of broker {identity}")
        lease = await store.get("Lease", "scalable-topics", broker_lease_name(identity))
        assert lease["spec"]["holderIdentity"] == identity
        assert lease["metadata"]["annotations"][BROKER_URL_ANNOTATION] == broker.ws_url
    finally:
        broker.stop()


@pytest.mark.slow
async def test_a_controller_on_port_0_publishes_the_endpoint_it_listens_on(
    tmp_path: Path, store: EmbeddedStore
) -> None:
    controller = ControllerProcess(
        tmp_path, f"embedded://{tmp_path / 'store.db'}", "controller-0", listen=True
    )
    controller.start()
    try:
        port = await controller.listening_port()
        await store.create(
            ScalableTopic.model_validate(
                {"metadata": {"name": "orders", "namespace": "default"}, "spec": {}}
            ).to_wire()
        )

        async def led() -> bool:
            try:
                lease = await topic_lease(store, "default", "orders")
            except NotFound:
                return False
            return bool(lease["spec"].get("holderIdentity") == "controller-0")

        await eventually(led, "controller-0 to lead orders")
        lease = await topic_lease(store, "default", "orders")
        endpoint = lease["metadata"]["annotations"][CONTROLLER_ENDPOINT_ANNOTATION]
        assert endpoint == f"http://127.0.0.1:{port}"
        async with aiohttp.ClientSession() as http, http.get(endpoint + "/healthz") as response:
            assert response.status == 200
    finally:
        controller.stop()
